// Live parts across replicas. Parts live only in the memory of the replica that owns the chat
// (CHATD.md 5), so the owner serves its buffer on an internal route, guarded by the replica
// secret; a stream on any other replica follows the chat's owner (the `worker_id` of the chat
// row) and relays them, connecting again whenever the owner changes or its connection drops.
// The owner's runner notifies nobody of its fenced writes (transitions/fenced.ts): their changes
// come this way too, to a relay that asks for them, and the stream refreshes on each connection
// for what the owner committed before it. Committed messages never come this way: each replica
// reads them from the database.

import http from "node:http";
import https from "node:https";
import type { FastifyInstance } from "fastify";
import type { Database } from "../chatd/db/index.ts";
import { replicaAddress } from "../chatd/replicas.ts";
import type { PartEvent } from "../chatd/stream.ts";
import type { ChatChange } from "../chatd/transitions/index.ts";
import type { ApiContext } from "./context.ts";
import { REPLICA_SECRET_HEADER } from "./auth.ts";
import { IdParams, parse } from "./errors.ts";
import { openLongResponse } from "./long-response.ts";

/**
 * The owner's live parts of a chat, as NDJSON: one PartEvent a line; empty lines keep alive.
 * With `?changes=true`, also a `{"change": ChatChange}` line for each change the owner commits
 * without a notification (an older relay asks for none: it would take them for parts).
 */
export const partsRoute = (chatId: string): string => `/internal/v1/chats/${chatId}/parts`;

/** A line of the parts route: a live part, or (asked for) a change the owner committed. */
type PartsLine = PartEvent | { change: ChatChange };

/** An empty line goes out this often, so a relay sees the owner's connection is alive. */
export const PARTS_HEARTBEAT_MS = 15_000;
/** A relay that lets this much pile up unread is cut off (it connects again and is replayed). */
export const PARTS_MAX_BUFFERED_BYTES = 8 * 1024 * 1024;

/** A relay whose owner cannot be reached tries again after this, doubling up to the max. */
export const RELAY_RETRY_MIN_MS = 100;
export const RELAY_RETRY_MAX_MS = 5_000;

export function internalRoutes(app: FastifyInstance, ctx: ApiContext): void {
  // The replica secret was checked by the onRequest hook (auth.ts).
  app.get<{ Querystring: { changes?: string } }>(
    "/internal/v1/chats/:id/parts",
    async (request, reply) => {
      const { id } = parse(IdParams, request.params, "path");
      const changes = request.query.changes === "true";
      const out = openLongResponse(ctx, reply, {
        headers: {
          "content-type": "application/x-ndjson; charset=utf-8",
          "cache-control": "no-cache, no-transform",
        },
        heartbeatMs: PARTS_HEARTBEAT_MS,
        heartbeat: "\n",
        maxBufferedBytes: PARTS_MAX_BUFFERED_BYTES,
      });
      const line = (l: PartsLine): void => out.write(`${JSON.stringify(l)}\n`);
      // Synchronous together: the episode so far, then every later part, none twice.
      for (const e of ctx.buffer.parts(id)) line(e);
      if (out.closed) return;
      out.onClose(ctx.buffer.subscribe(id, line));
      if (changes) out.onClose(ctx.feed.changes(id, (change) => line({ change })));
    },
  );
}

export interface OwnerRelayOptions {
  db: Database;
  chatId: string;
  /** This replica's worker ID: when it owns the chat, its own buffer has the parts. */
  selfId: string;
  secret: string;
  onPart(e: PartEvent): void;
  /** A change the owner committed without a notification. */
  onChange(change: ChatChange): void;
  /**
   * The stream reads the chat again and follows its owner (it calls follow()): at each
   * connection, for what the owner committed before it, and after each failed one.
   */
  refresh(): void;
  /** A relay attempt failed (it is tried again); for the log. */
  onError(err: unknown): void;
}

/**
 * Relays a chat's live parts, and the changes it commits, from the replica that owns it, if that
 * is another one. The stream tells it the owner it read from the database (`follow`); when the
 * connection to the owner ends while the owner is unchanged (it died, it is stopping, it cannot
 * be reached, or a notification was lost), the stream refreshes after a pause, and so reads the
 * owner again. Parts may come twice (a reconnect replays the episode): the stream drops what it
 * has sent.
 */
export class OwnerRelay {
  readonly #o: OwnerRelayOptions;
  /** The owner to relay from, as last read; null when nobody owns the chat. */
  #owner: string | null = null;
  #connection: { owner: string; ac: AbortController } | undefined;
  #wake: (() => void) | undefined;
  #closed = false;
  readonly done: Promise<void>;

  constructor(o: OwnerRelayOptions) {
    this.#o = o;
    this.done = this.#run().catch((err: unknown) => o.onError(err));
  }

