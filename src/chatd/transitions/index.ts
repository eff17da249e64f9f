// Chat transitions: the shared mechanism (core.ts; change.ts, the change notification), the API
// side (api.ts), the worker side (worker.ts, claim.ts: the leases), and what a runner holds of
// its chat between tasks (held.ts).
export { CHAT_CHANNEL, type ChatChange } from "./change.ts";
export { loadChat, loadHistory, loadModelHistory, type LocalClaim } from "./core.ts";
export * from "./api.ts";
export * from "./worker.ts";
export { acquire, claimIn, heartbeat, type Acquired, type ClaimedStart } from "./claim.ts";
export type { ChangePart, Written } from "./fenced.ts";
export { retryingOf, type Retrying } from "./retrying.ts";
export { HELD_CHAT_MS, HeldChat, keptSnapshot } from "./held.ts";
export { committedMessage, messageRecord } from "./message-rows.ts";
