// Secrets at rest (box.ts: AES-256-GCM, versioned, bound to their slot; columns.ts: which
// columns hold them, and the start-up pass that seals plaintext and re-seals after rotation).

export {
  SECRET_KEY_BYTES,
  SecretKeyError,
  SecretOpenError,
  createSecretBox,
  ephemeralSecretBox,
  generateSecretKey,
  isSealed,
  parseSecretKey,
  secretKeyId,
  secretSlot,
  type SecretBox,
  type SecretKeys,
} from "./box.ts";
export {
  SEALED_COLUMNS,
  SLOTS,
  purgeOldRowVersions,
  sealAtRest,
  type SealReport,
  type SealedColumn,
} from "./columns.ts";
