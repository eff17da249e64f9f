// Lost answers (CHATD.md 6, 7): a start, write, edit or cancel whose connection is lost after
// it went out is sent again, with the same tool call headers and an older age, within the
// agent answer timeout; the agent answers the repeat from its record. So a cut answer or a
// dropped request ends in the real result instead of unknown, and the work still happens once.
// The fault proxy of the chaos campaign sits between the worker and a real agent.

import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { expect, it } from "vitest";
import { interrupt } from "../../src/chatd/transitions/index.ts";
import { until } from "../support/agent.ts";
import { results, settle, startChat, useLoops } from "../support/chatd.ts";
import { describeDatabases } from "../support/db.ts";
import { FaultProxy } from "../chaos/proxy.ts";
import { Rng } from "../chaos/rng.ts";

const { env, cleanup } = useLoops();

/** The worker talks to the agent through a fault proxy that passes everything unless forced. */
async function proxied(db: Parameters<typeof env>[0], agentAnswerTimeoutMs = 3_000) {
  const e = await env(db, { agentAnswerTimeoutMs });
  const proxy = await FaultProxy.start("agent", () => e.agent.url, new Rng(1));
  cleanup.push(() => proxy.close());
  await db().query("UPDATE workspaces SET agent_url = $2 WHERE id = $1", [
    e.setup.workspaceId,
    proxy.url,
  ]);
  const sent = (route: string) =>
    proxy.log.filter((l) => l.route === route).map((l) => [l.action, l.agentStatus]);
  return { ...e, proxy, sent };
}

describeDatabases("lost answers are asked again", (db) => {
  it("a start whose answer was cut is sent again and answered from the agent's record: completed, run once", async () => {
    const { fake, agent, proxy, sent, setup } = await proxied(db);
    const marker = path.join(agent.dir, "ran");
    proxy.force("POST /api/v0/processes/start", "cut_response");
    fake.script(
      {
        toolCalls: [
          { id: "x", name: "execute", args: { command: `echo once >> ${marker}; echo hi` } },
        ],
      },
      { text: "ok" },
    );
    const { history } = await settle(db(), await startChat(db(), setup, "go"));
    expect(results(history)).toEqual([
      expect.objectContaining({ status: "completed", exit_code: 0, output: "hi\n" }),
    ]);
    expect(await readFile(marker, "utf8")).toBe("once\n");
    // The agent answered both; the first answer never reached the worker.
    expect(sent("POST /api/v0/processes/start")).toEqual([
      ["cut_response", 200],
      ["pass", 200],
    ]);
  });

  it("a wait for a command's exit whose answer was cut is asked again: completed, not unknown", async () => {
    const { fake, proxy, sent, setup } = await proxied(db);
    proxy.force("GET /api/v0/processes/:id/output", "cut_response");
    fake.script(
      { toolCalls: [{ id: "x", name: "execute", args: { command: "sleep 0.3; echo done" } }] },
      { text: "ok" },
    );
    const { history } = await settle(db(), await startChat(db(), setup, "go"));
    expect(results(history)).toEqual([
      expect.objectContaining({ status: "completed", exit_code: 0, output: "done\n" }),
    ]);
    expect(sent("GET /api/v0/processes/:id/output")[0]).toEqual(["cut_response", 200]);
  });

  it("a write dropped on the way is sent again and applied once", async () => {
    const { fake, agent, proxy, sent, setup } = await proxied(db);
    const file = path.join(agent.dir, "a.txt");
    proxy.force("POST /api/v0/write-file", "drop_request");
    fake.script(
      { toolCalls: [{ id: "w", name: "write_file", args: { path: file, content: "A\n" } }] },
      { text: "ok" },
    );
    const { history } = await settle(db(), await startChat(db(), setup, "go"));
    expect(results(history)).toEqual([expect.objectContaining({ status: "applied" })]);
    expect(await readFile(file, "utf8")).toBe("A\n");
    expect(sent("POST /api/v0/write-file")).toEqual([
      ["drop_request", undefined],
      ["pass", 200],
    ]);
  });

  it("an edit whose answer is lost every time is unknown after the last try, and applied once", async () => {
    const { fake, agent, proxy, sent, setup } = await proxied(db);
    const file = path.join(agent.dir, "b.txt");
    await writeFile(file, "one\n");
    proxy.force("POST /api/v0/edit-files", ...Array<"cut_response">(4).fill("cut_response"));
    fake.script(
      {
        toolCalls: [
          {
            id: "e",
            name: "edit_files",
            args: { files: [{ path: file, edits: [{ old_text: "one", new_text: "one two" }] }] },
          },
        ],
      },
      { text: "ok" },
    );
    const { history } = await settle(db(), await startChat(db(), setup, "go"));
    expect(results(history)).toEqual([
      expect.objectContaining({ status: "unknown", reason: "agent_no_answer" }),
    ]);
    expect(await readFile(file, "utf8")).toBe("one two\n");
    expect(sent("POST /api/v0/edit-files")).toEqual(
      Array.from({ length: 4 }, () => ["cut_response", 200]),
    );
  });

  it("an interrupt's cancel whose answer was cut is sent again: canceled by the user, with the partial output", async () => {
    const { fake, agent, proxy, sent, setup } = await proxied(db);
    fake.script(
      {
        toolCalls: [
          { id: "x", name: "execute", args: { command: "echo early; sleep 30", timeout: "60s" } },
        ],
      },
      { text: "ok" },
    );
    const chatId = await startChat(db(), setup, "go");
    await until(async () => {
      const processes = agent.allProcesses();
      return processes.some((p) => p.running && p.command.includes("echo early"));
    }, 10_000);
    proxy.force("POST /api/v0/tool-calls/:id/cancel", "cut_response");
    await interrupt(db(), chatId);
    const { chat, history } = await settle(db(), chatId);
    expect(chat.status).toBe("waiting");
    expect(results(history)).toEqual([
      expect.objectContaining({ status: "canceled", output: "early\n" }),
    ]);
    expect(sent("POST /api/v0/tool-calls/:id/cancel")).toEqual([
      ["cut_response", 200],
      ["pass", 200],
    ]);
    const processes = agent.allProcesses();
    expect(processes.filter((p) => p.running)).toEqual([]);
  });
});
