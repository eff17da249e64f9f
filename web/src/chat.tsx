import { useEffect, useRef, useState, type KeyboardEvent } from "react";
import { api, followStream } from "./api.ts";
import { ProcessPanel, useProcessOutput } from "./processes.tsx";
import { navigate } from "./router.ts";
import { ErrorNote, seconds, useAction, useApi, useInterval, When } from "./widgets.tsx";
import type { Chat, ChatStatus, Message, Part, PartEvent, Queued, Usage } from "./types.ts";
import { WorkspaceBanner } from "./workspace-status.tsx";
import type { WorkspaceEvent } from "./workspace-types.ts";

function StatusBadge({ status }: { status: ChatStatus }) {
  return <span className={`badge ${status}`}>{status}</span>;
}

/** How often the chat list is read again while it is shown. */
const LIST_POLL_MS = 3000;

export function ChatList() {
  // Read again every few seconds, so statuses change while the list is open.
  const list = useApi<{ chats: Chat[] }>("/chats");
  useInterval(list.reload, LIST_POLL_MS);
  const chats = list.data?.chats;
  return (
    <section>
      <div className="row">
        <h1>Chats</h1>
        <button onClick={() => navigate("/chats/new")}>New chat</button>
      </div>
      <ErrorNote error={list.error} />
      {chats === undefined ? (
        <p>Loading…</p>
      ) : chats.length === 0 ? (
        <p>No chats yet.</p>
      ) : (
        <ul className="chats">
          {chats.map((c) => (
            <li key={c.id}>
              <a
                href={`/chats/${c.id}`}
                onClick={(e) => {
                  e.preventDefault();
                  navigate(`/chats/${c.id}`);
                }}
              >
                {c.title || "Untitled chat"}
              </a>
              <StatusBadge status={c.status} />
              <When iso={c.updated_at} />
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

/** The live (uncommitted) state of the generation in progress, from `part` events. */
interface Live {
  key: string;
  text: string;
  reasoning: string;
  calls: { tool_call_id: string; tool_name: string; args: unknown }[];
}

type Result = Record<string, unknown> & { status?: string };

/** A call's state from the live stream: "started", or the status it finished with. */
interface CallLive {
  state: string;
  /** The process an execute started (its output is readable while it runs). */
  process_id?: string;
}

/** One tool call's state in words, from its result (or the live stream while it has none). */
function callState(result: Result | undefined, live: string | undefined): [string, string] {
  if (result === undefined) {
    if (live === "started") return ["running", "running"];
    if (live !== undefined) return ["finishing", `finished (${live}), saving the result`];
    return ["pending", "waiting to run"];
  }
  const s = result.status;
  switch (s) {
    case "completed":
      return [
        "completed",
        typeof result.exit_code === "number"
          ? `completed, exit code ${result.exit_code}`
          : "completed",
      ];
    case "timed_out":
      return ["timed_out", "timed out, still running"];
    case "background":
      return ["background", "running in the background"];
    case "canceled":
      return ["canceled", "canceled by the user"];
    case "not_run":
      return ["not_run", "not run"];
    case "unknown":
      return ["unknown", `unknown (${String(result.reason)})`];
    case "error":
      return ["error", `error: ${String(result.message)}`];
    case "failed":
      return ["error", `failed: ${String(result.error)}`];
    case "not_applied":
      return ["not_run", "not applied"];
    default:
      return ["unknown", String(s)];
  }
}

function subject(name: string, args: unknown): string {
  const a = (args ?? {}) as Record<string, unknown>;
  const v = a.command ?? a.path ?? a.process_id;
  return typeof v === "string" ? v : JSON.stringify(args);
}

function ToolCard(p: {
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
  const output =
    typeof r.output === "string" ? r.output : running ? (liveOut?.output ?? "") : undefined;
  // The call's own execution time, as the server stamped it (its batch is billed once, as
  // the union of its calls' times).
  const ran = p.runtimeMs;
  return (
    <article className={`tool ${cls}`} data-testid="tool-card" data-state={cls}>
      <header>
        <span className="tool-name">{p.name}</span>
        <code className="tool-subject">{subject(p.name, p.args)}</code>
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
      {output !== undefined && (
        <details open>
          <summary>
            Output
            {running ? " (live)" : cls === "canceled" || cls === "timed_out" ? " (partial)" : ""}
            {r.truncated !== undefined && " — middle dropped"}
          </summary>
          <pre className="output">{output || "(no output)"}</pre>
        </details>
      )}
      {p.result !== undefined && output === undefined && cls === "completed" && (
        <details>
          <summary>Result</summary>
          <pre className="output">{JSON.stringify(p.result, null, 2)}</pre>
        </details>
      )}
    </article>
  );
}

/** A user message's text. */
function textOf(parts: Part[]): string {
  return parts.map((p) => (p.type === "text" ? p.text : "")).join("");
}

/** A message waiting to run; its sender may take it back (an edit in waiting is not one). */
function QueuedMessage({
  chatId,
  q,
  onRemoved,
}: {
  chatId: string;
  q: Queued;
  onRemoved: () => void;
}) {
  const action = useAction();
  const text = textOf(q.parts);
  return (
    <div className="msg user queued" data-testid="queued-message">
      <p className="text">{text}</p>
      <div className="row small-row">
        <span className="badge">
          {q.edit_of === null
            ? "queued: runs when the current turn ends"
            : "edit: runs once the interruption ends"}
        </span>
        {q.edit_of === null && (
          <button
            className="link small"
            disabled={action.busy !== undefined}
            onClick={() =>
              void action.run("remove", async () => {
                await api("DELETE", `/chats/${chatId}/queue/${q.id}`);
                onRemoved();
              })
            }
          >
            Remove
          </button>
        )}
      </div>
      <ErrorNote error={action.error} prefix="Could not remove it" />
    </div>
  );
}

export function ChatView({ id }: { id: string }) {
  const [chat, setChat] = useState<Chat>();
  const [messages, setMessages] = useState<Message[]>([]);
  const [live, setLive] = useState<Live>();
  const [toolLive, setToolLive] = useState<Record<string, CallLive>>({});
  // What the chat has cost so far, read again when a turn ends.
  const usage = useApi<Usage>(`/chats/${id}/usage`);
  const reloadUsage = usage.reload;
  const [error, setError] = useState<string>();
  const [draft, setDraft] = useState("");
  // Messages waiting to run (sent while the chat was busy), read again whenever they may
  // have changed: a send that queued, a user message reaching the history, a status change.
  const queue = useApi<{ messages: Queued[] }>(`/chats/${id}/queue`);
  const reloadQueue = queue.reload;
  // A queued message leaves from the head of the queue into the history: when its text arrives
  // as a user message, the head is hidden at once instead of showing twice until the re-read.
  const queueRef = useRef(queue.data);
  queueRef.current = queue.data;
  const [left, setLeft] = useState<string>();
  const [editing, setEditing] = useState<{ id: string; text: string }>();
  const [epoch, setEpoch] = useState(0); // bumped to re-read history after an edit
  const [workspace, setWorkspace] = useState<WorkspaceEvent>();
  const messagesRef = useRef<HTMLDivElement>(null);

  useEffect(() => {
    api<Chat>("GET", `/chats/${id}`).then(setChat, (e: Error) => setError(e.message));
    setMessages([]);
    setLive(undefined);
    return followStream(id, (event, data) => {
      switch (event) {
        case "message": {
          const m = data as Message;
          setMessages((ms) => (ms.some((x) => x.id === m.id) ? ms : [...ms, m]));
          if (m.role === "user") {
            const head = queueRef.current?.messages[0];
            if (head && textOf(head.parts) === textOf(m.parts)) setLeft(head.id);
            reloadQueue();
          }
          if (m.role === "assistant") setLive(undefined);
          break;
        }
        case "part": {
          const e = data as PartEvent;
          const key = `${e.history_version}/${e.generation_attempt}`;
          const part = e.part;
          if (part.type === "tool-started" || part.type === "tool-finished") {
            const id = part.tool_call_id;
            setToolLive((t) => ({
              ...t,
              [id]:
                part.type === "tool-started"
                  ? { state: "started", ...(part.process_id && { process_id: part.process_id }) }
                  : { ...t[id], state: part.status },
            }));
            break;
          }
          setLive((l) => {
            const cur = l?.key === key ? l : { key, text: "", reasoning: "", calls: [] };
            switch (part.type) {
              case "text-delta":
                return { ...cur, text: cur.text + part.text };
              case "reasoning-delta":
                return { ...cur, reasoning: cur.reasoning + part.text };
              case "tool-call":
                return { ...cur, calls: [...cur.calls, part] };
            }
          });
          break;
        }
        case "status": {
          const { status } = data as { status: ChatStatus };
          setChat((c) => (c ? { ...c, status } : c));
          // An error's reason (a workspace that did not start, say) is on the chat.
          if (status === "error") api<Chat>("GET", `/chats/${id}`).then(setChat, () => undefined);
          if (status !== "running") reloadUsage();
          reloadQueue();
          break;
        }
        case "workspace":
          setWorkspace(data as WorkspaceEvent);
          break;
        case "error":
          setError((data as { message: string }).message);
          break;
      }
    });
  }, [id, epoch, reloadUsage, reloadQueue]);

  // Whatever makes the messages grow (streamed text, a card's live output, the queue), the page
  // stays at its end only if the reader was there: someone who scrolled up to read is not moved.
  const atEnd = useRef(true);
  useEffect(() => {
    const doc = document.documentElement;
    const onScroll = () => {
      atEnd.current = doc.scrollHeight - (window.scrollY + window.innerHeight) < 120;
    };
    const follow = new ResizeObserver(() => {
      if (atEnd.current) window.scrollTo(0, doc.scrollHeight);
    });
    follow.observe(messagesRef.current!);
    window.addEventListener("scroll", onScroll, { passive: true });
    return () => {
      follow.disconnect();
      window.removeEventListener("scroll", onScroll);
    };
  }, []);

  const busy = chat?.status === "running" || chat?.status === "interrupting";

  const send = async () => {
    const text = draft.trim();
    if (text === "") return;
    setError(undefined);
    try {
      const sent = await api<{ queued: boolean }>("POST", `/chats/${id}/messages`, {
        text,
        busy_behavior: "queue",
      });
      setDraft("");
      if (sent.queued) reloadQueue();
    } catch (e) {
      setError((e as Error).message);
    }
  };
  const interrupt = async () => {
    try {
      await api("POST", `/chats/${id}/interrupt`);
    } catch (e) {
      setError((e as Error).message);
    }
  };
  const saveEdit = async () => {
    if (!editing) return;
    try {
      await api("PATCH", `/chats/${id}/messages/${editing.id}`, { text: editing.text });
      setEditing(undefined);
      setEpoch((n) => n + 1);
    } catch (e) {
      setError((e as Error).message);
    }
  };
  // Enter sends from the composer (Shift+Enter is a new line).
  const onComposerKey = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      void send();
    }
  };
  // Esc interrupts a busy chat wherever the focus is (except while editing a message).
  const interruptRef = useRef(interrupt);
  interruptRef.current = interrupt;
  useEffect(() => {
    if (!busy || editing) return;
    const onEsc = (e: globalThis.KeyboardEvent) => {
      if (e.key !== "Escape") return;
      e.preventDefault();
      void interruptRef.current();
    };
    window.addEventListener("keydown", onEsc);
    return () => window.removeEventListener("keydown", onEsc);
  }, [busy, editing]);

  const results = new Map<string, { result: Result; runtimeMs?: number }>();
  for (const m of messages)
    for (const p of m.parts)
      if (p.type === "tool-result")
        results.set(p.tool_call_id, { result: p.result as Result, runtimeMs: m.runtime_ms });

  const renderPart = (p: Part, i: number) => {
    switch (p.type) {
      case "text":
        return (
          <p key={i} className="text">
            {p.text}
          </p>
        );
      case "reasoning":
        return (
          <details key={i} className="reasoning">
            <summary>Reasoning</summary>
            <p>{p.text}</p>
          </details>
        );
      case "tool-call":
        return (
          <ToolCard
            key={p.tool_call_id}
            chatId={id}
            name={p.tool_name}
            args={p.args}
            result={results.get(p.tool_call_id)?.result}
            runtimeMs={results.get(p.tool_call_id)?.runtimeMs}
            live={toolLive[p.tool_call_id]}
          />
        );
      case "tool-result":
        return null; // shown on its call's card
    }
  };

  return (
    <div className="chat-layout">
      <section className="chat">
        <div className="row chat-head">
          <h1>{chat?.title || "Chat"}</h1>
          {chat && <StatusBadge status={chat.status} />}
          {usage.data && (
            <span className="muted" data-testid="chat-usage">
              billed {seconds(usage.data.runtime_ms)} (model {seconds(usage.data.model_runtime_ms)},
              tools {seconds(usage.data.tool_runtime_ms)})
            </span>
          )}
        </div>
        <WorkspaceBanner w={workspace} />
        {chat?.last_error && (
          <p className="error">
            {chat.last_error.message}
            {chat.last_error.detail && <span className="muted"> {chat.last_error.detail}</span>}
          </p>
        )}
        <div className="messages" aria-live="polite" ref={messagesRef}>
          {messages
            .filter((m) => m.role !== "tool" || m.parts.some((p) => p.type !== "tool-result"))
            .map((m) => (
              <div key={m.id} className={`msg ${m.role}`}>
                {editing?.id === m.id ? (
                  <div className="stack">
                    <textarea
                      aria-label="Edit message"
                      value={editing.text}
                      onChange={(e) => setEditing({ id: m.id, text: e.target.value })}
                    />
                    <div className="row">
                      <button onClick={() => void saveEdit()}>Save and rerun</button>
                      <button className="secondary" onClick={() => setEditing(undefined)}>
                        Cancel
                      </button>
                    </div>
                  </div>
                ) : (
                  <>
                    {m.parts.map(renderPart)}
                    {m.role === "user" && (
                      <button
                        className="link small"
                        onClick={() =>
                          setEditing({
                            id: m.id,
                            text: textOf(m.parts),
                          })
                        }
                      >
                        Edit
                      </button>
                    )}
                  </>
                )}
              </div>
            ))}
          {live && (
            <div className="msg assistant live">
              {live.reasoning && (
                <details className="reasoning" open>
                  <summary>Reasoning</summary>
                  <p>{live.reasoning}</p>
                </details>
              )}
              {live.text && <p className="text">{live.text}</p>}
              {live.calls.map((c) => (
                <ToolCard
                  key={c.tool_call_id}
                  chatId={id}
                  name={c.tool_name}
                  args={c.args}
                  live={toolLive[c.tool_call_id]}
                />
              ))}
            </div>
          )}
          {queue.data?.messages
            .filter((q) => q.id !== left)
            .map((q) => (
              <QueuedMessage key={q.id} chatId={id} q={q} onRemoved={reloadQueue} />
            ))}
        </div>
        {error && (
          <p className="error" role="alert">
            {error}
          </p>
        )}
        <div className="composer">
          <textarea
            aria-label="Message"
            placeholder={busy ? "Busy: a message now is queued (Esc interrupts)" : "Message"}
            value={draft}
            onChange={(e) => setDraft(e.target.value)}
            onKeyDown={onComposerKey}
            rows={3}
          />
          <div className="composer-buttons">
            {/* Its width is the column's (Interrupt's), so a new label moves nothing: keyed, it
                is a new word in place, not the old one shifted. */}
            <button onClick={() => void send()} disabled={draft.trim() === ""}>
              <span key={busy ? "queue" : "send"}>{busy ? "Queue" : "Send"}</span>
            </button>
            <button
              className="danger"
              onClick={() => void interrupt()}
              disabled={!busy}
              title="Interrupt (Esc)"
            >
              Interrupt
            </button>
          </div>
        </div>
      </section>
      <ProcessPanel
        chatId={id}
        busy={busy}
        refresh={`${chat?.status}/${messages.length}/${Object.keys(toolLive).length}`}
      />
    </div>
  );
}
