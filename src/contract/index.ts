// The wire contract between chatd and the workspace agent (CONTRACT.md), shared by both.
export * from "./clock.ts";
export * from "./ids.ts";
export * from "./uuid.ts";
export * from "./errors.ts";
export * from "./headers.ts";
export * from "./types.ts";
export * from "./client.ts";
export {
  AgentTimeoutError,
  DEFAULT_REQUEST_TIMEOUT_MS,
  type AgentRequestRecord,
  type CallOptions,
  type ToolCall,
} from "./exchange.ts";
export * from "./transport.ts";
export * from "./dialout.ts";
export * from "./assert.ts";
export * from "./address-policy.ts";
export * from "./utf8.ts";
