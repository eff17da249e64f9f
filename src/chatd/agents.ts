// The one pool of agent clients a server keeps: a workspace ID resolves to a client for its
// agent's URL and token, made once and reused, so the worker's tool calls and the API's reads
// of the same workspace share keep-alive connections and the same request observer. A changed
// URL or token (PATCH) is a new key and so a new client; the old one stays until close, since
// a tool call may still be using it. Tokens are stored sealed; the pool opens them.

import { AgentClient, type AgentRequestRecord } from "../contract/index.ts";
import type { Queryable } from "./db/index.ts";
import { SLOTS, type SecretBox } from "./secrets/index.ts";

export interface AgentPoolOptions {
  /** Opens the workspaces' sealed agent tokens. */
  secrets: SecretBox;
  /** Told about every request of every client (metrics, logs); see AgentClientOptions. */
  onRequest?: (r: AgentRequestRecord) => void;
}

/** The workspace's agent URL is one the client cannot speak to (only http and https are). */
export class UnsupportedAgentUrlError extends Error {
  override readonly name = "UnsupportedAgentUrlError";
  constructor(readonly workspaceId: string) {
    super(`The agent URL of workspace ${workspaceId} is not an http or https URL.`);
  }
}

export class AgentPool {
  readonly #db: Queryable;
  readonly #o: AgentPoolOptions;
  /** Keyed by `agent_url agent_token`: two workspaces on one agent share its client. */
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
    const r = await this.#db.query<{ agent_url: string; agent_token: string | null }>(
      "SELECT agent_url, agent_token FROM workspaces WHERE id = $1",
      [workspaceId],
    );
    const row = r.rows[0];
    if (!row) return undefined;
    const w = {
      agent_url: row.agent_url,
      agent_token: this.#o.secrets.openOrNull(row.agent_token, SLOTS.agentToken(workspaceId)),
    };
    const key = `${w.agent_url} ${w.agent_token ?? ""}`;
    let client = this.#clients.get(key);
    if (!client) {
      if (!URL.canParse(w.agent_url) || !/^https?:$/.test(new URL(w.agent_url).protocol))
        throw new UnsupportedAgentUrlError(workspaceId);
      client = new AgentClient({
        baseUrl: w.agent_url,
        ...(w.agent_token && { token: w.agent_token }),
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
