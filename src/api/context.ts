// What the API is built from (ApiOptions) and what every route group gets (ApiContext): its own
// module, so route groups import it without importing the app that imports them.

import type { FastifyBaseLogger } from "fastify";
import type { AgentPool } from "../chatd/agents.ts";
import type { AgentHub } from "../chatd/dialout/index.ts";
import type { Database } from "../chatd/db/index.ts";
import type { SecretBox } from "../chatd/secrets/index.ts";
import type { MessageFeed } from "../chatd/message-feed.ts";
import type { LocalClaim } from "../chatd/transitions/index.ts";
import type { NewChat } from "../chatd/worker/worker.ts";
import type { StreamBuffer } from "../chatd/stream.ts";
import type { AddressPolicy, Clock } from "../contract/index.ts";
import type { Registry } from "../metrics/index.ts";
import type { WorkspaceServices } from "../workspaces/index.ts";
import type { ResolveHost } from "./agent-url.ts";
import type { ChatChanges } from "./changes.ts";
import type { ThrottleOptions } from "./throttle.ts";
import type { TokenRow } from "./auth.ts";
import type { TokenCache } from "./token-cache.ts";

export interface ApiOptions {
  /** Where users, tokens, chats and messages live. */
  db: Database;
  /** This replica's live parts, for the event streams. */
  buffer: StreamBuffer;
  /**
   * The messages this replica commits, for its event streams (shared with its worker, which
   * publishes its commits there): a stream sends them without reading. The API's own by default.
   */
  feed?: MessageFeed;
  /** Serves GET / (index.html) and the UI's files; without it, a page pointing to the API. */
  webRoot?: string;
  /** The default model config ID when a chat names none; null falls back to the `is_default` one. */
  defaultModelConfigId?: () => Promise<string | null>;
  /** The default workspace ID when a chat names none; null falls back to the `is_default` one. */
  defaultWorkspaceId?: () => Promise<string | null>;
  /**
   * This process as one of several replicas: its worker ID (a stream on a chat owned by another
   * worker relays the owner's live parts) and the secret replicas show each other. Without it
   * the API serves its own buffer's parts only and refuses every internal route.
   */
  replica?: { workerId: string; secret: string };
  /**
   * This replica's worker's claims (core.ts LocalClaim): a turn the API starts (a new chat with
   * a message, a message or an edit to an idle chat) runs on this replica, claimed in the
   * transaction that starts it. Without it (or when it answers undefined) every replica learns
   * of the runnable chat from its notification and the first to acquire it runs it. A claim
   * for a new chat is told its owner, workspace, model and first message (its agent is asked
   * ahead, and its first model step may be sent ahead: worker.ts).
   */
  localClaim?: (newChat?: NewChat) => LocalClaim | undefined;
  /** This replica's metrics, served without a token at GET /metrics. */
  metrics?: Registry;
  /**
   * Where the API logs what goes wrong (a 500's cause, a failed stream or relay); requests
   * themselves are not logged. Silent by default.
   */
  log?: FastifyBaseLogger;
  /** Login throttling (auth.ts), overridable by tests: a small delay, their own clock. */
  loginThrottle?: Partial<ThrottleOptions>;
  /**
   * Trust X-Forwarded-For/-Proto from a reverse proxy (Fastify's trustProxy): the audit log's
   * client address, login throttling per address and the session cookie's Secure flag follow
   * them. Off by default: only set it when a proxy in front strips those headers from clients.
   */
  trustProxy?: boolean;
  /** Bound on a workspace health check (`GET /api/v0/info` of its agent); 2 s by default. */
  healthTimeoutMs?: number;
  /**
   * How long a workspace's health is answered without checking again; 10 s by default. An older
   * one is still answered at once, while a check refreshes it in the background.
   */
  healthTtlMs?: number;
  /** The clock that ages health answers (tests move it); real time by default. */
  healthClock?: Clock;
  /** The clock of token expiry and session idle time (tests move it); real time by default. */
  clock?: Clock;
  /**
   * A browser session (a login's token) not used for this long ends: its next request is a 401
   * `session_expired`. DEFAULT_SESSION_IDLE_MS (7 days) by default.
   */
  sessionIdleMs?: number;
  /**
   * The clients of workspace agents, shared with the worker (one connection pool and request
   * observer per server). Without it the API keeps its own and closes it when it closes.
   */
  agents?: AgentPool;
  /**
   * The addresses an agent URL a member registers may have, checked at registration and, by
   * the AgentPool the API makes when none is given, on every connection; public addresses only
   * (isPublicAddress) by default. A given `agents` pool needs the same policy.
   */
  memberAgentAddresses?: AddressPolicy;
  /** Resolves an agent URL's host name at registration (tests fake DNS); dns.lookup by default. */
  resolveHost?: ResolveHost;
  /**
   * Bound on each agent request of the process routes (processes.ts); 10 s by default. The
   * panel polls them, so a hung agent must answer 502 soon rather than hold requests open.
   */
  agentTimeoutMs?: number;
  /**
   * This replica's dial-out agents: agents connect at `GET /api/v1/agents/connect` (an HTTP
   * upgrade) and other replicas reach them through it. Without it agents cannot dial in. Its
   * giver closes it (before the API's close can finish: it holds upgraded sockets).
   */
  agentHub?: AgentHub;
  /**
   * This replica's template workspace services: an open chat stream holds its workspace's
   * activity through them. Without them streams record no activity (in-process API tests).
   */
  workspaces?: WorkspaceServices;
  /**
   * How long an event of a chat's stream waits for the ones after it, so they go out in one
   * write (a status event sends them at once); STREAM_FLUSH_MS (16) by default.
   */
  streamFlushMs?: number;
  /**
   * Seals and opens the secrets the API stores (model keys, agent tokens). Without it, the
   * given pool's, else a key of the API's own (tests: what it seals only it opens).
   */
  secrets?: SecretBox;
}

/** What every route group gets: the options and the API's own shared state. */
export interface ApiContext extends ApiOptions {
  /** The one change subscription, shared by every event stream. */
  changes: ChatChanges;
  /** Closes each open event stream (called when the API closes). */
  streams: Set<() => void>;
  /** The given pool, or the API's own. */
  agents: AgentPool;
  /** The given feed, or the API's own. */
  feed: MessageFeed;
  /** The bearer check's token lookups, held until a token or user changes (token-cache.ts). */
  tokens: TokenCache<TokenRow>;
  secrets: SecretBox;
}
