// The caller's chats: newest first, found by title as one types, renamed in place, and archived
// (PATCH /chats/{id}: the chat leaves the list, as deleted, and stays readable at its address);
// the archived ones are one click away and come back the same way.

import { useState } from "react";
import { api } from "./api.ts";
import { navigate } from "./router.ts";
import { ErrorNote, useAction, useApi, useDocumentTitle, useInterval, When } from "./widgets.tsx";
import type { Chat, ChatStatus } from "./types.ts";

export function StatusBadge({ status }: { status: ChatStatus }) {
  return <span className={`badge ${status}`}>{status}</span>;
}

/** How often the chat list is read again while it is shown. */
const LIST_POLL_MS = 3000;

/** A chat's title, changed in place: Enter saves, Esc gives up. */
export function RenameForm(p: { chat: Chat; onDone: (c?: Chat) => void }) {
  const [title, setTitle] = useState(p.chat.title);
  const action = useAction();
  const save = () =>
    void action.run("rename", async () => {
      p.onDone(await api<Chat>("PATCH", `/chats/${p.chat.id}`, { title }));
    });
  return (
    <form
      className="rename"
      onSubmit={(e) => {
        e.preventDefault();
        save();
      }}
    >
      <input
        aria-label="Chat title"
        value={title}
        autoFocus
        maxLength={500}
        onChange={(e) => setTitle(e.target.value)}
        onKeyDown={(e) => {
          if (e.key === "Escape") p.onDone();
        }}
      />
      <button type="submit" className="small" disabled={action.busy !== undefined}>
        Save
      </button>
      <button type="button" className="secondary small" onClick={() => p.onDone()}>
        Cancel
      </button>
      <ErrorNote error={action.error} prefix="Not renamed" />
    </form>
  );
}

function ChatRow(p: { chat: Chat; archived: boolean; onChanged: () => void }) {
  const { chat } = p;
  const [renaming, setRenaming] = useState(false);
  const action = useAction();
  const title = chat.title || "Untitled chat";
  const setArchived = (archived: boolean) =>
    void action.run("archive", async () => {
      await api("PATCH", `/chats/${chat.id}`, { archived });
      p.onChanged();
    });
  return (
    <li data-testid="chat-row">
      {renaming ? (
        <RenameForm
          chat={chat}
          onDone={(c) => {
            setRenaming(false);
            if (c) p.onChanged();
          }}
        />
      ) : (
        <a
          href={`/chats/${chat.id}`}
          className="chat-link"
          onClick={(e) => {
            e.preventDefault();
            navigate(`/chats/${chat.id}`);
          }}
        >
          {title}
        </a>
      )}
      <StatusBadge status={chat.status} />
      <When iso={chat.updated_at} style="compact" />
      {!renaming && (
        <span className="actions">
          <button
            className="link small"
            aria-label={`Rename ${title}`}
            onClick={() => setRenaming(true)}
          >
            Rename
          </button>
          <button
            className="link small"
            aria-label={`${p.archived ? "Unarchive" : "Archive"} ${title}`}
            title={p.archived ? "Back to the list" : "It leaves the list (delete)"}
            disabled={action.busy !== undefined}
            onClick={() => setArchived(!p.archived)}
          >
            {p.archived ? "Unarchive" : "Archive"}
          </button>
        </span>
      )}
      <ErrorNote error={action.error} prefix="Not changed" />
    </li>
  );
}

export function ChatList() {
  useDocumentTitle("Chats");
  const [archived, setArchived] = useState(false);
  const [query, setQuery] = useState("");
  // Read again every few seconds, so statuses change while the list is open.
  const list = useApi<{ chats: Chat[] }>(archived ? "/chats?archived=true" : "/chats");
  useInterval(list.reload, LIST_POLL_MS);
  const chats = list.data?.chats;
  const words = query.trim().toLowerCase().split(/\s+/).filter(Boolean);
  const found = chats?.filter((c) => {
    const t = (c.title || "Untitled chat").toLowerCase();
    return words.every((w) => t.includes(w));
  });
  return (
    <section>
      <div className="row">
        <h1>{archived ? "Archived chats" : "Chats"}</h1>
        <button onClick={() => navigate("/chats/new")}>New chat</button>
      </div>
      <div className="row list-tools">
        <input
          type="search"
          className="search"
          aria-label="Search chats"
          placeholder="Search by title"
          value={query}
          onChange={(e) => setQuery(e.target.value)}
        />
        <button className="link small" onClick={() => setArchived((a) => !a)}>
          {archived ? "Back to the chats" : "Archived chats"}
        </button>
      </div>
      <ErrorNote error={list.error} />
      {found === undefined ? (
        <p>Loading…</p>
      ) : found.length === 0 ? (
        <p className="muted">
          {chats!.length === 0
            ? archived
              ? "No archived chats."
              : "No chats yet."
            : `No chat's title has “${query.trim()}”.`}
        </p>
      ) : (
        <ul className="chats">
          {found.map((c) => (
            <ChatRow key={c.id} chat={c} archived={archived} onChanged={list.reload} />
          ))}
        </ul>
      )}
    </section>
  );
}
