// Transitions (CHATD.md 3) and acquisition (4) against the real database, both drivers.

import { randomUUID } from "node:crypto";
import { expect, it } from "vitest";
import { FenceError, type Fence } from "../../src/chatd/chats.ts";
import {
  acquire,
  CHAT_CHANNEL,
  claimIn,
  commitStep,
  createChat,
  editMessage,
  finishTurn,
  heartbeat,
  loadChat,
  loadHistory,
  recordGenerationAttempt,
  recordRetryState,
  sendMessage,
  type Acquired,
  type ChatChange,
  type LocalClaim,
  loadQueue,
  removeQueued,
} from "../../src/chatd/transitions/index.ts";
import type { Database } from "../../src/chatd/db/index.ts";
import { MessageFeed } from "../../src/chatd/message-feed.ts";
import { changePayloadSql } from "../../src/chatd/transitions/change.ts";
import { HeldChat } from "../../src/chatd/transitions/held.ts";
import { realClock } from "../../src/contract/index.ts";
import { describeDatabases } from "../support/db.ts";

async function user(db: Database): Promise<string> {
  const id = randomUUID();
  await db.query(
    "INSERT INTO users (id, email, role, password_hash) VALUES ($1, $2, 'member', 'x')",
    [id, `${id}@t`],
  );
  return id;
}

async function ownedChat(db: Database, workerId = randomUUID()) {
  const owner = await user(db);
  const chat = await createChat(db, {
    ownerId: owner,
    workspaceId: null,
    modelConfigId: null,
    message: "hi",
  });
  const [claim] = await acquire(db, workerId, { leaseMs: 60_000, limit: 10 });
  expect(claim!.previousWorkerId).toBeNull(); // nobody owned the new chat: no takeover
  const now = (await loadChat(db, chat.id))!;
  const fence: Fence = {
    chatId: chat.id,
    workerId,
    runnerId: claim!.runnerId,
    status: "running",
    historyVersion: now.historyVersion,
  };
  return { owner, chatId: chat.id, fence, workerId };
}

const answer = (text: string) => ({
  role: "assistant" as const,
  visibility: "both" as const,
  content: [{ type: "text" as const, text }],
});

