// A turn printed for people: the answer's text as it streams (stdout), each tool call as one
// line (`▶ $ command`), a running command's output live and indented, then how the call ended
// (`exit 0`, `exit 1 (failed)`, `canceled — …`); notices and the spinner on stderr. What others
// wrote is made safe for a terminal first (terminal-text.ts): command output keeps only its
// colours, and only on a terminal; the rest shows its control characters as `\xNN`.

import { plainOutput } from "../chatd/tools/ansi.ts";
import type { ApiMessage, Retrying } from "./chat-client.ts";
import type { ChatEvent } from "./chat-stream.ts";
import { Screen } from "./chat-spinner.ts";
import { commandOutput, splitUnfinished, visible } from "./terminal-text.ts";
import { unseenOutput } from "./unseen-output.ts";
import type { ChatOutput } from "./chat-turn.ts";

/** Lines of a diff printed under an edit (the web UI shows it whole). */
const DIFF_LINES = 40;

/** One line for a tool call as the model made it. */
export function describeCall(name: string, args: unknown): string {
  const a = (args ?? {}) as Record<string, unknown>;
  if (name === "execute") return `$ ${String(a.command)}${a.run_in_background ? " &" : ""}`;
  if (typeof a.path === "string") return `${name} ${a.path}`;
  if (name === "edit_files" && Array.isArray(a.files))
    return `${name} ${(a.files as { path?: unknown }[]).map((f) => String(f.path)).join(", ")}`;
  return name;
}

/** How a tool call ended, in one line: the exit code of a command, else its status and note. */
export function describeResult(result: unknown): string {
  const r = (result ?? {}) as Record<string, unknown>;
  const status = typeof r.status === "string" ? r.status : "?";
  if (status === "completed" && typeof r.exit_code === "number") {
    if (r.exit_code === 0) return "exit 0";
    if (r.exit_code === -1) return "ended by a signal (failed)";
    return `exit ${r.exit_code} (failed)`;
  }
  if (status === "completed" && r.kind === "file")
    return `read ${String(r.lines_read)} of ${String(r.total_lines)} lines`;
  if (status === "completed" && r.kind === "directory" && Array.isArray(r.entries))
    return `${r.entries.length} entries`;
  const why = [r.note, r.message, r.error].find((x): x is string => typeof x === "string");
  const label = status === "error" || status === "failed" ? "failed" : status;
  return why ? `${label} — ${why}` : label;
}

export class HumanOutput implements ChatOutput {
  readonly #screen: Screen;
  /** Streamed text of the assistant message in progress is on the screen. */
  #streamed = false;
  /** Each running command's latest read of its output (its result prints only the rest). */
  readonly #shown = new Map<string, string>();
  /** A running command's escape sequence cut at the end of its last chunk, for its next. */
  readonly #unfinished = new Map<string, string>();
  /** Command output printed last ended its line (the next output line gets its indent). */
  #outputAtLineStart = true;
  /** Command output set colours on the terminal: they are reset before anything else prints. */
  #styled = false;
  #lastAttempt = 0;

  constructor(screen = new Screen()) {
    this.#screen = screen;
  }

  notice(text: string): void {
    this.#write("err", `${visible(text)}\n`);
  }

  /** The spinner's label while the chat works (nothing once the turn ends). */
  busy(label: string | undefined): void {
    if (label !== undefined) this.#unstyle();
    this.#screen.busy(label === undefined ? undefined : visible(label));
  }

  event(e: ChatEvent): void {
    switch (e.event) {
      case "part":
        return this.#part((e.data as { part: { type: string; text?: string } }).part);
      case "message":
        return this.#message(e.data as ApiMessage);
      case "status":
        return this.#status(e.data as { status: string; retrying?: Retrying | null });
      case "error":
        this.#newline();
        return this.notice(`error: ${String((e.data as { message?: unknown }).message)}`);
    }
  }

