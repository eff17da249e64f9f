// Reads what a scenario left: its chats and messages from the database (with `pg`, not
// through the API, so usage records and model-only messages are seen too) and the evidence
// files in each workspace directory.

import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import type pg from "pg";
import type { MessagePart } from "../../src/chatd/messages.ts";
import type { CheckedChat, CheckedMessage, Evidence } from "./checker.ts";
import { ANCHOR } from "./model.ts";

export async function readChats(
  db: pg.Pool,
  chats: { id: string; agent: string }[],
): Promise<CheckedChat[]> {
  const ids = chats.map((c) => c.id);
  const status = await db.query<{ id: string; status: string; state: string }>(
    `SELECT c.id, c.status,
            format('worker %s, runner %s, lease renewed %s ms ago, snapshot %s, history %s, ' ||
                   'generation attempt %s, retry %s, queued %s',
                   c.worker_id, c.runner_id,
                   round(extract(epoch FROM now() - h.heartbeat_at) * 1000),
                   c.snapshot_version, c.history_version, c.generation_attempt,
                   coalesce(c.retry_state::text, '-'),
                   (SELECT count(*) FROM chat_queued_messages q WHERE q.chat_id = c.id)) AS state
     FROM chats c LEFT JOIN chat_heartbeats h ON h.chat_id = c.id
     WHERE c.id = ANY($1::uuid[])`,
    [ids],
  );
  const messages = await db.query<{
    id: string;
    chat_id: string;
    role: CheckedMessage["role"];
    created_ms: number;
    runtime_ms: number;
    content: MessagePart[];
  }>(
    `SELECT id::text, chat_id, role, content, runtime_ms,
            (extract(epoch FROM created_at) * 1000)::float8 AS created_ms
     FROM chat_messages WHERE chat_id = ANY($1::uuid[]) AND NOT deleted ORDER BY chat_messages.id`,
    [ids],
  );
  return chats.map((c) => ({
    id: c.id,
    agent: c.agent,
    status: status.rows.find((r) => r.id === c.id)?.status ?? "missing",
    state: status.rows.find((r) => r.id === c.id)?.state ?? "",
    messages: messages.rows
      .filter((m) => m.chat_id === c.id)
      .map((m) => ({
        id: m.id,
        role: m.role,
        createdAt: m.created_ms,
        runtimeMs: m.runtime_ms,
        content: m.content,
      })),
  }));
}

async function list(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch {
    return [];
  }
}

/** The markers, written files and edit lines in one workspace directory. */
export async function readEvidence(dir: string): Promise<Evidence> {
  const ev: Evidence = { markers: new Map(), writes: new Set(), editLines: new Map() };
  for (const f of await list(path.join(dir, "markers"))) {
    const lines = (await readFile(path.join(dir, "markers", f), "utf8")).split("\n");
    ev.markers.set(f, {
      starts: lines.filter((l) => l === "start").length,
      ends: lines.filter((l) => l === "end").length,
    });
  }
  for (const f of await list(path.join(dir, "writes"))) ev.writes.add(f);
  for (const f of await list(dir)) {
    if (!/^edits-.*\.txt$/.test(f)) continue;
    for (const line of (await readFile(path.join(dir, f), "utf8")).split("\n")) {
      if (line === "" || line === ANCHOR) continue;
      ev.editLines.set(line, (ev.editLines.get(line) ?? 0) + 1);
    }
  }
  return ev;
}
