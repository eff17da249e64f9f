// What `tether chat` runs: one message followed to the end of its turn (runOnce), or an
// interactive session on a terminal (runSession): a prompt, each message's turn followed live,
// slash commands. In both, Ctrl-C during a turn interrupts the chat (a running command is killed
// and shown canceled) and a second Ctrl-C leaves once the interrupt reached the server; at the
// prompt, Ctrl-C or Ctrl-D leaves. The terminal stays in cooked mode while a turn runs, so Ctrl-C
// is a real SIGINT; only the prompt's line editing reads keys itself.

import { createInterface, type Interface } from "node:readline";
import {
  api,
  ApiError,
  interruptChat,
  readChat,
  sendMessage,
  type ApiMessage,
  type ChatClient,
} from "./chat-client.ts";
import { describeFailure, networkCause } from "./chat-errors.ts";
import { HumanOutput } from "./chat-human.ts";
import { JsonOutput } from "./chat-json.ts";
import { STREAM_RECONNECT } from "./chat-stream.ts";
import { followTurn, type ChatOutput, type TurnEnd } from "./chat-turn.ts";
import { visible } from "./terminal-text.ts";
import type { ChatEvent } from "./sse-events.ts";

/** How long a second Ctrl-C waits for the first one's interrupt to reach the server. */
export const INTERRUPT_SEND_BOUND_MS = 2_000;

const DEFAULT_SERVER = "http://127.0.0.1:3000";

export interface SessionOptions {
  server: string;
  chat?: string;
  json?: boolean;
  /** A new chat's workspace (default: the server's default workspace). */
  workspaceId?: string;
}

/** How to come back to a chat, as a command. */
function resumeHint(server: string, chatId: string): string {
  const at = server.replace(/\/$/, "") === DEFAULT_SERVER ? "" : ` --server ${server}`;
  return `Resume with: tether chat${at} --chat ${chatId}`;
}

/**
 * Follows the turn with Ctrl-C bound to an interrupt. `say` prints a notice; the second Ctrl-C
 * prints how to resume and exits 130.
 */
async function followInterruptible(
  c: ChatClient,
  chatId: string,
  afterId: string | undefined,
  out: ChatOutput,
  say: (line: string) => void,
  opened?: AsyncGenerator<ChatEvent>,
): Promise<TurnEnd | undefined> {
  let interrupting: Promise<unknown> | undefined;
  const onSigint = () => {
    if (interrupting) {
      const exit = () => {
        say(resumeHint(c.server, chatId));
        process.exit(130);
      };
      void interrupting.finally(exit);
      setTimeout(exit, INTERRUPT_SEND_BOUND_MS).unref();
      return;
    }
    say("Interrupting… (Ctrl-C again to exit)");
    interrupting = interruptChat(c, chatId).catch((err: unknown) =>
      say(`The interrupt failed: ${describeFailure(err)}`),
    );
  };
  process.on("SIGINT", onSigint);
  const reconnect = {
    ...STREAM_RECONNECT,
    onDrop: (err: unknown) =>
      say(
        `The chat's stream dropped (${networkCause(err)}); reconnecting for up to ` +
          `${STREAM_RECONNECT.giveUpMs / 60_000} minutes…`,
      ),
  };
  try {
    return await followTurn(
      c,
      chatId,
      afterId,
      out,
      new AbortController().signal,
      opened,
      reconnect,
    );
  } finally {
    process.off("SIGINT", onSigint);
  }
}

/** One message and its turn; exit code 1 when the chat ends in an error. */
export async function runOnce(text: string, o: SessionOptions, token: string): Promise<void> {
  const c = { server: o.server, token, ...(o.workspaceId && { workspaceId: o.workspaceId }) };
  const sent = await sendMessage(c, o.chat, text);
  const json = o.json ? new JsonOutput() : undefined;
  const human = json ? undefined : new HumanOutput();
  const say = (line: string) =>
    human ? human.notice(line) : process.stderr.write(`${visible(line)}\n`);
  if (json) json.line("chat", { id: sent.chatId });
  else say(`chat ${sent.chatId}`);
  if (sent.queued) say("The chat is busy; your message is queued.");
  human?.busy("thinking…");
  try {
    await followInterruptible(c, sent.chatId, sent.afterId, json ?? human!, say, sent.events);
  } catch (err) {
    human?.busy(undefined);
    say(resumeHint(o.server, sent.chatId)); // the chat goes on without us
    throw err;
  }
  human?.busy(undefined);
  const chat = await readChat(c, sent.chatId);
  if (json)
    json.line("end", {
      chat_id: sent.chatId,
      status: chat.status,
      ...(chat.last_error && { last_error: chat.last_error }),
    });
  if (chat.status === "error") {
    say(`The chat ended in an error: ${chat.last_error?.message ?? "unknown"}`);
    process.exitCode = 1;
  }
  if (!json) say(resumeHint(o.server, sent.chatId));
}

type Input = { kind: "line"; text: string } | { kind: "eof" } | { kind: "interrupt" };

