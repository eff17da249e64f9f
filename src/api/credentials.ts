// Credentials: passwords stored as scrypt hashes (each with its own salt and cost), API tokens
// made of 32 random bytes and stored only as their SHA-256, never the secret itself.

import {
  createHash,
  randomBytes,
  randomUUID,
  scrypt,
  timingSafeEqual,
  type ScryptOptions,
} from "node:crypto";
import type { Queryable } from "../chatd/db/index.ts";

/** scrypt cost parameters of new hashes (the stored hash carries its own). */
const SCRYPT_N = 16384;
const SCRYPT_R = 8;
const SCRYPT_P = 1;
const SCRYPT_KEY_BYTES = 32;
const SCRYPT_SALT_BYTES = 16;
const SCRYPT_MAX_MEMORY_BYTES = 64 * 1024 * 1024;
const TOKEN_BYTES = 32;
export const TOKEN_PREFIX = "tether_";

function scryptAsync(password: string, salt: Buffer, o: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password, salt, SCRYPT_KEY_BYTES, o, (err, key) => (err ? reject(err) : resolve(key)));
  });
}

/** `scrypt$N$r$p$salt$hash`, salt and hash in base64url, with a fresh random salt. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SCRYPT_SALT_BYTES);
  const o = { N: SCRYPT_N, r: SCRYPT_R, p: SCRYPT_P, maxmem: SCRYPT_MAX_MEMORY_BYTES };
  const key = await scryptAsync(password, salt, o);
  return [
    "scrypt",
    SCRYPT_N,
    SCRYPT_R,
    SCRYPT_P,
    salt.toString("base64url"),
    key.toString("base64url"),
  ].join("$");
}

/** True only when `password` matches `stored`; a malformed hash never matches. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split("$");
  if (scheme !== "scrypt" || !n || !r || !p || salt === undefined || hash === undefined)
    return false;
  const expected = Buffer.from(hash, "base64url");
  if (expected.length !== SCRYPT_KEY_BYTES) return false;
  const o = { N: Number(n), r: Number(r), p: Number(p), maxmem: SCRYPT_MAX_MEMORY_BYTES };
  let key: Buffer;
  try {
    key = await scryptAsync(password, Buffer.from(salt, "base64url"), o);
  } catch {
    return false;
  }
  return timingSafeEqual(key, expected);
}

export function hashToken(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

/**
 * Creates a token for `userId`; the secret is in the answer and nowhere else. `nowMs` (the
 * API's clock) is its creation time, from which a session's idle time counts until first used;
 * `expiresAtMs` ends an API token.
 */
export async function issueToken(
  q: Queryable,
  userId: string,
  name: string,
  kind: "api" | "session" = "api",
  o: { nowMs?: number; expiresAtMs?: number } = {},
): Promise<{ id: string; token: string }> {
  const id = randomUUID();
  const token = TOKEN_PREFIX + randomBytes(TOKEN_BYTES).toString("base64url");
  await q.query(
    `INSERT INTO api_tokens (id, user_id, name, token_hash, kind, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, to_timestamp($6::float8 / 1000), to_timestamp($7::float8 / 1000))`,
    [id, userId, name, hashToken(token), kind, o.nowMs ?? Date.now(), o.expiresAtMs ?? null],
  );
  return { id, token };
}