  output(toolCallId: string, text: string, read: string): void {
    this.#shown.set(toolCallId, read);
    const [now, held] = splitUnfinished((this.#unfinished.get(toolCallId) ?? "") + text);
    if (held) this.#unfinished.set(toolCallId, held);
    else this.#unfinished.delete(toolCallId);
    this.#commandOutput(now);
  }

  #part(part: { type: string; text?: string; tool_name?: string }): void {
    switch (part.type) {
      case "text-delta":
        if (part.text) {
          this.#write("out", visible(part.text));
          this.#streamed = true;
        }
        return;
      case "reasoning-delta":
        return this.busy("thinking…");
      case "tool-started":
        return this.busy(`running ${part.tool_name ?? "a tool"}…`);
      case "tool-finished":
        return this.busy("working…");
    }
  }

  #message(m: ApiMessage): void {
    if (m.role === "assistant") {
      if (this.#streamed) this.#newline();
      else {
        const t = m.parts
          .filter((p) => p.type === "text")
          .map((p) => p.text)
          .join("");
        if (t) this.#write("out", visible(t.endsWith("\n") ? t : `${t}\n`));
      }
      this.#streamed = false;
      for (const p of m.parts)
        if (p.type === "tool-call")
          this.#write("out", `▶ ${visible(describeCall(p.tool_name ?? "?", p.args))}\n`);
      this.busy("working…");
    } else if (m.role === "tool") {
      for (const p of m.parts) if (p.type === "tool-result") this.#result(p);
    } else if (m.boundary) {
      for (const p of m.parts)
        if (p.type === "compaction")
          this.#write(
            "out",
            `── compacted ${p.messages_compacted ?? 0} messages; the model continues from this summary:\n${visible(p.summary ?? "")}\n`,
          );
    }
  }

  #result(p: ApiMessage["parts"][number]): void {
    const r = (p.result ?? {}) as Record<string, unknown>;
    const id = p.tool_call_id ?? "";
    const shown = this.#shown.get(id) ?? "";
    // A long session keeps nothing of a call once it ended.
    this.#shown.delete(id);
    this.#unfinished.delete(id);
    // Partial output too: a canceled or timed-out command shows what it printed.
    if (typeof r.output === "string") {
      // The result carries the output as the server stripped it: the same function here.
      this.#commandOutput(unseenOutput(plainOutput(shown), r.output));
    }
    if (!this.#outputAtLineStart) this.#indented("\n");
    this.#write("out", `  ${visible(describeResult(r))}\n`);
    const diffs = Array.isArray(r.files) ? (r.files as { diff?: unknown }[]) : [];
    for (const f of diffs)
      if (typeof f.diff === "string") {
        const lines = f.diff.trimEnd().split("\n");
        const cut = lines.length > DIFF_LINES;
        this.#unstyle();
        this.#indented(`${visible(lines.slice(0, DIFF_LINES).join("\n"))}\n`);
        if (cut) this.#indented(`… ${lines.length - DIFF_LINES} more lines\n`);
      }
  }

  #status(s: { status: string; retrying?: Retrying | null }): void {
    if (s.retrying) {
      const label = `retrying: ${s.retrying.last_error} (attempt ${s.retrying.attempt})`;
      if (s.retrying.attempt !== this.#lastAttempt) {
        this.#lastAttempt = s.retrying.attempt;
        this.#newline();
        this.notice(label);
      }
      return this.busy(label);
    }
    if (s.status === "running") return this.busy("thinking…");
    if (s.status === "interrupting") return this.busy("interrupting…");
    this.#newline();
    this.busy(undefined);
  }

  /** Writes text of this client's own (or made visible), the colours output set reset first. */
  #write(to: "out" | "err", text: string): void {
    this.#unstyle();
    this.#screen.write(to, text);
  }

  #newline(): void {
    this.#unstyle();
    this.#screen.newline();
  }

  #unstyle(): void {
    if (!this.#styled) return;
    this.#styled = false;
    this.#screen.resetStyle();
  }

  /**
   * A command's output, made safe (terminal-text.ts) and indented; a carriage return on a
   * terminal returns to the indent, not over it. Colours it sets stay until the next own line.
   */
  #commandOutput(text: string): void {
    const terminal = this.#screen.stdoutIsTerminal;
    const safe = commandOutput(text, terminal);
    this.#indented(terminal ? safe.replace(/\r(?!\n)/g, "\r  ") : safe);
    if (terminal && safe.includes("\x1b[")) this.#styled = true;
  }

  /** Text safe to print, each line indented two spaces. */
  #indented(text: string): void {
    if (text === "") return;
    let s = "";
    for (const ch of text.split(/(?<=\n)/)) {
      if (this.#outputAtLineStart) s += "  ";
      s += ch;
      this.#outputAtLineStart = ch.endsWith("\n");
    }
    this.#screen.write("out", s);
  }
}