describeDatabases("transitions", (db) => {
  it("a message insert moves history_version to the new snapshot and resets generation_attempt", async () => {
    const { chatId, fence } = await ownedChat(db());
    // The claim counted the attempt of the model call that may come next; another is counted.
    expect((await loadChat(db(), chatId))!.generationAttempt).toBe(1);
    const attempt = await recordGenerationAttempt(db(), fence);
    expect(attempt).toBe(2);
    const before = (await loadChat(db(), chatId))!;
    await commitStep(db(), { ...fence, generationAttempt: 2 }, [answer("hello")]);
    const after = (await loadChat(db(), chatId))!;
    expect(BigInt(after.snapshotVersion)).toBe(BigInt(before.snapshotVersion) + 1n);
    expect(after.historyVersion).toBe(after.snapshotVersion);
    expect(after.generationAttempt).toBe(0);
  });

  it("a stale task's commit fails its fence and writes nothing", async () => {
    const { chatId, fence } = await ownedChat(db());
    const cases: Fence[] = [
      { ...fence, runnerId: randomUUID() },
      { ...fence, workerId: randomUUID() },
      { ...fence, status: "interrupting" },
      { ...fence, historyVersion: "999" },
    ];
    for (const stale of cases)
      await expect(commitStep(db(), stale, [answer("x")])).rejects.toBeInstanceOf(FenceError);
    await recordGenerationAttempt(db(), fence);
    await expect(
      commitStep(db(), { ...fence, generationAttempt: 0 }, [answer("x")]),
    ).rejects.toBeInstanceOf(FenceError);
    expect((await loadHistory(db(), chatId)).map((m) => m.role)).toEqual(["user"]);
  });

  /** The notifications of CHAT_CHANNEL while `fn` runs, and 100 ms after. */
  async function notifiedDuring(fn: () => Promise<void>): Promise<ChatChange[]> {
    const seen: ChatChange[] = [];
    const stop = await db().listen(CHAT_CHANNEL, (p) => seen.push(JSON.parse(p) as ChatChange));
    try {
      await fn();
      await new Promise((r) => setTimeout(r, 100));
      return seen;
    } finally {
      await stop();
    }
  }

  /** The change the database builds from the chat's row now (changePayloadSql). */
  async function payloadNow(chatId: string): Promise<ChatChange> {
    const r = await db().query<{ p: string }>(
      `SELECT ${changePayloadSql("chats")} AS p FROM chats WHERE id = $1`,
      [chatId],
    );
    return JSON.parse(r.rows[0]!.p) as ChatChange;
  }

  it("a transition's change is notified after commit, and never for a transition that failed", async () => {
    const { owner, chatId, workerId, fence } = await ownedChat(db());
    const seen = await notifiedDuring(async () => {
      await expect(sendMessage(db(), randomUUID(), owner, "x", "queue")).rejects.toThrow();
      expect(await sendMessage(db(), chatId, owner, "next", "queue")).toEqual({ queued: true });
    });
    const chat = (await loadChat(db(), chatId))!;
    expect(seen).toEqual([
      {
        chat_id: chatId,
        snapshot_version: chat.snapshotVersion,
        history_version: chat.historyVersion,
        status: "running",
        runner_id: fence.runnerId,
        worker_id: workerId,
        generation_attempt: chat.generationAttempt,
        retry_state: false,
      },
    ]);
  });

  it("a new chat with a message and no local claim is notified once, for any replica to run", async () => {
    const owner = await user(db());
    const ids: string[] = [];
    const seen = await notifiedDuring(async () => {
      for (const message of ["go", undefined]) {
        const chat = await createChat(db(), {
          ownerId: owner,
          workspaceId: null,
          modelConfigId: null,
          ...(message !== undefined && { message }),
        });
        ids.push(chat.id);
      }
    });
    // Only this test's chats: other test files' schemas share the Postgres database.
    expect(seen.filter((c) => ids.includes(c.chat_id))).toEqual([
      {
        chat_id: ids[0],
        snapshot_version: "1",
        history_version: "1",
        status: "running",
        runner_id: null,
        worker_id: null,
        generation_attempt: 0,
        retry_state: false,
      },
    ]);
  });

  it("a fenced write notifies nobody: its change goes to the feed once committed, as the row's payload", async () => {
    const { chatId, fence } = await ownedChat(db());
    const feed = new MessageFeed();
    const told: ChatChange[] = [];
    const unwatch = feed.changes(chatId, (c) => told.push(c));
    const held = new HeldChat(realClock, 2_000, feed);
    const seen = await notifiedDuring(async () => {
      await expect(
        commitStep(db(), { ...fence, runnerId: randomUUID() }, [answer("x")], held),
      ).rejects.toThrow();
      expect(told).toEqual([]);
      await commitStep(db(), fence, [answer("ok")], held);
      expect(told).toEqual([await payloadNow(chatId)]);
      const chat = (await loadChat(db(), chatId))!;
      await recordRetryState(
        db(),
        { ...fence, historyVersion: chat.historyVersion },
        { attempt: 1, lastError: "boom", delayMs: 10 },
        held,
      );
      expect(told.at(-1)).toEqual(await payloadNow(chatId));
      expect(told.at(-1)!.retry_state).toBe(true);
    });
    unwatch();
    expect(seen).toEqual([]);
    expect(told).toHaveLength(2);
  });

  it("a message to a busy chat is queued and starts the next turn when this one ends", async () => {
    const { owner, chatId, fence } = await ownedChat(db());
    expect(await sendMessage(db(), chatId, owner, "next", "queue")).toEqual({ queued: true });
    await commitStep(db(), fence, [answer("first answer")]);
    const chat = (await loadChat(db(), chatId))!;
    expect(await finishTurn(db(), { ...fence, historyVersion: chat.historyVersion })).toBe(
      "running",
    );
    const history = await loadHistory(db(), chatId);
    expect(history.map((m) => [m.role, m.content[0]])).toEqual([
      ["user", { type: "text", text: "hi" }],
      ["assistant", { type: "text", text: "first answer" }],
      ["user", { type: "text", text: "next" }],
    ]);
  });

  it("a queued message taken back never runs; the next one does, and an edit in waiting stays", async () => {
    const { owner, chatId, fence } = await ownedChat(db());
    await sendMessage(db(), chatId, owner, "unwanted", "queue");
    await sendMessage(db(), chatId, owner, "wanted", "queue");
    const [unwanted, wanted] = await loadQueue(db(), chatId);
    expect(await removeQueued(db(), chatId, unwanted!.id)).toBe(true);
    expect(await removeQueued(db(), chatId, unwanted!.id)).toBe(false);
    expect((await loadQueue(db(), chatId)).map((q) => q.id)).toEqual([wanted!.id]);
    // Taking a message back changes no history: the running turn's fence still holds.
    await commitStep(db(), fence, [answer("first answer")]);
    const chat = (await loadChat(db(), chatId))!;
    expect(await finishTurn(db(), { ...fence, historyVersion: chat.historyVersion })).toBe(
      "running",
    );
    const history = await loadHistory(db(), chatId);
    expect(history.map((m) => m.content[0])).toEqual([
      { type: "text", text: "hi" },
      { type: "text", text: "first answer" },
      { type: "text", text: "wanted" },
    ]);
    // An edit waiting for its interruption is not a message one can take back.
    await editMessage(db(), chatId, owner, history[0]!.id, "edited");
    const [edit] = await loadQueue(db(), chatId);
    expect(edit!.editOf).toBe(history[0]!.id);
    expect(await removeQueued(db(), chatId, edit!.id)).toBe(false);
  });

  it("a finished turn lets the chat go: waiting, unowned, no lease", async () => {
    const { chatId, fence, workerId } = await ownedChat(db());
    await commitStep(db(), fence, [answer("done")]);
    const runners = [fence.runnerId];
    const chat = (await loadChat(db(), chatId))!;
    expect(await finishTurn(db(), { ...fence, historyVersion: chat.historyVersion })).toBe(
      "waiting",
    );
    expect(await loadChat(db(), chatId)).toMatchObject({
      status: "waiting",
      workerId: null,
      runnerId: null,
    });
    expect((await heartbeat(db(), workerId, runners)).size).toBe(0);
  });

  it("a new chat with a local claim is claimed as it is made, notifying nobody", async () => {
    const owner = await user(db());
    const workerId = randomUUID();
    const claims: Acquired[] = [];
    const local = (): LocalClaim => ({
      workerId,
      claim: async (tx, chatId) => {
        const c = await claimIn(tx, workerId, chatId);
        if (c) claims.push(c);
        return c?.chat;
      },
      created: (c) => claims.push(c),
      committed: () => undefined,
    });
    // Only this test's chats (each is claimed, even the one rolled back): other test files'
    // schemas share the Postgres database, and so its channels.
    const heard: ChatChange[] = [];
    const ours = () => heard.filter((c) => claims.some((a) => a.chatId === c.chat_id));
    const stop = await db().listen(CHAT_CHANNEL, (p) => heard.push(JSON.parse(p) as ChatChange));
    const settled = async (n: number) => {
      const end = Date.now() + 3_000;
      while (ours().length < n && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
      await new Promise((r) => setTimeout(r, 100));
    };
    try {
      // A claim in a transaction that fails claims nothing and notifies nothing.
      await expect(
        db().transaction(async (tx) => {
          await createChat(
            tx,
            { ownerId: owner, workspaceId: null, modelConfigId: null, message: "no" },
            local(),
          );
          throw new Error("rolled back");
        }),
      ).rejects.toThrow("rolled back");
      const chat = await db().transaction((tx) =>
        createChat(
          tx,
          { ownerId: owner, workspaceId: null, modelConfigId: null, message: "hi" },
          local(),
        ),
      );
      const claimed = claims.at(-1)!;
      expect(chat).toMatchObject({ workerId, runnerId: claimed.runnerId, status: "running" });
      expect(claimed.start.history).toEqual(await loadHistory(db(), chat.id));
      expect(claimed.chat.generationAttempt).toBe(1);
      // Its lease is fresh: nobody else acquires it.
      expect(await acquire(db(), randomUUID(), { leaseMs: 60_000, limit: 10 })).toEqual([]);
      // No notification: no runner had the chat, and no stream could follow it before it was.
      // (The message below is notified, and notifications arrive in commit order.)

      // A message to the running chat is queued: nothing to claim, the change is notified.
      const before = claims.length;
      expect(await sendMessage(db(), chat.id, owner, "next", "queue", undefined, local())).toEqual({
        queued: true,
      });
      expect(claims.length).toBe(before);
      await settled(1);
      expect(ours()).toEqual([
        expect.objectContaining({ chat_id: chat.id, runner_id: claimed.runnerId }),
      ]);

      // The turn ends and the queued message runs (the same runner's); then the chat waits, and
      // a message starts the next turn, claimed with it.
      let fence: Fence = {
        chatId: chat.id,
        workerId,
        runnerId: claimed.runnerId,
        status: "running",
        historyVersion: claimed.chat.historyVersion,
      };
      for (const expected of ["running", "waiting"] as const) {
        await commitStep(db(), fence, [answer("done")]);
        fence = { ...fence, historyVersion: (await loadChat(db(), chat.id))!.historyVersion };
        expect(await finishTurn(db(), fence)).toBe(expected);
        fence = { ...fence, historyVersion: (await loadChat(db(), chat.id))!.historyVersion };
      }
      expect(claims.length).toBe(before);
      const sent = await sendMessage(db(), chat.id, owner, "again", "queue", undefined, local());
      expect(sent.queued).toBe(false);
      expect(claims.length).toBe(before + 1);
      expect(await loadChat(db(), chat.id)).toMatchObject({
        status: "running",
        workerId,
        runnerId: claims.at(-1)!.runnerId,
      });
      expect(claims.at(-1)!.start.history!.at(-1)!.content).toEqual([
        { type: "text", text: "again" },
      ]);
    } finally {
      await stop();
    }
  });

  it("acquire claims unowned chats and chats whose lease is stale, never a fresh lease", async () => {
    const { chatId, workerId, fence } = await ownedChat(db());
    const runners = [fence.runnerId];
    const other = randomUUID();
    expect(await acquire(db(), other, { leaseMs: 60_000, limit: 10 })).toEqual([]);
    await db().query(
      "UPDATE chat_heartbeats SET heartbeat_at = now() - interval '2 minutes' WHERE chat_id = $1",
      [chatId],
    );
    // Only through a live runner: the same worker without one does not renew the lease.
    expect((await heartbeat(db(), workerId, [])).size).toBe(0);
    expect(await heartbeat(db(), workerId, runners)).toEqual(new Set([chatId])); // the owner renews it
    expect(await acquire(db(), other, { leaseMs: 60_000, limit: 10 })).toEqual([]);
    await db().query(
      "UPDATE chat_heartbeats SET heartbeat_at = now() - interval '2 minutes' WHERE chat_id = $1",
      [chatId],
    );
    const taken = await acquire(db(), other, { leaseMs: 60_000, limit: 10 });
    expect(taken.map((t) => t.chatId)).toEqual([chatId]);
    expect(taken[0]!.previousWorkerId).toBe(workerId); // a takeover names whom it took from
    expect((await heartbeat(db(), workerId, runners)).size).toBe(0); // the old owner learns it lost the chat
    expect(await loadChat(db(), chatId)).toMatchObject({
      workerId: other,
      runnerId: taken[0]!.runnerId,
    });
  });

  it("a worker acquires its own chat again once its lease is stale (it has no live runner)", async () => {
    const { chatId, workerId, fence } = await ownedChat(db());
    expect(await acquire(db(), workerId, { leaseMs: 60_000, limit: 10 })).toEqual([]);
    await db().query(
      "UPDATE chat_heartbeats SET heartbeat_at = now() - interval '2 minutes' WHERE chat_id = $1",
      [chatId],
    );
    const again = await acquire(db(), workerId, { leaseMs: 60_000, limit: 10 });
    expect(again.map((t) => t.chatId)).toEqual([chatId]);
    expect(again[0]!.runnerId).not.toBe(fence.runnerId);
  });

  it("a claim answers what its runner starts from: the history since the boundary, the snapshot, the inputs", async () => {
    const owner = await user(db());
    const workspace = randomUUID();
    await db().query(
      "INSERT INTO workspaces (id, name, owner_id, shared, agent_url) VALUES ($1, $2, $3, false, 'http://127.0.0.1:1')",
      [workspace, `ws-${workspace}`, owner],
    );
    await db().query(
      `INSERT INTO settings (key, value) VALUES ('instructions', '{"text":"be brief"}')
       ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`,
    );
    const chat = await createChat(db(), {
      ownerId: owner,
      workspaceId: workspace,
      modelConfigId: null,
      message: "hi",
    });
    const workerId = randomUUID();
    const [claim] = await acquire(db(), workerId, { leaseMs: 60_000, limit: 10 });
    expect(claim!.chat.generationAttempt).toBe(1); // counted for the model call that comes next
    expect(claim!.start).toEqual({
      history: await loadHistory(db(), chat.id),
      snapshot: null,
      access: { status: "usable" },
      organization: "be brief",
    });
    expect(claim!.start.history!.map((m) => m.content)).toEqual([[{ type: "text", text: "hi" }]]);

    // Kept snapshot, a boundary, and the workspace now neither shared nor the owner's.
    await db().query("INSERT INTO chat_contexts (chat_id, snapshot) VALUES ($1, $2::jsonb)", [
      chat.id,
      JSON.stringify({ environment: null, files: [], organization: null }),
    ]);
    const fence: Fence = {
      chatId: chat.id,
      workerId,
      runnerId: claim!.runnerId,
      status: "running",
      historyVersion: claim!.chat.historyVersion,
      generationAttempt: 1,
    };
    await commitStep(db(), fence, [{ ...answer("summary"), boundary: true }, answer("after")]);
    await db().query("UPDATE workspaces SET owner_id = NULL WHERE id = $1", [workspace]);
    await db().query(
      "UPDATE chat_heartbeats SET heartbeat_at = now() - interval '2 minutes' WHERE chat_id = $1",
      [chat.id],
    );
    const [again] = await acquire(db(), randomUUID(), { leaseMs: 60_000, limit: 10 });
    expect(again!.start.history!.map((m) => m.content)).toEqual([
      [{ type: "text", text: "summary" }],
      [{ type: "text", text: "after" }],
    ]);
    expect(again!.start.snapshot?.snapshot).toEqual({
      environment: null,
      files: [],
      organization: null,
    });
    expect(again!.start.snapshot?.capturedAt).toBeInstanceOf(Date);
    expect(again!.start.access).toEqual({ status: "lost", why: "unshared" });
    await db().query("DELETE FROM settings WHERE key = 'instructions'");
  });
});
