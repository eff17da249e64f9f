import { randomUUID } from "node:crypto";
import pino from "pino";
import { StreamBuffer } from "../chatd/stream.ts";
import { createApi } from "./app.ts";
import { afterEach, beforeEach, expect, it } from "vitest";
import { describeDatabases } from "../../test/support/db.ts";
import type { MessagePart } from "../chatd/messages.ts";
import { insertMessage, startTestApi, type TestApi } from "./test-support.ts";

describeDatabases("chats", (db) => {
  let api: TestApi;
  let workspaceId: string;
  beforeEach(async () => {
    workspaceId = "6f1c1f6e-8c52-4a3a-9a57-0d7f0d7d2f10";
    await db().query(
      "INSERT INTO workspaces (id, name, agent_url, shared) VALUES ($1, 'local', 'http://127.0.0.1:9', true)",
      [workspaceId],
    );
    api = await startTestApi(db(), { defaultWorkspaceId: async () => workspaceId });
  });
  afterEach(async () => {
    await api.app.close();
  });

  const createChat = async (token: string, body: object = {}): Promise<Record<string, unknown>> => {
    const r = await api.request("POST", "/api/v1/chats", { token, body });
    expect(r.status).toBe(201);
    return r.body;
  };

  it("a chat on a workspace an admin unshared takes no new message or edit", async () => {
    const w = await api.request("POST", "/api/v1/workspaces", {
      token: api.adminToken,
      body: { name: "team box", agent_url: "http://127.0.0.1:9" },
    });
    const share = async (shared: boolean) =>
      expect(
        (
          await api.request("PATCH", `/api/v1/workspaces/${w.body.id as string}`, {
            token: api.adminToken,
            body: { shared },
          })
        ).status,
      ).toBe(200);
    await share(true);
    const chat = await createChat(api.memberToken, { workspace_id: w.body.id });
    const send = (text: string) =>
      api.request("POST", `/api/v1/chats/${chat.id as string}/messages`, {
        token: api.memberToken,
        body: { text },
      });
    const first = await send("while shared");
    expect(first.status).toBe(202);
    await share(false);
    const refused = await send("after unsharing");
    expect(refused.status).toBe(403);
    expect(refused.body.message).toMatch(/no longer/);
    const edit = await api.request(
      "PATCH",
      `/api/v1/chats/${chat.id as string}/messages/${first.body.message_id as string}`,
      { token: api.memberToken, body: { text: "edited" } },
    );
    expect(edit.status).toBe(403);
    const messages = await api.request("GET", `/api/v1/chats/${chat.id as string}/messages`, {
      token: api.memberToken,
    });
    expect(JSON.stringify(messages.body)).not.toContain("after unsharing");
    // Shared again, the chat goes on.
    await share(true);
    expect((await send("shared again")).status).toBe(202);
  });

  it("a chat created with a message is running, on the defaults, with the user message listed", async () => {
    const model = await api.request("POST", "/api/v1/models", {
      token: api.adminToken,
      body: { provider: "demo", model: "demo", is_default: true },
    });
    const chat = await createChat(api.memberToken, { title: "Hello", message: "list the files" });
    expect(chat).toMatchObject({
      status: "running",
      title: "Hello",
      workspace_id: workspaceId,
      model_id: model.body.id,
    });
    expect(chat).not.toHaveProperty("last_error");
    // Without a title, the first message's first line is the title.
    const untitled = await createChat(api.memberToken, { message: "\nrun the tests\nthen lint" });
    expect(untitled.title).toBe("run the tests");
    const got = await api.request("GET", `/api/v1/chats/${chat.id as string}`, {
      token: api.memberToken,
    });
    expect(got.status).toBe(200);
    expect(Object.keys(got.body).sort()).toEqual([
      "archived",
      "context",
      "created_at",
      "id",
      "model_id",
      "retrying",
      "status",
      "title",
      "updated_at",
      "workspace_id",
    ]);
    const msgs = await api.request("GET", `/api/v1/chats/${chat.id as string}/messages`, {
      token: api.memberToken,
    });
    expect(msgs.body.messages).toEqual([
      {
        id: expect.stringMatching(/^[0-9]+$/),
        role: "user",
        parts: [{ type: "text", text: "list the files" }],
        created_at: expect.any(String),
      },
    ]);
  });

  it("a chat created without a message waits; the list holds only the caller's own chats", async () => {
    const mine = await createChat(api.memberToken);
    expect(mine).toMatchObject({ status: "waiting", title: "", model_id: null });
    await createChat(api.adminToken, { title: "admin's" });
    const list = await api.request("GET", "/api/v1/chats", { token: api.memberToken });
    expect((list.body.chats as { id: string }[]).map((c) => c.id)).toEqual([mine.id]);
  });

  it("another user's chat is not found (404), never forbidden, on every route", async () => {
    const chat = await createChat(api.adminToken, { message: "hi" });
    const base = `/api/v1/chats/${chat.id as string}`;
    for (const [method, url, body] of [
      ["GET", base, undefined],
      ["GET", `${base}/messages`, undefined],
      ["POST", `${base}/messages`, { text: "mine now" }],
      ["POST", `${base}/interrupt`, undefined],
      ["GET", `${base}/usage`, undefined],
      ["GET", `${base}/stream`, undefined],
      ["PATCH", `${base}/messages/1`, { text: "x" }],
      ["PATCH", base, { title: "mine now" }],
    ] as const) {
      const r = await api.request(method, url, { token: api.memberToken, ...(body && { body }) });
      expect(r.status, `${method} ${url}`).toBe(404);
    }
    const unknown = await api.request("GET", "/api/v1/chats/00000000-0000-4000-8000-000000000000", {
      token: api.memberToken,
    });
    expect(unknown.status).toBe(404);
  });

  it("its owner renames and archives an idle chat: the list leaves it out, a new message brings it back", async () => {
    const chat = await createChat(api.memberToken, { title: "first name" });
    const url = `/api/v1/chats/${chat.id as string}`;
    const patch = (body: unknown, token = api.memberToken) =>
      api.request("PATCH", url, { token, body });
    const list = async (q = "") =>
      (
        (await api.request("GET", `/api/v1/chats${q}`, { token: api.memberToken })).body.chats as {
          id: string;
          title: string;
          archived: boolean;
        }[]
      ).map((c) => `${c.title}/${c.archived}`);

    const renamed = await patch({ title: "  a better name " });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toMatchObject({ title: "a better name", archived: false });
    const archived = await patch({ archived: true });
    expect(archived.body).toMatchObject({ archived: true });
    await expect(list()).resolves.toEqual([]);
    await expect(list("?archived=true")).resolves.toEqual(["a better name/true"]);
    // Still readable by its address.
    const got = await api.request("GET", url, { token: api.memberToken });
    expect(got.body).toMatchObject({ archived: true });

    // A message to it unarchives it, so it runs (no worker takes an archived chat).
    const sent = await api.request("POST", `${url}/messages`, {
      token: api.memberToken,
      body: { text: "go on" },
    });
    expect(sent.status).toBe(202);
    await expect(list()).resolves.toEqual(["a better name/false"]);
    // A running chat is not archived: nobody would drive it.
    const busy = await patch({ archived: true });
    expect(busy.status).toBe(409);
    expect(busy.body.message).toMatch(/interrupt it before archiving/);
    const audit = await db().query(
      "SELECT details FROM audit_log WHERE action = 'chat.update' AND target = $1 ORDER BY id",
      [chat.id],
    );
    expect(audit.rows.map((r) => r.details)).toEqual([
      { title: "a better name" },
      { archived: true },
    ]);
  });

  it("a chat patch names its bad field, and changes nothing of someone else's", async () => {
    const chat = await createChat(api.memberToken, { title: "kept" });
    const url = `/api/v1/chats/${chat.id as string}`;
    for (const [body, detail] of [
      [{}, /at least one/],
      [{ title: "  " }, /title: must not be empty/],
      [{ archived: "yes" }, /archived/],
      [{ color: "red" }, /color/],
    ] as const) {
      const r = await api.request("PATCH", url, { token: api.memberToken, body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.detail).toMatch(detail);
    }
    // An admin reads every chat but changes only their own.
    const other = await api.request("PATCH", url, {
      token: api.adminToken,
      body: { title: "taken" },
    });
    expect(other.status).toBe(404);
    const got = await api.request("GET", url, { token: api.memberToken });
    expect(got.body.title).toBe("kept");
  });

  it("a message to a waiting chat starts it; to a running chat it is queued (202 queued:true)", async () => {
    const chat = await createChat(api.memberToken);
    const url = `/api/v1/chats/${chat.id as string}/messages`;
    const first = await api.request("POST", url, { token: api.memberToken, body: { text: "one" } });
    expect(first.status).toBe(202);
    expect(first.body).toEqual({ message_id: expect.stringMatching(/^[0-9]+$/), queued: false });
    const second = await api.request("POST", url, {
      token: api.memberToken,
      body: { text: "two" },
    });
    expect(second.status).toBe(202);
    expect(second.body).toEqual({ queued: true });
    const queued = await db().query("SELECT content FROM chat_queued_messages WHERE chat_id = $1", [
      chat.id,
    ]);
    expect(queued.rows.map((r) => r.content)).toEqual([[{ type: "text", text: "two" }]]);
    const got = await api.request("GET", `/api/v1/chats/${chat.id as string}`, {
      token: api.memberToken,
    });
    expect(got.body.status).toBe("running");
  });

  it("the queue lists waiting messages in run order; its owner takes one back, nobody else can", async () => {
    const chat = await createChat(api.memberToken, { message: "running" });
    const id = chat.id as string;
    const send = (text: string) =>
      api.request("POST", `/api/v1/chats/${id}/messages`, {
        token: api.memberToken,
        body: { text },
      });
    await send("two");
    await send("three");
    const list = async (token: string) => {
      const r = await api.request("GET", `/api/v1/chats/${id}/queue`, { token });
      expect(r.status).toBe(200);
      return r.body.messages as { id: string; parts: unknown; created_by: string }[];
    };
    const queued = await list(api.memberToken);
    expect(queued.map((m) => [m.parts, m.created_by])).toEqual([
      [[{ type: "text", text: "two" }], api.memberId],
      [[{ type: "text", text: "three" }], api.memberId],
    ]);
    // Admins read it; they do not act in another's chat.
    expect(await list(api.adminToken)).toEqual(queued);
    const take = (token: string, queuedId: string) =>
      api.request("DELETE", `/api/v1/chats/${id}/queue/${queuedId}`, { token });
    expect((await take(api.adminToken, queued[0]!.id)).status).toBe(404);
    expect((await take(api.memberToken, queued[0]!.id)).status).toBe(204);
    expect((await take(api.memberToken, queued[0]!.id)).status).toBe(404);
    expect((await list(api.memberToken)).map((m) => m.id)).toEqual([queued[1]!.id]);
    const audit = await api.request("GET", "/api/v1/audit", { token: api.adminToken });
    expect(audit.body.entries).toContainEqual(
      expect.objectContaining({
        action: "chat.unqueue",
        user_id: api.memberId,
        target: id,
        details: { queued_id: queued[0]!.id },
      }),
    );
  });

  it("interrupt answers 202 and the chat is interrupting; busy_behavior interrupt queues and interrupts", async () => {
    const a = await createChat(api.memberToken, { message: "go" });
    const r = await api.request("POST", `/api/v1/chats/${a.id as string}/interrupt`, {
      token: api.memberToken,
    });
    expect(r.status).toBe(202);
    expect(
      (await api.request("GET", `/api/v1/chats/${a.id as string}`, { token: api.memberToken })).body
        .status,
    ).toBe("interrupting");

    const b = await createChat(api.memberToken, { message: "go" });
    const sent = await api.request("POST", `/api/v1/chats/${b.id as string}/messages`, {
      token: api.memberToken,
      body: { text: "stop and do this", busy_behavior: "interrupt" },
    });
    expect(sent).toMatchObject({ status: 202, body: { queued: true } });
    expect(
      (await api.request("GET", `/api/v1/chats/${b.id as string}`, { token: api.memberToken })).body
        .status,
    ).toBe("interrupting");
  });

  it("the message list shows user-visible, undeleted messages without billing parts, with runtime_ms", async () => {
    const chat = await createChat(api.memberToken, { message: "run ls" });
    const id = chat.id as string;
    const call: MessagePart = {
      type: "tool-call",
      tool_call_id: "c1",
      tool_name: "execute",
      args: { command: "ls" },
    };
    const assistant = await insertMessage(db(), id, {
      role: "assistant",
      visibility: "both",
      content: [call],
      runtime_ms: 1234,
    });
    await insertMessage(db(), id, {
      role: "system",
      visibility: "model",
      content: [{ type: "text", text: "hidden" }],
    });
    await insertMessage(db(), id, {
      role: "user",
      visibility: "both",
      content: [{ type: "text", text: "gone" }],
      deleted: true,
    });
    await insertMessage(db(), id, {
      role: "tool",
      visibility: "both",
      content: [
        {
          type: "tool-result",
          tool_call_id: "c1",
          tool_name: "execute",
          result: { status: "completed" },
          is_error: false,
        },
        { type: "tool-batch-usage", billed_ms: 5, billed_calls: 1 },
      ],
    });
    const r = await api.request("GET", `/api/v1/chats/${id}/messages`, { token: api.memberToken });
    const messages = r.body.messages as Record<string, unknown>[];
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant", "tool"]);
    expect(messages[1]).toMatchObject({ id: assistant, parts: [call], runtime_ms: 1234 });
    expect(messages[0]).not.toHaveProperty("runtime_ms");
    expect((messages[2]!.parts as { type: string }[]).map((p) => p.type)).toEqual(["tool-result"]);
  });

  it("a workspace the caller may not use, or a disabled model, is 404 and writes nothing", async () => {
    const [theirs, shared, disabled] = [randomUUID(), randomUUID(), randomUUID()];
    await db().query(
      `INSERT INTO workspaces (id, owner_id, name, agent_url, shared)
       VALUES ($1, $3, 'theirs', 'http://127.0.0.1:9', false), ($2, $3, 'ours', 'http://127.0.0.1:9', true)`,
      [theirs, shared, api.adminId],
    );
    await db().query(
      "INSERT INTO model_configs (id, provider, model, enabled) VALUES ($1, 'demo', 'off', false)",
      [disabled],
    );
    const counts = async () =>
      (
        await db().query<{ chats: string; audits: string }>(
          `SELECT (SELECT count(*) FROM chats) AS chats,
             (SELECT count(*) FROM audit_log WHERE action = 'chat.create') AS audits`,
        )
      ).rows[0];
    const before = await counts();
    for (const [body, field] of [
      [{ workspace_id: theirs, message: "go" }, "workspace_id"],
      [{ workspace_id: theirs }, "workspace_id"],
      [{ model_id: disabled, message: "go" }, "model_id"],
    ] as const) {
      const r = await api.request("POST", "/api/v1/chats", { token: api.memberToken, body });
      expect(r.status, JSON.stringify(body)).toBe(404);
      expect(r.body.detail).toContain(field);
    }
    expect(await counts()).toEqual(before);
    // The owner's own unshared workspace, and anyone's shared one, are fine.
    await createChat(api.adminToken, { workspace_id: theirs, message: "go" });
    const chat = await createChat(api.memberToken, { workspace_id: shared, message: "go" });
    expect(chat.workspace_id).toBe(shared);
    const audited = await db().query(
      "SELECT user_id, target, details FROM audit_log WHERE action = 'chat.create' AND target = $1",
      [chat.id],
    );
    expect(audited.rows).toEqual([
      {
        user_id: api.memberId,
        target: chat.id,
        details: { workspace_id: shared, model_id: null, message_bytes: 2 },
      },
    ]);
  });

  it("bad input is a 400 naming the field; unknown IDs are 404", async () => {
    const chat = await createChat(api.memberToken);
    const url = `/api/v1/chats/${chat.id as string}/messages`;
    const cases: [string, string, unknown, string][] = [
      ["POST", url, {}, "text"],
      ["POST", url, { text: "  " }, "text"],
      ["POST", url, { text: "x", busy_behavior: "shout" }, "busy_behavior"],
      ["POST", "/api/v1/chats", { workspace_id: "nope" }, "workspace_id"],
      ["POST", "/api/v1/chats", { title: 5 }, "title"],
      ["GET", "/api/v1/chats/123", undefined, "id"],
      ["GET", `${url}?after_id=-1`, undefined, "after_id"],
    ];
    for (const [method, u, body, field] of cases) {
      const r = await api.request(method, u, {
        token: api.memberToken,
        ...(body !== undefined && { body }),
      });
      expect(r.status, `${method} ${u} ${JSON.stringify(body)}`).toBe(400);
      expect(r.body.detail).toContain(field);
      expect(JSON.stringify(r.body)).not.toContain("    at ");
    }
    const model = await api.request("POST", "/api/v1/chats", {
      token: api.memberToken,
      body: { model_id: "00000000-0000-4000-8000-000000000000" },
    });
    expect(model.status).toBe(404);
    // A bodiless POST that still says JSON is fine; a poisoned prototype is not.
    const empty = await api.app.inject({
      method: "POST",
      url: "/api/v1/chats",
      headers: { authorization: `Bearer ${api.memberToken}`, "content-type": "application/json" },
    });
    expect(empty.statusCode).toBe(201);
    const poisoned = await api.app.inject({
      method: "POST",
      url,
      headers: { authorization: `Bearer ${api.memberToken}`, "content-type": "application/json" },
      payload: '{"text": "x", "__proto__": {"admin": true}}',
    });
    expect(poisoned.statusCode).toBe(400);
    const edit = await api.request("PATCH", `${url}/1`, {
      token: api.memberToken,
      body: { text: "x" },
    });
    expect(edit.status).toBe(404);
    expect(edit.body.message).toBe("Message 1 is not in the chat's history.");
  });

  const history = async (id: string): Promise<Record<string, unknown>[]> => {
    const r = await api.request("GET", `/api/v1/chats/${id}/messages`, { token: api.memberToken });
    return r.body.messages as Record<string, unknown>[];
  };

  it("editing a user message of an idle chat discards what followed and runs again from the edit", async () => {
    const chat = await createChat(api.memberToken, { message: "first" });
    const id = chat.id as string;
    const [first] = await history(id);
    await insertMessage(db(), id, {
      role: "assistant",
      visibility: "both",
      content: [{ type: "text", text: "answer" }],
      runtime_ms: 40,
    });
    await db().query("UPDATE chats SET status = 'waiting' WHERE id = $1", [id]);

    const assistant = (await history(id))[1]!;
    const notUser = await api.request(
      "PATCH",
      `/api/v1/chats/${id}/messages/${assistant.id as string}`,
      {
        token: api.memberToken,
        body: { text: "x" },
      },
    );
    expect(notUser.status).toBe(400);
    expect(notUser.body.message).toContain("only user messages can be edited");

    const edit = await api.request("PATCH", `/api/v1/chats/${id}/messages/${first!.id as string}`, {
      token: api.memberToken,
      body: { text: "second thoughts" },
    });
    expect(edit.status).toBe(200);
    expect(edit.body).toEqual({ message_id: expect.stringMatching(/^[0-9]+$/), queued: false });
    const after = await history(id);
    expect(after).toEqual([
      expect.objectContaining({
        id: edit.body.message_id,
        parts: [{ type: "text", text: "second thoughts" }],
      }),
    ]);
    const rows = await db().query<{ deleted: boolean; revision: number; created_by: string }>(
      "SELECT deleted, revision, created_by FROM chat_messages WHERE chat_id = $1 ORDER BY id",
      [id],
    );
    expect(rows.rows.map((r) => [r.deleted, r.revision])).toEqual([
      [true, 0],
      [true, 0],
      [false, 1],
    ]);
    expect(
      (await api.request("GET", `/api/v1/chats/${id}`, { token: api.memberToken })).body.status,
    ).toBe("running");
    // What the discarded branch spent stays billed.
    const usage = await api.request("GET", `/api/v1/chats/${id}/usage`, { token: api.memberToken });
    expect(usage.body.model_runtime_ms).toBe(40);
  });

  it("editing while the chat runs interrupts it and queues the edit until the interruption ends", async () => {
    const chat = await createChat(api.memberToken, { message: "first" });
    const id = chat.id as string;
    const [first] = await history(id);
    const url = `/api/v1/chats/${id}/messages/${first!.id as string}`;
    const edit = await api.request("PATCH", url, { token: api.memberToken, body: { text: "one" } });
    expect(edit.status).toBe(200);
    expect(edit.body).toEqual({ queued: true });
    const again = await api.request("PATCH", url, {
      token: api.memberToken,
      body: { text: "two" },
    });
    expect(again.body).toEqual({ queued: true });
    expect(
      (await api.request("GET", `/api/v1/chats/${id}`, { token: api.memberToken })).body.status,
    ).toBe("interrupting");
    // The newer edit replaced the older one; the history is untouched until the interrupt ends.
    const queued = await db().query(
      "SELECT content, edit_of FROM chat_queued_messages WHERE chat_id = $1",
      [id],
    );
    expect(queued.rows).toEqual([{ content: [{ type: "text", text: "two" }], edit_of: first!.id }]);
    expect(await history(id)).toHaveLength(1);
  });

  it("an internal failure is a 500 that says nothing inside, and its cause goes to the log", async () => {
    const lines: string[] = [];
    const log = pino({ level: "info" }, { write: (l: string) => void lines.push(l) });
    const logged = await createApi({ db: db(), buffer: new StreamBuffer(), log });
    try {
      const chat = await createChat(api.memberToken, { message: "busy" });
      await db().query("DROP TABLE chat_queued_messages");
      const r = await logged.inject({
        method: "POST",
        url: `/api/v1/chats/${chat.id as string}/messages`,
        headers: { authorization: `Bearer ${api.memberToken}` },
        payload: { text: "queued" },
      });
      expect(r.statusCode).toBe(500);
      expect(r.json()).toEqual({
        message: "Internal server error; the server log has the details.",
        code: "internal",
      });
      expect(lines.join("")).toContain("chat_queued_messages");
    } finally {
      await logged.close();
    }
  });
});
