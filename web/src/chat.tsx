// One chat: its messages (the assistant's as Markdown, each tool call a card), the turn in
// progress live from the stream, what the chat is doing right now (thinking, running a tool,
// retrying a failing model, interrupted), its billed time ticking while a turn runs, the queue,
// the composer, and its workspace's processes beside it (a tab on a phone). A chat that is not
// there is said to be so, once: nothing is retried.

import { lazy, Suspense, useCallback, useEffect, useRef, useState } from "react";
import { api, ApiError, followStream } from "./api.ts";
import { RenameForm, StatusBadge } from "./chat-list.tsx";
import { Composer } from "./composer.tsx";
import { ProcessPanel } from "./processes.tsx";
import { navigate } from "./router.ts";
import { ToolCard, type CallLive, type Result } from "./tool-card.tsx";
import {
  ErrorNote,
  seconds,
  useAction,
  useApi,
  useDocumentTitle,
  useInterval,
  When,
} from "./widgets.tsx";
import type { Chat, ChatStatus, Message, Part, PartEvent, Queued, Usage } from "./types.ts";
import { WorkspaceBanner } from "./workspace-status.tsx";
import type { WorkspaceEvent } from "./workspace-types.ts";

// The Markdown renderer and its highlighter are half the UI's code: their own chunk, fetched as
// soon as this module loads (long before a chat has text), with plain text meanwhile.
const markdownModule = import("./markdown.tsx");
const LazyMarkdown = lazy(() => markdownModule);

function MarkdownText({ text }: { text: string }) {
  return (
    <Suspense fallback={<div className="md text">{text}</div>}>
      <LazyMarkdown text={text} />
    </Suspense>
  );
}

/** While a turn runs, the chat (its `retrying`) and its usage are read again this often. */
const BUSY_POLL_MS = 2000;

