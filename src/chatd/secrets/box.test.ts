import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  createSecretBox,
  generateSecretKey,
  isSealed,
  parseSecretKey,
  SecretKeyError,
  SecretOpenError,
  secretKeyId,
} from "./box.ts";

const key = () => randomBytes(32);

describe("secret box", () => {
  it("a sealed value holds nothing of its plaintext and opens to it in its slot", () => {
    const box = createSecretBox({ current: key() });
    const sealed = box.seal("sk-live-abcdef", "model_configs.api_key/1");
    expect(sealed).not.toContain("sk-live");
    expect(sealed).toMatch(
      /^v1:[A-Za-z0-9_-]{8}:[A-Za-z0-9_-]{16}:[A-Za-z0-9_-]*:[A-Za-z0-9_-]{22}$/,
    );
    expect(sealed.split(":")[1]).toBe(box.keyId);
    expect(box.open(sealed, "model_configs.api_key/1")).toBe("sk-live-abcdef");
    // Random IVs: the same secret sealed twice looks different.
    expect(box.seal("sk-live-abcdef", "model_configs.api_key/1")).not.toBe(sealed);
    expect(box.isCurrent(sealed)).toBe(true);
  });

  it("a value moved to another row or column, or edited, does not open", () => {
    const box = createSecretBox({ current: key() });
    const sealed = box.seal("tok", "workspaces.agent_token/a");
    expect(() => box.open(sealed, "workspaces.agent_token/b")).toThrow(SecretOpenError);
    expect(() => box.open(sealed, "model_configs.api_key/a")).toThrow(SecretOpenError);
    const parts = sealed.split(":");
    parts[3] = Buffer.from("tok-edited").toString("base64url");
    expect(() => box.open(parts.join(":"), "workspaces.agent_token/a")).toThrow(SecretOpenError);
  });

  it("another key does not open it; with the old key set (rotation) it opens and is not current", () => {
    const oldKey = key();
    const newKey = key();
    const sealed = createSecretBox({ current: oldKey }).seal("s", "x/1");
    expect(() => createSecretBox({ current: newKey }).open(sealed, "x/1")).toThrow(
      /sealed with key .* TETHER_SECRET_KEY_OLD/,
    );
    const rotating = createSecretBox({ current: newKey, old: [oldKey] });
    expect(rotating.open(sealed, "x/1")).toBe("s");
    expect(rotating.isCurrent(sealed)).toBe(false);
    expect(rotating.keyId).toBe(secretKeyId(newKey));
  });

  it("a plaintext value (a row from before encryption) opens as it is and is not current", () => {
    const box = createSecretBox({ current: key() });
    expect(isSealed("plain-token")).toBe(false);
    expect(box.open("plain-token", "x/1")).toBe("plain-token");
    expect(box.isCurrent("plain-token")).toBe(false);
    expect(box.openOrNull(null, "x/1")).toBeNull();
    expect(box.sealOrNull(undefined, "x/1")).toBeNull();
  });

  it("keys are 32 bytes in base64, base64url or hex; anything else is refused with how to make one", () => {
    const raw = key();
    expect(parseSecretKey(raw.toString("base64"), "k")).toEqual(raw);
    expect(parseSecretKey(` ${raw.toString("base64url")}\n`, "k")).toEqual(raw);
    expect(parseSecretKey(raw.toString("hex"), "k")).toEqual(raw);
    expect(parseSecretKey(generateSecretKey(), "k")).toHaveLength(32);
    for (const bad of ["", "short", randomBytes(16).toString("base64"), "x".repeat(64)]) {
      expect(() => parseSecretKey(bad, "TETHER_SECRET_KEY")).toThrow(SecretKeyError);
    }
    expect(() => parseSecretKey("nope", "TETHER_SECRET_KEY")).toThrow(/openssl rand -base64 32/);
  });
});
