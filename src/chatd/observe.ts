// What chatd tells an operator. The metrics of one replica live in a registry its server
// creates and passes down (no globals: in-process servers never share values); every log
// line about a tool call carries chat_id, tool_call_uuid (the contract's) and replica.

import pino, { type Logger } from "pino";
import {
  toolCallUuid,
  type AgentRequestRecord,
  type ChatId,
  type MessageId,
} from "../contract/index.ts";
import { Registry, type Counter, type Gauge, type Histogram } from "../metrics/index.ts";
import type { ChatStatus } from "./chats.ts";
import type { Database } from "./db/index.ts";
import type { NewMessage } from "./messages.ts";
import { isToolName } from "./tools/index.ts";

export interface ChatdMetrics {
  /** Everything below, for `GET /metrics`. */
  readonly registry: Registry;
  /** Chats this replica's worker runs now. */
  readonly chatsOwned: Gauge;
  /** Acquisitions of a chat another worker owned (its lease ran out, or it was gone). */
  readonly leaseTakeovers: Counter;
  /** Tool results this replica committed, by tool and result status. */
  readonly toolCalls: Counter<"tool" | "status">;
  /** Agent requests by route template, answered or not. */
  readonly agentRequestSeconds: Histogram<"route">;
  /** From the model stream's open until it is fully read. */
  readonly modelStreamSeconds: Histogram;
  /** From the interrupt task's start to its commit. */
  readonly interruptSeconds: Histogram;
}

const STATUSES = Object.keys({
  waiting: true,
  running: true,
  interrupting: true,
  error: true,
} satisfies Record<ChatStatus, true>) as ChatStatus[];

/** The chatd metrics of one replica; chats by status are counted in `db` at scrape time. */
export function createChatdMetrics(db: Database): ChatdMetrics {
  const registry = new Registry();
  registry.gauge({
    name: "tether_chats",
    help: "Chats by status, counted in the database at scrape time (every replica's).",
    labelNames: ["status"],
    collect: async (g) => {
      const r = await db.query<{ status: ChatStatus; n: number }>(
        "SELECT status, count(*)::float8 AS n FROM chats GROUP BY status",
      );
      const counts = new Map(r.rows.map((row) => [row.status, row.n]));
      for (const status of STATUSES) g.set({ status }, counts.get(status) ?? 0);
    },
  });
  return {
    registry,
    chatsOwned: registry.gauge({
      name: "tether_chats_owned",
      help: "Chats this replica's worker runs now.",
    }),
    leaseTakeovers: registry.counter({
      name: "tether_lease_takeovers_total",
      help: "Acquisitions of a chat that another worker owned.",
    }),
    toolCalls: registry.counter({
      name: "tether_tool_calls_total",
      help: "Tool call results committed by this replica, by tool and result status.",
      labelNames: ["tool", "status"],
    }),
    agentRequestSeconds: registry.histogram({
      name: "tether_agent_request_duration_seconds",
      help: "Workspace agent requests by route, from the call to its answer or failure.",
      labelNames: ["route"],
    }),
    modelStreamSeconds: registry.histogram({
      name: "tether_model_stream_duration_seconds",
      help: "Model streams, from the request until the stream is fully read.",
    }),
    interruptSeconds: registry.histogram({
      name: "tether_interrupt_duration_seconds",
      help: "Interrupts, from the interrupt task's start to its commit.",
    }),
  };
}

/** A logger that writes nothing: the default where no one asked for logs. */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}

/**
 * What names one tool call in a log line: its chat and tool call UUID (fields of the line, not
 * a child logger: a line below the log's level then costs nothing).
 */
export function toolCallFields(
  chatId: ChatId,
  messageId: MessageId,
  toolCallId: string,
): { chat_id: ChatId; tool_call_uuid: string } {
  return { chat_id: chatId, tool_call_uuid: toolCallUuid(chatId, messageId, toolCallId) };
}

/**
 * Counts and logs the tool results a task has committed, once each: called after the commit
 * of a generation batch or an interrupt, with the messages it committed.
 */
export function toolResultsCommitted(
  deps: { log: Logger; metrics: ChatdMetrics },
  chatId: ChatId,
  messageId: MessageId,
  committed: NewMessage[],
): void {
  for (const m of committed) {
    for (const p of m.content) {
      if (p.type !== "tool-result") continue;
      const result = (typeof p.result === "object" && p.result) || {};
      const status = "status" in result && typeof result.status === "string" ? result.status : "";
      const reason = "reason" in result && typeof result.reason === "string" ? result.reason : "";
      // The model names tools: an unknown name must not make a new series.
      deps.metrics.toolCalls.inc({
        tool: isToolName(p.tool_name) ? p.tool_name : "unknown",
        status,
      });
      deps.log.info(
        {
          ...toolCallFields(chatId, messageId, p.tool_call_id),
          tool: p.tool_name,
          status,
          ...(reason && { reason }),
        },
        "tool call result committed",
      );
    }
  }
}

/**
 * The agent client's observer: every request's duration into the histogram, and a warning
 * for each that failed (no answer, or a non-2xx one) unless the caller stopped waiting.
 */
export function agentRequestObserver(
  metrics: ChatdMetrics,
  log: Logger,
): (r: AgentRequestRecord) => void {
  return (r) => {
    metrics.agentRequestSeconds.observe({ route: r.route }, r.durationMs / 1000);
    if (r.aborted || (r.status !== undefined && r.status < 300)) return;
    const tc = r.toolCall;
    log.warn(
      {
        ...(tc
          ? toolCallFields(tc.chatId, tc.messageId, tc.toolCallId)
          : r.chatId
            ? { chat_id: r.chatId }
            : {}),
        route: r.route,
        duration_ms: Math.round(r.durationMs),
        ...(r.status !== undefined && { status: r.status }),
        ...(r.error !== undefined && { err: r.error }),
      },
      "agent request failed",
    );
  };
}