/** The live (uncommitted) state of the generation in progress, from `part` events. */
interface Live {
  key: string;
  text: string;
  reasoning: string;
  calls: { tool_call_id: string; tool_name: string; args: unknown }[];
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

/**
 * The billed time so far: the committed usage, plus, while a turn runs (and is not waiting to
 * retry), the time since the last commit: the step under way, ticking each second.
 */
function BilledTime(p: { usage: Usage | undefined; since: number | undefined }) {
  const [now, setNow] = useState(() => Date.now());
  // A stable callback: the interval is not restarted by every render of a streaming chat.
  const tick = useCallback(() => setNow(Date.now()), []);
  useInterval(tick, p.since === undefined ? undefined : 1000);
  if (!p.usage) return null;
  if (p.since === undefined)
    return (
      <span className="muted" data-testid="chat-usage" title="model time plus tool time">
        billed {seconds(p.usage.runtime_ms)} (model {seconds(p.usage.model_runtime_ms)}, tools{" "}
        {seconds(p.usage.tool_runtime_ms)})
      </span>
    );
  // Tenths of a second, so it moves with every tick.
  const ms = p.usage.runtime_ms + Math.max(0, now - p.since);
  return (
    <span className="muted" data-testid="chat-usage" title="model time plus tool time, so far">
      billed {(ms / 1000).toFixed(1)} s so far
    </span>
  );
}

/** What the chat does now, in one line of its own (its height is reserved: nothing moves). */
function Activity(p: {
  chat: Chat;
  live: Live | undefined;
  runningTool: string | undefined;
  interrupted: boolean;
}) {
  const { chat } = p;
  const retrying = chat.retrying;
  let text = "";
  let cls = "activity";
  if (retrying) {
    const next = Math.max(
      0,
      Math.round((Date.parse(retrying.next_attempt_at) - Date.now()) / 1000),
    );
    text = `Retrying: ${retrying.last_error} — attempt ${retrying.attempt}${next > 0 ? `, next in ${next} s` : ""}`;
    cls += " warn";
  } else if (chat.status === "interrupting") text = "Interrupting…";
  else if (chat.status === "running")
    text = p.runningTool ? `Running ${p.runningTool}…` : p.live?.text ? "Writing…" : "Thinking…";
  else if (chat.status === "waiting" && p.interrupted)
    text = "Interrupted: the turn stopped. Send a message to go on.";
  return (
    <p className={cls} role="status" aria-live="polite" data-testid="chat-activity">
      {text && (chat.status === "running" || chat.status === "interrupting") && (
        <span className="dots" aria-hidden="true" />
      )}
      {retrying ? <span data-testid="retrying">{text}</span> : text}
    </p>
  );
}

function ChatNotFound({ id, error }: { id: string; error: ApiError }) {
  useDocumentTitle("Chat not found");
  return (
    <section className="not-found" data-testid="chat-not-found">
      <h1>Chat not found</h1>
      <p>
        There is no chat <code>{id}</code> that you can see: it may never have existed, or it
        belongs to someone else.
      </p>
      <p className="muted">{error.message}</p>
      <p>
        <a
          href="/"
          onClick={(e) => {
            e.preventDefault();
            navigate("/");
          }}
        >
          All chats
        </a>{" "}
        ·{" "}
        <a
          href="/chats/new"
          onClick={(e) => {
            e.preventDefault();
            navigate("/chats/new");
          }}
        >
          New chat
        </a>
      </p>
    </section>
  );
}

export function ChatView({ id }: { id: string }) {
  const [chat, setChat] = useState<Chat>();
  const [gone, setGone] = useState<ApiError>();
  const [loadError, setLoadError] = useState<unknown>();
  const [messages, setMessages] = useState<Message[]>([]);
  const [live, setLive] = useState<Live>();
  const [toolLive, setToolLive] = useState<Record<string, CallLive & { name: string }>>({});
  // What the chat has cost so far, read again as a turn commits and when it ends.
  const usage = useApi<Usage>(gone ? undefined : `/chats/${id}/usage`);
  const reloadUsage = usage.reload;
  /** While a turn runs: when its current step started (the last commit). */
  const [stepSince, setStepSince] = useState<number>();
  const [error, setError] = useState<unknown>();
  const [draft, setDraft] = useState("");
  const [interrupted, setInterrupted] = useState(false);
  const [renaming, setRenaming] = useState(false);
  const [tab, setTab] = useState<"chat" | "processes">("chat");
  // Messages waiting to run (sent while the chat was busy), read again whenever they may
  // have changed: a send that queued, a user message reaching the history, a status change.
  const queue = useApi<{ messages: Queued[] }>(gone ? undefined : `/chats/${id}/queue`);
  const reloadQueue = queue.reload;
  // A queued message leaves from the head of the queue into the history: when its text arrives
  // as a user message, the head is hidden at once instead of showing twice until the re-read.
  const queueRef = useRef(queue.data);
  queueRef.current = queue.data;
  const [left, setLeft] = useState<string>();
  const [editing, setEditing] = useState<{ id: string; text: string }>();
  const [workspace, setWorkspace] = useState<WorkspaceEvent>();
  const [epoch, setEpoch] = useState(0); // bumped to re-read history after an edit
  const messagesRef = useRef<HTMLDivElement>(null);
  const statusRef = useRef<ChatStatus>(undefined);
  useDocumentTitle(gone ? "Chat not found" : chat?.title || (chat ? "Untitled chat" : "Chat"));

  // The chat first; its stream only once it is known to be there (a 404 ends here, once).
  useEffect(() => {
    let stop: (() => void) | undefined;
    let live = true;
    setMessages([]);
    setLive(undefined);
    api<Chat>("GET", `/chats/${id}`).then(
      (c) => {
        if (!live) return;
        setChat(c);
        statusRef.current = c.status;
        stop = followStream(
          id,
          (event, data) => {
            switch (event) {
              case "message": {
                const m = data as Message;
                setMessages((ms) => (ms.some((x) => x.id === m.id) ? ms : [...ms, m]));
                if (m.role === "user") {
                  const head = queueRef.current?.messages[0];
                  if (head && textOf(head.parts) === textOf(m.parts)) setLeft(head.id);
                  reloadQueue();
                  setInterrupted(false);
                }
                if (m.role === "assistant") setLive(undefined);
                // A commit: its time is in the usage now; the next step starts.
                if (statusRef.current === "running") {
                  setStepSince(Date.now());
                  reloadUsage();
                }
                break;
              }
              case "part": {
                const e = data as PartEvent;
                const key = `${e.history_version}/${e.generation_attempt}`;
                const part = e.part;
                if (part.type === "tool-started" || part.type === "tool-finished") {
                  const callId = part.tool_call_id;
                  setToolLive((t) => ({
                    ...t,
                    [callId]:
                      part.type === "tool-started"
                        ? {
                            name: part.tool_name,
                            state: "started",
                            ...(part.process_id && { process_id: part.process_id }),
                          }
                        : { ...t[callId], name: part.tool_name, state: part.status },
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
                const s = data as { status: ChatStatus; retrying?: Chat["retrying"] };
                const before = statusRef.current;
                statusRef.current = s.status;
                setChat((c) =>
                  c
                    ? { ...c, status: s.status, ...("retrying" in s && { retrying: s.retrying }) }
                    : c,
                );
                // An error's reason (a workspace that did not start, say) is on the chat.
                if (s.status === "error")
                  api<Chat>("GET", `/chats/${id}`).then(setChat, () => undefined);
                if (s.status === "running") setStepSince(Date.now());
                else {
                  setStepSince(undefined);
                  reloadUsage();
                }
                if (s.status === "waiting" && before === "interrupting") setInterrupted(true);
                if (s.status === "running") setInterrupted(false);
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
          },
          setGone,
        );
      },
      (e: unknown) => {
        if (!live) return;
        // Not there, or not even a chat's ID: either way there is nothing to show.
        if (e instanceof ApiError && (e.status === 404 || e.status === 400)) setGone(e);
        else setLoadError(e);
      },
    );
    return () => {
      live = false;
      stop?.();
    };
  }, [id, epoch, reloadUsage, reloadQueue]);

  const busy = chat?.status === "running" || chat?.status === "interrupting";
  // While busy, the chat is read again for what the stream does not carry (retrying).
  const rereadChat = useCallback(
    () =>
      void api<Chat>("GET", `/chats/${id}`).then(
        (c) =>
          setChat((old) =>
            old
              ? { ...old, retrying: c.retrying ?? null, title: c.title, context: c.context ?? null }
              : c,
          ),
        () => undefined,
      ),
    [id],
  );
  useInterval(rereadChat, busy ? BUSY_POLL_MS : undefined);

  // Whatever makes the messages grow (streamed text, a card's live output, the queue), the page
  // stays at its end only if the reader was there: someone who scrolled up to read is not moved.
  const atEnd = useRef(true);
  useEffect(() => {
    const el = messagesRef.current;
    if (!el) return;
    const doc = document.documentElement;
    const onScroll = () => {
      atEnd.current = doc.scrollHeight - (window.scrollY + window.innerHeight) < 120;
    };
    const follow = new ResizeObserver(() => {
      if (atEnd.current) window.scrollTo(0, doc.scrollHeight);
    });
    follow.observe(el);
    window.addEventListener("scroll", onScroll, { passive: true });
    return () => {
      follow.disconnect();
      window.removeEventListener("scroll", onScroll);
    };
  }, []);

  const send = async (): Promise<boolean> => {
    const text = draft.trim();
    if (text === "") return false;
    setError(undefined);
    if (text === "/compact") {
      try {
        await api("POST", `/chats/${id}/compact`);
        setDraft("");
        return true;
      } catch (e) {
        setError(e);
        return false;
      }
    }
    try {
      const sent = await api<{ queued: boolean }>("POST", `/chats/${id}/messages`, {
        text,
        busy_behavior: "queue",
      });
      setDraft("");
      if (sent.queued) reloadQueue();
      // A message brings an archived chat back.
      setChat((c) => (c ? { ...c, archived: false } : c));
      return true;
    } catch (e) {
      setError(e);
      return false;
    }
  };
  const refreshContext = async () => {
    try {
      const r = await api<{ context: Chat["context"] }>("POST", `/chats/${id}/refresh-context`);
      setChat((c) => (c ? { ...c, context: r.context ?? null } : c));
    } catch (e) {
      setError(e);
    }
  };
  const interrupt = async () => {
    try {
      await api("POST", `/chats/${id}/interrupt`);
    } catch (e) {
      setError(e);
    }
  };
  const setArchived = async (archived: boolean) => {
    try {
      setChat(await api<Chat>("PATCH", `/chats/${id}`, { archived }));
    } catch (e) {
      setError(e);
    }
  };
  const saveEdit = async () => {
    if (!editing) return;
    try {
      await api("PATCH", `/chats/${id}/messages/${editing.id}`, { text: editing.text });
      setEditing(undefined);
      setEpoch((n) => n + 1);
    } catch (e) {
      setError(e);
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

  if (gone) return <ChatNotFound id={id} error={gone} />;
  if (loadError !== undefined)
    return (
      <section>
        <h1>Chat</h1>
        <ErrorNote error={loadError} prefix="The chat could not be read" />
        <button onClick={() => window.location.reload()}>Try again</button>
      </section>
    );

  const results = new Map<string, { result: Result; runtimeMs?: number }>();
  for (const m of messages)
    for (const p of m.parts)
      if (p.type === "tool-result")
        results.set(p.tool_call_id, { result: p.result as Result, runtimeMs: m.runtime_ms });
  const runningTool = busy
    ? Object.entries(toolLive).find(
        ([callId, t]) => t.state === "started" && !results.has(callId),
      )?.[1].name
    : undefined;
  const processCount = Object.values(toolLive).filter((t) => t.state === "started").length;

  const renderPart = (p: Part, i: number, role: Message["role"]) => {
    switch (p.type) {
      case "text":
        return role === "assistant" ? (
          <MarkdownText key={i} text={p.text} />
        ) : (
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
      case "compaction":
        return (
          <details key={i} className="compaction" data-testid="compaction">
            <summary>
              Conversation compacted ({p.messages_compacted} messages): the model continues from
              this summary
            </summary>
            <MarkdownText text={p.summary} />
          </details>
        );
    }
  };

  return (
    <div className="chat-layout" data-tab={tab}>
      <nav className="chat-tabs" aria-label="Chat sections">
        <button
          className={tab === "chat" ? "tab current" : "tab"}
          aria-pressed={tab === "chat"}
          onClick={() => setTab("chat")}
        >
          Conversation
        </button>
        <button
          className={tab === "processes" ? "tab current" : "tab"}
          aria-pressed={tab === "processes"}
          onClick={() => setTab("processes")}
        >
          Processes{processCount > 0 ? ` (${processCount})` : ""}
        </button>
      </nav>
      <section className="chat">
        {/* Two lines of fixed height: nothing in them moves the conversation below. */}
        <div className="chat-head">
          {renaming && chat ? (
            <RenameForm
              chat={chat}
              onDone={(c) => {
                setRenaming(false);
                if (c) setChat((old) => (old ? { ...old, title: c.title } : c));
              }}
            />
          ) : (
            <h1 title={chat?.title}>{chat ? chat.title || "Untitled chat" : "Chat"}</h1>
          )}
          {chat && <StatusBadge status={chat.status} />}
          {chat && !renaming && (
            <span className="actions head-actions">
              <button className="link small" onClick={() => setRenaming(true)}>
                Rename
              </button>
              {chat.archived ? (
                <button className="link small" onClick={() => void setArchived(false)}>
                  Unarchive
                </button>
              ) : (
                <button
                  className="link small"
                  disabled={busy}
                  title={busy ? "Interrupt the chat first" : "It leaves the chat list (delete)"}
                  onClick={() => void setArchived(true)}
                >
                  Archive
                </button>
              )}
            </span>
          )}
        </div>
        <WorkspaceBanner w={workspace} />
        <div className="chat-meta">
          <BilledTime usage={usage.data} since={busy && !chat?.retrying ? stepSince : undefined} />
          {chat?.context && (
            <span className="context-line" data-testid="chat-context">
              {" · "}
              Context:{" "}
              {chat.context.files.length === 0
                ? "no instruction files"
                : chat.context.files
                    .map(
                      (f) =>
                        `${f.path.split("/").at(-1)} (${f.bytes} B${f.truncated ? ", cut" : ""})`,
                    )
                    .join(", ")}
              {chat.context.organization_bytes > 0 && ", organisation instructions"}
              {" · taken "}
              <When iso={chat.context.captured_at} style="compact" />{" "}
              <button
                className="link small"
                title="Read AGENTS.md and the environment again for the next steps"
                onClick={() => void refreshContext()}
              >
                Refresh
              </button>
            </span>
          )}
        </div>
        {chat?.archived && (
          <p className="note" data-testid="archived">
            This chat is archived: it is not in your chat list. A new message brings it back.
          </p>
        )}
        {chat?.status === "error" && chat.last_error && (
          <div className="error-box" role="alert" data-testid="chat-error">
            <strong>The turn failed:</strong> {chat.last_error.message}
            {chat.last_error.detail && <span className="muted"> {chat.last_error.detail}</span>}
            <div className="muted small-text">Send a message to try again.</div>
          </div>
        )}
        <div className="messages" ref={messagesRef}>
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
                    {m.parts.map((p, i) => renderPart(p, i, m.role))}
                    {m.role === "user" && (
                      <button
                        className="link small"
                        onClick={() => setEditing({ id: m.id, text: textOf(m.parts) })}
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
              {live.text && <MarkdownText text={live.text} />}
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
        {chat && (
          <div className="chat-foot">
            <Activity chat={chat} live={live} runningTool={runningTool} interrupted={interrupted} />
            <ErrorNote error={error} />
            <Composer
              draft={draft}
              setDraft={setDraft}
              busy={busy}
              onSend={send}
              onInterrupt={() => void interrupt()}
            />
          </div>
        )}
      </section>
      <ProcessPanel
        chatId={id}
        busy={busy}
        refresh={`${chat?.status}/${messages.length}/${Object.keys(toolLive).length}`}
      />
    </div>
  );
}
