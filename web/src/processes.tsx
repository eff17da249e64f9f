// The chat's processes as its workspace agent lists them (background ones, timed-out ones still
// running, and the ones that exited in the last minutes), with their output and a stop button;
// and the live output of a running command, which the tool cards show. Both poll the API: the
// agent keeps a process's output, not a stream of it.

import { useState } from "react";
import type { ProcessInfo, ProcessOutputResponse } from "../../src/contract/types.ts";
import { api } from "./api.ts";
import { TerminalOutput } from "./lines.tsx";
import { ErrorNote, useAction, useApi, useInterval, When } from "./widgets.tsx";

/** How often a running process's output, and the process list, are read again. */
const POLL_MS = 1000;

/**
 * The output of process `pid` of the chat: read while `read` is true, and every second while
 * `poll` is also true and the process has not exited. Undefined until the first read answers;
 * read errors are kept quiet (the card's own state says what is known) and read again.
 */
export function useProcessOutput(
  chatId: string,
  pid: string | undefined,
  o: { read: boolean; poll: boolean },
): ProcessOutputResponse | undefined {
  const out = useApi<ProcessOutputResponse>(
    pid !== undefined && o.read
      ? `/chats/${chatId}/processes/${encodeURIComponent(pid)}/output`
      : undefined,
  );
  useInterval(out.reload, o.read && o.poll && out.data?.running !== false ? POLL_MS : undefined);
  return out.data;
}

function ProcessRow({
  chatId,
  p,
  onChanged,
}: {
  chatId: string;
  p: ProcessInfo;
  onChanged: () => void;
}) {
  const [open, setOpen] = useState(false);
  const action = useAction();
  const stopping = action.busy !== undefined;
  const out = useProcessOutput(chatId, p.id, { read: open, poll: p.running });
  const stop = (signal: "terminate" | "kill") =>
    action.run(signal, async () => {
      await api("POST", `/chats/${chatId}/processes/${encodeURIComponent(p.id)}/signal`, {
        signal,
      });
      onChanged();
    });
  // The contract's exit code of a process ended by a signal is -1.
  const state = p.running
    ? "running"
    : p.exit_code === undefined
      ? "exited"
      : p.exit_code === -1
        ? "ended by a signal"
        : `exited, code ${p.exit_code}`;
  return (
    <li className="process" data-testid="process" data-running={p.running}>
      <code className="tool-subject">{p.command}</code>
      <div className="row small-row">
        {/* The state last: its width changes when the process ends, and moves nothing. */}
        <span className="muted">
          started <When iso={new Date(p.started_at_unix * 1000).toISOString()} style="time" />
        </span>
        {p.background && <span className="muted">background</span>}
        <span className={`badge ${p.running ? "running" : "waiting"}`}>{state}</span>
      </div>
      <div className="row small-row">
        <button className="secondary small" onClick={() => setOpen((o) => !o)} aria-expanded={open}>
          {open ? "Hide output" : "Output"}
        </button>
        {p.running && (
          <>
            <button
              className="danger small"
              disabled={stopping}
              onClick={() => void stop("terminate")}
            >
              Stop
            </button>
            <button
              className="secondary small"
              disabled={stopping}
              onClick={() => void stop("kill")}
              title="SIGKILL: for a process that ignores Stop"
            >
              Kill
            </button>
          </>
        )}
      </div>
      <ErrorNote error={action.error} />
      {open && (
        <div data-testid="process-output">
          {out === undefined ? (
            <pre className="output">…</pre>
          ) : (
            <TerminalOutput text={out.output} label={p.running ? "Output (live)" : "Output"} />
          )}
        </div>
      )}
    </li>
  );
}

/**
 * The workspace panel (beside the chat, or its own tab on a phone). `refresh` changes whenever the chat's state may have changed its
 * processes (a status event, a tool call starting); while the chat is `busy` or any of its
 * processes runs, the list is read again every two seconds as well (a start reported by the
 * stream may reach the agent after the list that followed it).
 */
export function ProcessPanel({
  chatId,
  busy,
  refresh,
}: {
  chatId: string;
  busy: boolean;
  refresh: unknown;
}) {
  // In the server's order: running ones first, then the newest.
  const list = useApi<{ processes: ProcessInfo[] }>(`/chats/${chatId}/processes`, refresh);
  const processes = list.data?.processes;
  const poll = busy || (processes?.some((p) => p.running) ?? false);
  useInterval(list.reload, poll ? POLL_MS * 2 : undefined);

  return (
    <aside className="panel" aria-label="Workspace">
      <details open>
        <summary>
          Processes
          {processes !== undefined && ` (${processes.filter((p) => p.running).length} running)`}
        </summary>
        {list.error !== undefined && <ErrorNote error={list.error} />}
        {processes === undefined ? (
          list.error === undefined && <p className="muted">Loading…</p>
        ) : processes.length === 0 ? (
          <p className="muted">No processes in this chat&apos;s workspace.</p>
        ) : (
          <ul className="processes">
            {processes.map((p) => (
              <ProcessRow key={p.id} chatId={chatId} p={p} onChanged={list.reload} />
            ))}
          </ul>
        )}
      </details>
    </aside>
  );
}
