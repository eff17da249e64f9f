// The workspace agent's processes (CONTRACT.md 7): the process manager the routes and the
// cancel use, and the head/tail output buffer every process writes into.

export {
  CLOSE_WAIT_MS,
  DEFAULT_EXIT_GRACE_MS,
  LIST_MAX,
  OUTPUT_WAIT_MAX_MS,
  ProcessManager,
  REAP_AFTER_MS,
  type ProcessManagerOptions,
  type SignalResult,
  type StartOptions,
  type StartResult,
} from "./manager.ts";
export {
  HEAD_BYTES,
  LINE_TRUNCATION_SUFFIX,
  MAX_LINE_BYTES,
  OutputBuffer,
  TAIL_BYTES,
  type RenderedOutput,
} from "./output.ts";
