// One turn of a chat followed to its end: every stream event goes to the output as it comes,
// and while an execute runs, its output so far is read from the chat's process output route
// (the one the web UI polls: the agent keeps a process's output, not a stream of it) and what
// each read adds is handed on (unseen-output.ts). The turn ends when the chat waits again or
// ends in an error.

import { api, type ChatClient, type Retrying } from "./chat-client.ts";
import { chatEvents, STREAM_RECONNECT, type ChatEvent, type Reconnect } from "./chat-stream.ts";
import { unseenOutput } from "./unseen-output.ts";

/** How often a running command's output is read again. */
export const OUTPUT_POLL_MS = 500;

/** Where a turn's events go (chat-human.ts prints them for people, chat-json.ts as JSON lines). */
export interface ChatOutput {
  /** Every event of the chat's stream, in order. */
  event(e: ChatEvent): void;
  /**
   * What a running command printed since the last call (`text`; once it printed more than the
   * agent keeps, it goes on from the agent's marker of what it left out: unseen-output.ts), and
   * the whole read it came from (`read`: what the agent keeps, so at most 32 KiB).
   */
  output(toolCallId: string, text: string, read: string): void;
}

export type TurnEnd = { status: "waiting" } | { status: "error" };

interface StatusData {
  status: string;
  retrying?: Retrying | null;
}

/**
 * Follows chat `chatId` from after message `afterId` until its turn ends (or `signal` aborts),
 * on `opened` first when the chat's stream is already open from there (a new chat's); a drop
 * reopens it as `reconnect` says (chat-stream.ts).
 */
export async function followTurn(
  c: ChatClient,
  chatId: string,
  afterId: string | undefined,
  out: ChatOutput,
  signal: AbortSignal,
  opened?: AsyncGenerator<ChatEvent>,
  reconnect: Reconnect = STREAM_RECONNECT,
): Promise<TurnEnd | undefined> {
  const pollers = new Map<string, OutputPoller>();
  const stop = new AbortController();
  const both = AbortSignal.any([signal, stop.signal]);
  try {
    for await (const e of chatEvents(c, chatId, afterId, both, opened, reconnect)) {
      out.event(e);
      if (e.event === "part") {
        const p = (e.data as { part: { type: string; tool_call_id: string; process_id?: string } })
          .part;
        if (p.type === "tool-started" && p.process_id && !pollers.has(p.tool_call_id)) {
          const poller = new OutputPoller(c, chatId, p.process_id, (text, read) =>
            out.output(p.tool_call_id, text, read),
          );
          pollers.set(p.tool_call_id, poller);
        } else if (p.type === "tool-finished") {
          pollers.get(p.tool_call_id)?.stop();
        }
      } else if (e.event === "message") {
        for (const part of (e.data as { parts: { type: string; tool_call_id?: string }[] }).parts)
          if (part.type === "tool-result") pollers.get(part.tool_call_id!)?.stop();
      } else if (e.event === "status") {
        const s = (e.data as StatusData).status;
        if (s === "waiting" || s === "error") return { status: s };
      }
    }
    return undefined;
  } finally {
    for (const p of pollers.values()) p.stop();
    stop.abort();
  }
}

/** Reads a running process's output every OUTPUT_POLL_MS and hands on what is new. */
class OutputPoller {
  #shown = "";
  #stopped = false;
  #timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly c: ChatClient,
    private readonly chatId: string,
    private readonly pid: string,
    private readonly onText: (text: string, read: string) => void,
  ) {
    this.#schedule(0);
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  #schedule(ms: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => void this.#read(), ms);
  }

  async #read(): Promise<void> {
    try {
      const r = await api<{ output: string; running: boolean }>(
        this.c.server,
        this.c.token,
        "GET",
        `/api/v1/chats/${this.chatId}/processes/${encodeURIComponent(this.pid)}/output`,
      );
      if (this.#stopped) return;
      // A running command's last character may be cut short (decoded as U+FFFD): it waits for
      // the next read, which has it whole.
      const output = r.running ? r.output.replace(/\uFFFD$/, "") : r.output;
      const text = unseenOutput(this.#shown, output);
      this.#shown = output;
      if (text) this.onText(text, output);
      if (!r.running) return;
    } catch {
      // Not readable now (the agent is busy or restarting): the result will say what happened.
    }
    this.#schedule(OUTPUT_POLL_MS);
  }
}