/**
 * The session's prompt on the terminal. While a turn runs it is held: readline stops reading
 * and the terminal goes back to cooked mode (Ctrl-C is SIGINT again); lines typed meanwhile wait.
 */
class Prompt {
  readonly #rl: Interface;
  readonly #inputs: Input[] = [];
  #waiter: ((i: Input) => void) | undefined;

  constructor() {
    this.#rl = createInterface({
      input: process.stdin,
      output: process.stdout,
      terminal: true,
      prompt: "> ",
    });
    this.#rl.on("line", (text) => this.#push({ kind: "line", text }));
    this.#rl.on("SIGINT", () => this.#push({ kind: "interrupt" }));
    this.#rl.on("close", () => this.#push({ kind: "eof" }));
  }

  #push(i: Input): void {
    const w = this.#waiter;
    this.#waiter = undefined;
    if (w) w(i);
    else this.#inputs.push(i);
  }

  next(): Promise<Input> {
    process.stdin.setRawMode?.(true);
    this.#rl.resume();
    this.#rl.prompt();
    const queued = this.#inputs.shift();
    if (queued) return Promise.resolve(queued);
    return new Promise((resolve) => (this.#waiter = resolve));
  }

  hold(): void {
    this.#rl.pause();
    process.stdin.setRawMode?.(false);
  }

  close(): void {
    this.#rl.close();
  }
}

const HELP = [
  "Type a message and press Enter; its answer streams here. Ctrl-C interrupts a turn; at the",
  "prompt Ctrl-C or Ctrl-D leaves. Commands:",
  "  /new        the next message starts a new chat",
  "  /compact    compact the chat's history (its next action)",
  "  /interrupt  interrupt the chat",
  "  /help       this help",
  "  /quit       leave (also /exit)",
].join("\n");

/** An interactive session on the terminal. */
export async function runSession(o: SessionOptions, token: string): Promise<void> {
  const c = { server: o.server, token, ...(o.workspaceId && { workspaceId: o.workspaceId }) };
  const out = new HumanOutput();
  let chatId = o.chat;
  out.notice(
    `tether chat on ${o.server}${chatId ? `, chat ${chatId}` : ""}: type a message, /help for ` +
      "commands, Ctrl-D to leave.",
  );
  const prompt = new Prompt();
  /** Follows the chat from after `afterId` with the prompt held. */
  const follow = async (
    id: string,
    afterId: string | undefined,
    opened?: AsyncGenerator<ChatEvent>,
  ) => {
    out.busy("thinking…");
    try {
      await followInterruptible(c, id, afterId, out, (l) => out.notice(l), opened);
    } finally {
      out.busy(undefined);
    }
    const chat = await readChat(c, id);
    if (chat.status === "error")
      out.notice(`The chat ended in an error: ${chat.last_error?.message ?? "unknown"}`);
  };
  const lastMessageId = async (id: string) =>
    (
      await api<{ messages: ApiMessage[] }>(
        c.server,
        c.token,
        "GET",
        `/api/v1/chats/${id}/messages`,
      )
    ).messages.at(-1)?.id;

  /** Runs a slash command; false when it ends the session. */
  const command = async (line: string): Promise<boolean> => {
    const [name] = line.split(/\s+/);
    switch (name) {
      case "/quit":
      case "/exit":
        return false;
      case "/help":
        out.notice(HELP);
        return true;
      case "/new":
        chatId = undefined;
        out.notice("The next message starts a new chat.");
        return true;
      case "/interrupt":
        if (!chatId) out.notice("No chat yet.");
        else {
          await interruptChat(c, chatId);
          out.notice("Interrupted.");
        }
        return true;
      case "/compact": {
        if (!chatId) {
          out.notice("No chat yet: nothing to compact.");
          return true;
        }
        const after = await lastMessageId(chatId);
        try {
          await api(c.server, c.token, "POST", `/api/v1/chats/${chatId}/compact`);
        } catch (err) {
          if (err instanceof ApiError && err.status === 404)
            out.notice(`This server cannot compact chats: ${err.message}`);
          else throw err;
          return true;
        }
        out.notice("Compacting the chat's history…");
        await follow(chatId, after);
        return true;
      }
      default:
        out.notice(`Unknown command ${name}; /help lists them.`);
        return true;
    }
  };

  try {
    for (;;) {
      const input = await prompt.next();
      if (input.kind !== "line") break;
      const text = input.text.trim();
      if (text === "") continue;
      prompt.hold();
      try {
        if (text.startsWith("/")) {
          if (!(await command(text))) break;
          continue;
        }
        const sent = await sendMessage(c, chatId, text);
        if (sent.chatId !== chatId) out.notice(`chat ${sent.chatId}`);
        chatId = sent.chatId;
        if (sent.queued) out.notice("The chat is busy; your message is queued.");
        await follow(chatId, sent.afterId, sent.events);
      } catch (err) {
        // The session goes on: the server may be back for the next message.
        out.notice(`error: ${describeFailure(err)}`);
      }
    }
  } finally {
    prompt.close();
    if (chatId) out.notice(resumeHint(o.server, chatId));
  }
}
