// Secrets at rest: every secret the server keeps (a provider API key, an agent token, the
// replica secret) is sealed with AES-256-GCM before it reaches the database and opened only
// where it is used. A sealed value names its format version and the ID of its key, and its
// authenticated data binds it to its slot (column and row), so a value copied into another
// row or column does not open: a database that leaks, or is edited, gives away nothing.
//
// Stored format (every part base64url): `v1:<key id>:<iv>:<ciphertext>:<tag>`.

import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";

/** A key is 32 random bytes (AES-256). */
export const SECRET_KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const VERSION = "v1";
/** Characters of a key ID: 48 bits of SHA-256, enough to tell a handful of keys apart. */
const KEY_ID_CHARS = 8;
const B64URL = "[A-Za-z0-9_-]";
const SEALED_RE = new RegExp(
  `^${VERSION}:(${B64URL}{${KEY_ID_CHARS}}):(${B64URL}{16}):(${B64URL}*):(${B64URL}{22})$`,
);

/** A key that is not 32 bytes in base64, base64url or hex. */
export class SecretKeyError extends Error {
  override readonly name = "SecretKeyError";
}

/** A sealed value that does not open: another key, another slot, or edited bytes. */
export class SecretOpenError extends Error {
  override readonly name = "SecretOpenError";
  constructor(
    readonly slot: string,
    readonly keyId: string | undefined,
    reason: string,
  ) {
    super(`The secret in ${slot} does not open: ${reason}`);
  }
}

/**
 * Parses a key as written in TETHER_SECRET_KEY or a key file: 32 bytes as base64 (44
 * characters, `openssl rand -base64 32`), base64url (43) or hex (64); surrounding white space
 * is ignored. `source` names where it came from, for the error.
 */
export function parseSecretKey(text: string, source: string): Buffer {
  const t = text.trim();
  let key: Buffer | undefined;
  if (/^[0-9a-fA-F]{64}$/.test(t)) key = Buffer.from(t, "hex");
  else if (/^[A-Za-z0-9+/]{43}=$/.test(t)) key = Buffer.from(t, "base64");
  else if (/^[A-Za-z0-9_-]{43}$/.test(t)) key = Buffer.from(t, "base64url");
  if (key?.length !== SECRET_KEY_BYTES) {
    throw new SecretKeyError(
      `${source} is not a secret key: it must be ${SECRET_KEY_BYTES} bytes in base64 or hex (make one with \`openssl rand -base64 32\`).`,
    );
  }
  return key;
}

/** A new random key, in base64 (what parseSecretKey reads). */
export function generateSecretKey(): string {
  return randomBytes(SECRET_KEY_BYTES).toString("base64");
}

/** The ID a key's sealed values carry: a short hash of the key, which reveals nothing of it. */
export function secretKeyId(key: Buffer): string {
  return createHash("sha256")
    .update("tether secret key id\0")
    .update(key)
    .digest("base64url")
    .slice(0, KEY_ID_CHARS);
}

/** Where a secret lives: `<table>.<column>/<row key>`; a sealed value opens only there. */
export function secretSlot(column: string, rowKey: string): string {
  return `${column}/${rowKey}`;
}

/** The parts of a sealed value, or undefined when `stored` is not one (plaintext). */
function parseSealed(
  stored: string,
): { keyId: string; iv: Buffer; ct: Buffer; tag: Buffer } | undefined {
  const m = SEALED_RE.exec(stored);
  if (!m) return undefined;
  return {
    keyId: m[1]!,
    iv: Buffer.from(m[2]!, "base64url"),
    ct: Buffer.from(m[3]!, "base64url"),
    tag: Buffer.from(m[4]!, "base64url"),
  };
}

/** Whether `stored` has the sealed format (of any key). */
export function isSealed(stored: string): boolean {
  return parseSealed(stored) !== undefined;
}

export interface SecretBox {
  /** The ID of the key new values are sealed with. */
  readonly keyId: string;
  /** Seals `plaintext` for `slot` (secretSlot) with the current key. */
  seal(plaintext: string, slot: string): string;
  /**
   * The plaintext of a value sealed for `slot` with the current or an old key. A value that is
   * not sealed (a row written before encryption, sealed at the next start) is returned as it
   * is. Throws SecretOpenError when the value does not open.
   */
  open(stored: string, slot: string): string;
  /** seal, passing null and undefined through as null. */
  sealOrNull(plaintext: string | null | undefined, slot: string): string | null;
  /** open, passing null and undefined through as null. */
  openOrNull(stored: string | null | undefined, slot: string): string | null;
  /** True when `stored` is sealed with the current key: nothing to re-seal. */
  isCurrent(stored: string): boolean;
}

export interface SecretKeys {
  /** Seals every new value; opens its own. */
  current: Buffer;
  /** Open only (rotation): values sealed with them are re-sealed with `current` at start. */
  old?: readonly Buffer[];
}

function aad(keyId: string, slot: string): Buffer {
  return Buffer.from(`${VERSION}:${keyId}:${slot}`, "utf8");
}

export function createSecretBox(keys: SecretKeys): SecretBox {
  const byId = new Map<string, Buffer>();
  for (const k of [...(keys.old ?? []), keys.current]) {
    if (k.length !== SECRET_KEY_BYTES) throw new SecretKeyError("A secret key must be 32 bytes.");
    byId.set(secretKeyId(k), k);
  }
  const keyId = secretKeyId(keys.current);
  const current = keys.current;

  const seal = (plaintext: string, slot: string): string => {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", current, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(aad(keyId, slot));
    const ct = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
    const tag = cipher.getAuthTag();
    return [VERSION, keyId, iv, ct, tag]
      .map((p) => (typeof p === "string" ? p : p.toString("base64url")))
      .join(":");
  };

  const open = (stored: string, slot: string): string => {
    const p = parseSealed(stored);
    if (!p) return stored;
    const key = byId.get(p.keyId);
    if (!key) {
      throw new SecretOpenError(
        slot,
        p.keyId,
        `it is sealed with key ${p.keyId}, which this server does not have (set the old key in TETHER_SECRET_KEY_OLD).`,
      );
    }
    try {
      const decipher = createDecipheriv("aes-256-gcm", key, p.iv, { authTagLength: TAG_BYTES });
      decipher.setAAD(aad(p.keyId, slot));
      decipher.setAuthTag(p.tag);
      return Buffer.concat([decipher.update(p.ct), decipher.final()]).toString("utf8");
    } catch {
      throw new SecretOpenError(slot, p.keyId, "it was altered or belongs to another row.");
    }
  };

  return {
    keyId,
    seal,
    open,
    sealOrNull: (plaintext, slot) =>
      plaintext === null || plaintext === undefined ? null : seal(plaintext, slot),
    openOrNull: (stored, slot) =>
      stored === null || stored === undefined ? null : open(stored, slot),
    isCurrent: (stored) => parseSealed(stored)?.keyId === keyId,
  };
}

/** A box with a random key of its own (tests, and an API built without one). */
export function ephemeralSecretBox(): SecretBox {
  return createSecretBox({ current: randomBytes(SECRET_KEY_BYTES) });
}
