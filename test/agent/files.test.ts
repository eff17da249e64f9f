// File edits and writes through the contract (CONTRACT.md 6 and 7, Files; A1).

import { readFile, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { RUN_AGE_HEADER } from "../../src/contract/index.ts";
import { headerValues, rawRequest } from "../support/http.ts";
import { newChat, tcHeaders, tcToolCall } from "../support/toolcall.ts";
import { useAgents } from "../support/agent.ts";

const startAgent = useAgents();

describe("files through the contract", () => {
  it("an edit runs once: a repeat replays the answer and does not touch the disk", async () => {
    const agent = await startAgent();
    const file = path.join(agent.dir, "a.txt");
    await writeFile(file, "one\ntwo\n");
    const tc = { chatId: newChat(), message: 2, id: "edit_1" };
    const req = {
      files: [{ path: file, edits: [{ old_text: "two", new_text: "three" }] }],
      include_diff: true,
    };
    const first = await agent.client.editFiles(req, { toolCall: tcToolCall(tc) });
    expect(await readFile(file, "utf8")).toBe("one\nthree\n");
    await writeFile(file, "one\ntwo\n"); // someone else puts it back
    const again = await agent.client.editFiles(req, { toolCall: tcToolCall(tc) });
    expect(again.files).toEqual(first.files);
    expect(await readFile(file, "utf8")).toBe("one\ntwo\n");
  });

  it("a failed edit is recorded and replayed; it wrote nothing", async () => {
    const agent = await startAgent();
    const a = path.join(agent.dir, "a.txt");
    const b = path.join(agent.dir, "b.txt");
    await writeFile(a, "alpha\n");
    await writeFile(b, "beta\n");
    const tc = { chatId: newChat(), message: 2, id: "edit_1" };
    const req = {
      files: [
        { path: a, edits: [{ old_text: "alpha", new_text: "ALPHA" }] },
        { path: b, edits: [{ old_text: "gamma", new_text: "GAMMA" }] },
      ],
    };
    const first = await rawRequest(agent.url, {
      path: "/api/v0/edit-files",
      headers: tcHeaders(tc),
      body: req,
    });
    expect(first.status).toBe(400);
    await writeFile(b, "gamma\n"); // the search would match now, but the call already ran
    const again = await rawRequest(agent.url, {
      path: "/api/v0/edit-files",
      headers: tcHeaders(tc),
      body: req,
    });
    expect(again.status).toBe(400);
    expect(again.body.equals(first.body)).toBe(true);
    expect(await readFile(a, "utf8")).toBe("alpha\n");
    expect(await readFile(b, "utf8")).toBe("gamma\n");
  });

  it("a malformed edit request is 400 and records nothing", async () => {
    const agent = await startAgent();
    const file = path.join(agent.dir, "a.txt");
    await writeFile(file, "x\n");
    const tc = { chatId: newChat(), message: 2, id: "edit_1" };
    for (const body of [
      { files: [] },
      { files: [{ path: "rel.txt", edits: [{ old_text: "x", new_text: "y" }] }] },
      "{",
    ]) {
      const res = await rawRequest(agent.url, {
        path: "/api/v0/edit-files",
        headers: tcHeaders(tc),
        body,
      });
      expect(res.status).toBe(400);
      expect(headerValues(res, RUN_AGE_HEADER)).toEqual([]);
    }
    const req = { files: [{ path: file, edits: [{ old_text: "x", new_text: "y" }] }] };
    await agent.client.editFiles(req, { toolCall: tcToolCall(tc) });
    expect(await readFile(file, "utf8")).toBe("y\n");
  });

  it("write-file through the contract runs once, keeps the mode and creates parents", async () => {
    const agent = await startAgent();
    const file = path.join(agent.dir, "deep", "er", "f.sh");
    const tc = { chatId: newChat(), message: 2, id: "w" };
    const res = await agent.client.writeFile(file, "#!/bin/sh\n", { toolCall: tcToolCall(tc) });
    expect(res.message).toBe(`Successfully wrote to "${file}"`);
    await writeFile(file, "changed\n");
    await agent.client.writeFile(file, "#!/bin/sh\n", { toolCall: tcToolCall(tc) });
    expect(await readFile(file, "utf8")).toBe("changed\n");
    const exe = path.join(agent.dir, "run.sh");
    await writeFile(exe, "old", { mode: 0o755 });
    await agent.client.writeFile(exe, "new", { toolCall: tcToolCall({ ...tc, id: "w2" }) });
    expect((await stat(exe)).mode & 0o777).toBe(0o755);
    expect(await readFile(exe, "utf8")).toBe("new");
  });

  it("write-file takes 32 MiB bodies and answers 413 above its limit, writing nothing", async () => {
    const agent = await startAgent();
    const file = path.join(agent.dir, "big.bin");
    const big = Buffer.alloc(32 * 1024 * 1024, 7);
    await agent.client.writeFile(file, big);
    expect((await stat(file)).size).toBe(big.length);
    const tooBig = path.join(agent.dir, "too-big.bin");
    const res = await rawRequest(agent.url, {
      path: `/api/v0/write-file?path=${encodeURIComponent(tooBig)}`,
      headers: { "content-type": "application/octet-stream" },
      body: Buffer.alloc(64 * 1024 * 1024 + 1),
    });
    expect(res.status).toBe(413);
    expect(res.json()).toMatchObject({ message: "Request body is too large." });
    await expect(stat(tooBig)).rejects.toThrow();
  });

  it("JSON bodies above 1 MiB get 413 and start nothing", async () => {
    const agent = await startAgent();
    const res = await rawRequest(agent.url, {
      path: "/api/v0/processes/start",
      body: { command: "true", pad: "x".repeat(1024 * 1024) },
    });
    expect(res.status).toBe(413);
    expect(agent.allProcesses()).toHaveLength(0);
  });

  it("reads go through without tool call headers", async () => {
    const agent = await startAgent();
    const file = path.join(agent.dir, "r.txt");
    await writeFile(file, "a\nb\nc\n");
    expect((await agent.client.readFile(file, { offset: 2, limit: 3 })).toString()).toBe("b\nc");
    expect(await agent.client.readFileLines(file, { offset: 2 })).toMatchObject({
      success: true,
      content: "2\tb\n3\tc",
      total_lines: 3,
    });
    const listing = await agent.client.listDirectory({
      path: agent.dir.split("/").filter(Boolean),
      relativity: "root",
    });
    expect(listing.contents.map((c) => c.name)).toEqual(["r.txt"]);
  });
});
