// The prompt a chat's model step sends (docs/prompt.md): the versioned system prompt with the
// chat's context snapshot, the model messages from the latest compaction boundary, and the
// compaction rules. Everything else in this folder stays inside.

export { BASE_PROMPT, PROMPT_VERSION, environmentBlock, systemPrompt } from "./system.ts";
export { SUMMARY_LEAD, sinceBoundary, toModelMessages } from "./messages.ts";
export {
  CONTEXT_CAPTURE_TIMEOUT_MS,
  ORGANIZATION_INSTRUCTIONS_MAX_BYTES,
  captureSnapshot,
  captureTimeoutMs,
  ContextPrefetch,
  instructionsOf,
  INSTRUCTIONS_KEY,
  takeSnapshot,
  contextView,
  loadSnapshot,
  organizationInstructions,
  replaceSnapshot,
  setOrganizationInstructions,
  type ContextSnapshot,
  type ContextView,
  type KeptSnapshot,
} from "./context.ts";
export {
  COMPACTION_OFF_PERCENT,
  COMPACTION_PROMPT,
  COMPACTION_PROMPT_HEAD,
  ContextTooLongError,
  DEFAULT_COMPACT_THRESHOLD_PERCENT,
  DEFAULT_CONTEXT_LIMIT_TOKENS,
  compactionDue,
  contextBudget,
  compactionDueAfterStep,
  compactionRequest,
  isContextTooLong,
  thresholdTokens,
  toolResultBudgetBytes,
  type ContextBudget,
} from "./compaction.ts";
