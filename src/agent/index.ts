// The workspace agent: serves the tool call contract (CONTRACT.md) for one workspace.
export {
  AGENT_API_VERSION,
  AGENT_VERSION,
  WRITE_FILE_BODY_LIMIT_BYTES,
  createAgentServer,
  type AgentServer,
  type AgentServerOptions,
} from "./server.ts";
export { JSON_BODY_LIMIT_BYTES } from "./http-router.ts";
export { AGE_MARGIN_MS, ToolCallStore } from "./toolcalls/store.ts";
