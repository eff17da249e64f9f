// One tool call as a card that reads like a terminal: the command (or the file) it ran, how it
// ended in words and colour (a non-zero exit or an error is "failed", in the error style; an
// applied write is a success), and what it did: a command's output (live while it runs, its
// ANSI colours rendered), the lines read_file read, the diff of an edit or a write.

import { EditDiff, FileLines, WriteDiff } from "./file-views.tsx";
import { TerminalOutput } from "./lines.tsx";
import { useProcessOutput } from "./processes.tsx";
import { seconds } from "./widgets.tsx";

export type Result = Record<string, unknown> & { status?: string };

/** A call's state from the live stream: "started", or the status it finished with. */
export interface CallLive {
  state: string;
  /** The process an execute started (its output is readable while it runs). */
  process_id?: string;
}

/**
 * The card's style and its state in words, from the call's result (or the live stream while it
 * has none). The styles: running, pending, finishing, background (under way); completed
 * (success); failed (a non-zero exit, an error); canceled, timed_out, not_run (stopped);
 * unknown (the outcome could not be learned).
 */
export function callState(result: Result | undefined, live: string | undefined): [string, string] {
  if (result === undefined) {
    if (live === "started") return ["running", "running"];
    if (live !== undefined) return ["finishing", `finished (${live}), saving the result`];
    return ["pending", "waiting to run"];
  }
  const s = result.status;
  switch (s) {
    case "completed": {
      const code = result.exit_code;
      if (typeof code !== "number") return ["completed", "completed"];
      if (code === 0) return ["completed", "completed, exit code 0"];
      if (code === -1) return ["failed", "failed: ended by a signal"];
      return ["failed", `failed, exit code ${code}`];
    }
    case "applied":
      return ["completed", "applied"];
    case "timed_out":
      return ["timed_out", "timed out, still running"];
    case "background":
      return ["background", "running in the background"];
    case "canceled":
      return ["canceled", "canceled by the user"];
    case "not_run":
      return ["not_run", "not run"];
    case "not_applied":
      return ["not_run", "not applied"];
    case "unknown":
      return ["unknown", `unknown (${String(result.reason)})`];
    case "error":
      return ["failed", `failed: ${String(result.message)}`];
    case "failed":
      return ["failed", `failed: ${String(result.error)}`];
    default:
      return ["unknown", String(s)];
  }
}

function subject(args: unknown): string {
  const a = (args ?? {}) as Record<string, unknown>;
  const files = Array.isArray(a.files) ? (a.files as { path?: unknown }[]) : undefined;
  const v = a.command ?? a.path ?? a.process_id ?? files?.map((f) => String(f.path)).join(", ");
  return typeof v === "string" ? v : JSON.stringify(args);
}

/** What the call did, by tool: output, file lines, a diff, or the result's JSON. */
function Body(p: {
  name: string;
  args: Record<string, unknown>;
  r: Result;
  state: string;
  done: boolean;
  liveOutput: string | undefined;
}) {
  const { r } = p;
  const output = typeof r.output === "string" ? r.output : p.liveOutput;
  if (output !== undefined) {
    const how = !p.done
      ? " (live)"
      : p.state === "canceled" || p.state === "timed_out"
        ? " (partial)"
        : "";
    return (
      <TerminalOutput
        text={output}
        label={`Output${how}${r.truncated !== undefined ? " — middle dropped" : ""}`}
      />
    );
  }
  if (!p.done) return null;
  if (p.name === "read_file" && r.kind === "file" && typeof r.content === "string")
    return (
      <FileLines
        content={r.content}
        label={`Lines read: ${String(r.lines_read)} of ${String(r.total_lines)}`}
      />
    );
  if (p.name === "read_file" && r.kind === "directory" && Array.isArray(r.entries))
    return (
      <ul className="entries">
        {(r.entries as { name: string; is_dir: boolean }[]).map((e) => (
          <li key={e.name}>
            <code>{e.is_dir ? `${e.name}/` : e.name}</code>
          </li>
        ))}
      </ul>
    );
  if (p.name === "edit_files" && p.state !== "failed") return <EditDiff args={p.args} result={r} />;
  if (p.name === "write_file" && typeof p.args.content === "string" && p.state !== "failed")
    return <WriteDiff path={String(p.args.path)} content={p.args.content} />;
  if (p.state === "completed" && Object.keys(r).some((k) => k !== "status" && k !== "message"))
    return (
      <details>
        <summary>Result</summary>
        <pre className="output">{JSON.stringify(r, null, 2)}</pre>
      </details>
    );
  return null;
}

export function ToolCard(p: {
  chatId: string;
  name: string;
  args: unknown;
  result?: Result;
  /** The call's execution time, from its result message. */
  runtimeMs?: number | undefined;
  live?: CallLive;
}) {
  const [cls, label] = callState(p.result, p.live?.state);
  const r = p.result ?? {};
  // While the command runs, its output so far (read from the agent every second).
  const running = p.result === undefined && p.live?.state === "started";
  const liveOut = useProcessOutput(p.chatId, p.live?.process_id, { read: running, poll: running });
  const args = (p.args ?? {}) as Record<string, unknown>;
  const ran = p.runtimeMs;
  return (
    <article className={`tool ${cls}`} data-testid="tool-card" data-state={cls}>
      <header>
        {p.name === "execute" ? (
          <span className="prompt" aria-hidden="true">
            $
          </span>
        ) : (
          <span className="tool-name">{p.name}</span>
        )}
        <code className="tool-subject">{subject(p.args)}</code>
        {p.name === "execute" && args.run_in_background === true && (
          <span className="muted small-text">background</span>
        )}
      </header>
      <p className="tool-state" role="status">
        {label}
        {ran !== undefined && ran > 0 && (
          <span className="muted" title="execution time, billed once per batch of parallel calls">
            {" "}
            · ran {seconds(ran)}
          </span>
        )}
      </p>
      {typeof r.note === "string" && <p className="note">{r.note}</p>}
      {typeof r.detail === "string" && <p className="note">{r.detail}</p>}
      <Body
        name={p.name}
        args={args}
        r={r}
        state={cls}
        done={p.result !== undefined}
        liveOutput={running ? (liveOut?.output ?? "") : undefined}
      />
    </article>
  );
}
