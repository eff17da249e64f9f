// The one pool of agent clients a server keeps: a workspace ID resolves to a client for its
// agent's URL and token, made once and reused, so the worker's tool calls and the API's reads
// of the same workspace share keep-alive connections and the same request observer. A changed
// URL or token (PATCH) is a new key and so a new client; the old one stays until close, since
// a tool call may still be using it. Tokens are stored sealed; the pool opens them. A workspace
// without an agent URL has an agent that dials out: its client's transport finds that agent
// wherever it is connected, per request (src/chatd/dialout).
//
// Who chose the URL decides where the client may connect (`workspaces.url_checked_as`): for a
// URL a member registered or last changed, every new connection is checked against the member
// address policy (public addresses only by default) at the moment it resolves, so a name that
// resolved to a public address at registration and to a private one now (DNS rebinding) is
// refused; a URL an admin or the server itself set may reach any address.

import {
  AgentClient,
  isPublicAddress,
  type AddressPolicy,
  type AgentRequestRecord,
  type AgentTransport,
} from "../contract/index.ts";
import type { ConfigCache } from "./config-cache.ts";
import type { Queryable } from "./db/index.ts";
import { agentConnection, type AgentConnectionInfo } from "./dialout/registry.ts";
import { SLOTS, type SecretBox } from "./secrets/index.ts";
import { usableBy } from "./workspace-access.ts";

/** Who a workspace's agent URL was checked as (column `workspaces.url_checked_as`). */
export type UrlCheckedAs = "member" | "admin" | null;

export interface AgentPoolOptions {
  /** Opens the workspaces' sealed agent tokens. */
  secrets: SecretBox;
  /** Told about every request of every client (metrics, logs); see AgentClientOptions. */
  onRequest?: (r: AgentRequestRecord) => void;
  /** Reaches dial-out agents (the server's AgentHub); without it they cannot be reached. */
  dialout?: { transport(workspaceId: string): AgentTransport };
  /**
   * The addresses an agent URL a member set may connect to; public addresses only
   * (isPublicAddress) by default.
   */
  memberAgentAddresses?: AddressPolicy;
  /** Holds the workspaces' agent addresses between requests (read every time without it). */
  config?: ConfigCache;
}

/** What the pool reads of a workspace: its agent's address and who may use it. */
type WorkspaceRow = {
  agent_url: string | null;
  agent_token: string | null;
  url_checked_as: UrlCheckedAs;
  owner_id: string | null;
  shared: boolean;
};

/** A dial-out agent's state: connected (with the agent process's uptime) or not. */
export type AgentStatus = ({ connected: true } & AgentConnectionInfo) | { connected: false };

/** The workspace's agent dials out, but this pool has no way to reach such agents. */
export class DialoutUnavailableError extends Error {
  override readonly name = "DialoutUnavailableError";
  constructor(readonly workspaceId: string) {
    super(`Workspace ${workspaceId} has a dial-out agent, which this process cannot reach.`);
  }
}

/** The policy a client of a URL checked as `checkedAs` connects under; undefined: any address. */
export function agentAddressPolicy(
  checkedAs: UrlCheckedAs,
  memberAgentAddresses: AddressPolicy = isPublicAddress,
): AddressPolicy | undefined {
  return checkedAs === "member" ? memberAgentAddresses : undefined;
}

/** The workspace's agent URL is one the client cannot speak to (only http and https are). */
export class UnsupportedAgentUrlError extends Error {
  override readonly name = "UnsupportedAgentUrlError";
  constructor(readonly workspaceId: string) {
    super(
      `The agent URL of workspace ${workspaceId} is not an http:// or https:// URL: register ` +
        "the workspace again with its agent's URL.",
    );
  }
}

export class AgentPool {
  readonly #db: Queryable;
  readonly #o: AgentPoolOptions;
  /** Keyed by `agent_url agent_token checked-as`: two workspaces on one agent share its client. */
  readonly #clients = new Map<string, AgentClient>();

  constructor(db: Queryable, o: AgentPoolOptions) {
    this.#db = db;
    this.#o = o;
  }

  /** The box that opens the tokens (the API seals new ones with the same). */
  get secrets(): SecretBox {
    return this.#o.secrets;
  }

  /**
   * The client of the workspace's agent, or undefined when the workspace row is gone. Throws
   * UnsupportedAgentUrlError when the row's URL is not http or https.
   */
  async forWorkspace(workspaceId: string): Promise<AgentClient | undefined> {
    const row = await this.#row(workspaceId);
    return row && this.#client(workspaceId, row);
  }

  /**
   * forWorkspace, only when the workspace is one `userId` may use as far as this pool knows (its
   * owner or shared, as last read): for a request that may go out before a statement that
   * decides it (a new chat's context, worker.ts), never in its place.
   */
  async forUser(workspaceId: string, userId: string): Promise<AgentClient | undefined> {
    const row = await this.#row(workspaceId);
    return row && usableBy(userId, row) ? this.#client(workspaceId, row) : undefined;
  }

  /** The workspace's row as held (config cache), else read; undefined when it is gone. */
  async #row(workspaceId: string): Promise<WorkspaceRow | undefined> {
    const read = async () =>
      (
        await this.#db.query<WorkspaceRow>(
          "SELECT agent_url, agent_token, url_checked_as, owner_id, shared FROM workspaces WHERE id = $1",
          [workspaceId],
        )
      ).rows[0];
    return this.#o.config?.read("workspaces", workspaceId, read) ?? read();
  }

  #client(workspaceId: string, row: WorkspaceRow): AgentClient {
    if (row.agent_url === null) return this.#dialout(workspaceId);
    const w = {
      agent_url: row.agent_url,
      agent_token: this.#o.secrets.openOrNull(row.agent_token, SLOTS.agentToken(workspaceId)),
    };
    const checkedAs = row.url_checked_as ?? null;
    const key = `${w.agent_url} ${w.agent_token ?? ""} ${checkedAs ?? ""}`;
    let client = this.#clients.get(key);
    if (!client) {
      if (!URL.canParse(w.agent_url) || !/^https?:$/.test(new URL(w.agent_url).protocol))
        throw new UnsupportedAgentUrlError(workspaceId);
      const allowAddress = agentAddressPolicy(checkedAs, this.#o.memberAgentAddresses);
      client = new AgentClient({
        baseUrl: w.agent_url,
        ...(w.agent_token && { token: w.agent_token }),
        ...(allowAddress && { allowAddress }),
        ...(this.#o.onRequest && { onRequest: this.#o.onRequest }),
      });
      this.#clients.set(key, client);
    }
    return client;
  }

  /**
   * Whether the workspace's dial-out agent is connected (to any live replica) and, if so, how
   * long its process has been up — past the contract's 2 s age margin or not (AGE_MARGIN_MS).
   */
  async agentStatus(workspaceId: string): Promise<AgentStatus> {
    const c = await agentConnection(this.#db, workspaceId);
    return c ? { connected: true, ...c } : { connected: false };
  }

  #dialout(workspaceId: string): AgentClient {
    const key = `dialout ${workspaceId}`;
    let client = this.#clients.get(key);
    if (!client) {
      if (!this.#o.dialout) throw new DialoutUnavailableError(workspaceId);
      client = new AgentClient({
        transport: this.#o.dialout.transport(workspaceId),
        ...(this.#o.onRequest && { onRequest: this.#o.onRequest }),
      });
      this.#clients.set(key, client);
    }
    return client;
  }

  /** Closes every client's idle connections; the pool makes new clients if asked again. */
  close(): void {
    for (const c of this.#clients.values()) c.close();
    this.#clients.clear();
  }
}