  /** The chat's owner now; a different one ends the current connection and starts another. */
  follow(owner: string | null): void {
    if (this.#closed || owner === this.#owner) return;
    this.#owner = owner;
    if (this.#connection && this.#connection.owner !== owner) this.#connection.ac.abort();
    this.#wake?.();
  }

  close(): void {
    this.#closed = true;
    this.#connection?.ac.abort();
    this.#wake?.();
  }

  async #run(): Promise<void> {
    let retryMs = RELAY_RETRY_MIN_MS;
    while (!this.#closed) {
      const owner = this.#owner;
      if (owner === null || owner === this.#o.selfId) {
        await this.#pause(); // until follow() names another owner
        continue;
      }
      const ac = new AbortController();
      this.#connection = { owner, ac };
      try {
        await this.#pump(owner, ac.signal, () => (retryMs = RELAY_RETRY_MIN_MS));
      } catch (err) {
        if (!ac.signal.aborted) this.#o.onError(err);
      }
      this.#connection = undefined;
      if (this.#closed || this.#owner !== owner) continue;
      await this.#pause(retryMs);
      retryMs = Math.min(retryMs * 2, RELAY_RETRY_MAX_MS);
      // What the owner committed meanwhile came no other way (it notifies nobody): the stream
      // reads it, and follows the owner the chat names now.
      if (this.#owner === owner && !this.#closed) this.#o.refresh();
    }
  }

  /** Reads the owner's parts until the connection ends; `connected` once the owner answers. */
  async #pump(owner: string, signal: AbortSignal, connected: () => void): Promise<void> {
    const address = await replicaAddress(this.#o.db, owner);
    if (!address) throw new Error(`Replica ${owner} owns the chat but is not registered.`);
    const url = new URL(`${address.replace(/\/+$/, "")}${partsRoute(this.#o.chatId)}?changes=true`);
    // node:http with no pool: an abort closes this one socket and opens no other (fetch's pool
    // may open a spare connection, which holds up the owner's graceful stop).
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = (url.protocol === "https:" ? https : http).get(url, {
        headers: { [REPLICA_SECRET_HEADER]: this.#o.secret },
        agent: false,
        signal,
      });
      req.once("response", resolve);
      req.once("error", reject);
    });
    if (res.statusCode !== 200) {
      res.destroy();
      throw new Error(`Replica ${owner} at ${address} answered ${res.statusCode} for live parts.`);
    }
    connected();
    this.#o.refresh();
    res.setEncoding("utf8");
    let buf = "";
    for await (const chunk of res) {
      buf += chunk as string;
      let end: number;
      while ((end = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, end).trim();
        buf = buf.slice(end + 1);
        // The owner is another replica holding the secret: its lines are PartsLines.
        if (line === "" || signal.aborted) continue;
        const l = JSON.parse(line) as PartsLine;
        if ("change" in l) this.#o.onChange(l.change);
        else this.#o.onPart(l);
      }
    }
  }

  /** Waits `ms`, or without a bound, until follow() or close() wakes it. */
  async #pause(ms?: number): Promise<void> {
    await new Promise<void>((resolve) => {
      const timer = ms === undefined ? undefined : setTimeout(resolve, ms);
      this.#wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.#wake = undefined;
  }
}

/**
 * What a stream has sent of the live parts, so each part reaches the client once and none
 * goes back in time: a part passes only when it is after the last one sent in the order of
 * (history_version, generation_attempt, seq). Parts of an episode older than one already sent
 * (a replica that lost the chat) or than the chat row read (`floor`) are stale.
 */
export class PartCursor {
  #historyVersion = -1n;
  #attempt = -1;
  #seq = -1;

  /** True when `e` is new (and now counts as sent). */
  admit(e: PartEvent): boolean {
    if (!this.#before(BigInt(e.history_version), e.generation_attempt, e.seq)) return false;
    this.#historyVersion = BigInt(e.history_version);
    this.#attempt = e.generation_attempt;
    this.#seq = e.seq;
    return true;
  }

  /** The chat is at this history version and attempt: parts of earlier episodes are stale. */
  floor(historyVersion: string, attempt: number): void {
    if (this.#before(BigInt(historyVersion), attempt, -1)) {
      this.#historyVersion = BigInt(historyVersion);
      this.#attempt = attempt;
      this.#seq = -1;
    }
  }

  /** True when the cursor is before (hv, attempt, seq). */
  #before(hv: bigint, attempt: number, seq: number): boolean {
    if (hv !== this.#historyVersion) return hv > this.#historyVersion;
    if (attempt !== this.#attempt) return attempt > this.#attempt;
    return seq > this.#seq;
  }
}
