// Dial-out agents, the server's side: the hub of this replica's agent connections, the registry
// of who holds which, the transport that reaches an agent wherever it is connected, and the
// relay between replicas.
export {
  AGENT_RECONCILE_INTERVAL_MS,
  AGENT_ROUTE_POLL_MS,
  AGENT_SUPERSEDE_TOLERANCE_MS,
  AgentHub,
  type AcceptOutcome,
  type AgentHandshake,
  type AgentHubOptions,
} from "./hub.ts";
export {
  AGENT_CHANNEL,
  agentConnection,
  agentConnections,
  dropAgentConnection,
  type AgentConnectionInfo,
} from "./registry.ts";
export {
  AGENT_RELAY_BODY_LIMIT_BYTES,
  RelayClient,
  agentExchangeRoute,
  serveRelayedExchange,
} from "./relay.ts";
export {
  AGENT_SESSION_PING_INTERVAL_MS,
  AGENT_SESSION_PING_TIMEOUT_MS,
  openAgentSession,
  readAnswer,
  refuseAgentUpgrade,
  requestOnSession,
  type AgentSessionOptions,
  type SessionRequest,
  type SessionResponse,
} from "./session.ts";
export {
  DialoutTransport,
  type AgentRelay,
  type AgentRoute,
  type AgentRouter,
  type DialoutTransportOptions,
} from "./transport.ts";
