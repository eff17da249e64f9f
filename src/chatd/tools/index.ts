// The tools chatd gives the model and the mapping of every agent answer to exactly one
// honest result (CHATD.md 6 and 7). Everything else in this folder stays inside.

export {
  TOOL_INPUTS,
  TOOL_NAMES,
  isToolName,
  sendsToolCallHeaders,
  toolDeclarations,
  type ToolInput,
  type ToolName,
} from "./declarations.ts";
export { MAX_DURATION_MS, formatDuration, parseDuration, type ParsedDuration } from "./duration.ts";
export { StaleToolCallError, WorkspaceRefusedError, workspaceRefusal } from "./failures.ts";
export type { ToolContext } from "./context.ts";
export { interruptResult, unsentResult, type InterruptOptions } from "./interrupt.ts";
export { runTool, type ToolCallRequest, type ToolOutcome } from "./run.ts";
export {
  UNKNOWN_REASONS,
  backgroundResult,
  canceledResult,
  errorResult,
  notAppliedResult,
  notRunResult,
  timedOutResult,
  unknownFileResult,
  unknownProcessResult,
  workspaceUnavailableResult,
  type BackgroundResult,
  type CanceledResult,
  type EditFilesResult,
  type ErrorResult,
  type ExecuteCompleted,
  type ExecuteResult,
  type FailedResult,
  type NotAppliedResult,
  type NotRunResult,
  type NotSentReason,
  type ProcessCompleted,
  type ProcessListResult,
  type ProcessOutputResult,
  type ProcessSignalResult,
  type ReadFileResult,
  type TimedOutResult,
  type ToolResult,
  type UnknownFileResult,
  type UnknownProcessResult,
  type UnknownReason,
  type WriteFileResult,
} from "./results.ts";
export { DEFAULT_TOOL_RESULT_BUDGET_BYTES, truncateToolResult } from "./truncate.ts";
