// The dial-out connection's handshake, shared by the agent that dials and the server that
// answers: an HTTP/1.1 upgrade of `GET AGENT_CONNECT_PATH` with the agent token as a bearer,
// after which the socket carries HTTP/2 in reverse (the server is the client, the agent the
// server) and every request on it is a request of this contract, unchanged. Only durations
// cross it (the agent's uptime), never a clock's reading.

/** The route an agent dials, on the server's access URL. */
export const AGENT_CONNECT_PATH = "/api/v1/agents/connect";

/** The `Upgrade` protocol token of the handshake. */
export const AGENT_UPGRADE_PROTOCOL = "tether-agent";

/**
 * Request header: how long the agent's record store has existed (ms, decimal), read as the
 * request goes out. The server keeps `now − uptime` on its own clock to tell how far past the
 * contract's age margin the agent is, without comparing clocks.
 */
export const AGENT_UPTIME_HEADER = "x-tether-agent-uptime-ms";

/**
 * Request header: a random ID of the agent process, the same on every reconnect of one
 * process, so the server tells a reconnect from another process holding the same token.
 */
export const AGENT_INSTANCE_HEADER = "x-tether-agent-instance";

/** Codes of the handshake's refusals (a JSON body `{message, code}`). */
export const AGENT_CONNECT_CODES = {
  /** 401: the token is unknown or revoked. */
  unauthorized: "agent_token_invalid",
  /** 409: another, newer agent process holds this workspace's connection. */
  superseded: "agent_superseded",
  /** 503: the server is starting or stopping; dial again (another replica, maybe). */
  unavailable: "agent_connect_unavailable",
} as const;
