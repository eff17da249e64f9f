// Workspace agents at https:// URLs (issue 11, item 11), end to end: a real `bin/tether server`
// process that trusts a private CA through NODE_EXTRA_CA_CERTS, and real agents behind a
// TLS-terminating node:https proxy with certificates made by the `openssl` CLI. A trusted agent
// runs the chat's command and is listed healthy; one whose certificate the server does not
// trust ends the turn in `error` at once, saying why, and never breaks the workspace list.

import { execFileSync } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import http from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestAgent, type TestAgent } from "../support/agent.ts";
import {
  api,
  seedEmbeddedDatabase,
  startServerProcess,
  type ServerProcess,
} from "../support/server.ts";

const cleanups: (() => Promise<void> | void)[] = [];

/** A self-signed certificate for 127.0.0.1 (its own CA), made with the openssl CLI. */
function makeCertificate(dir: string, name: string): { key: string; cert: string } {
  const key = path.join(dir, `${name}.key`);
  const cert = path.join(dir, `${name}.pem`);
  execFileSync(
    "openssl",
    [
      ...["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"],
      ...["-keyout", key, "-out", cert, "-subj", `/CN=tether test ${name}`],
      ...["-addext", "subjectAltName=IP:127.0.0.1"],
    ],
    { stdio: "ignore" },
  );
  return { key, cert };
}

/** An https proxy on 127.0.0.1 in front of `agent`'s plain-HTTP URL (TLS terminated here). */
async function tlsProxy(agent: TestAgent, tls: { key: string; cert: string }): Promise<string> {
  const target = new URL(agent.url);
  const server = https.createServer(
    { key: await readFile(tls.key), cert: await readFile(tls.cert) },
    (req, res) => {
      const up = http.request(
        {
          host: target.hostname,
          port: target.port,
          method: req.method,
          path: req.url,
          headers: req.headers,
        },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      up.on("error", () => res.destroy());
      req.pipe(up);
    },
  );
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  cleanups.push(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  return `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

interface ChatView {
  id: string;
  status: string;
  last_error?: { message: string };
}

async function settled(server: ServerProcess, token: string, id: string): Promise<ChatView> {
  const end = Date.now() + 30_000;
  for (;;) {
    const chat = await api<ChatView>(server.url, token, "GET", `/api/v1/chats/${id}`);
    if (chat.status === "waiting" || chat.status === "error") return chat;
    if (Date.now() > end) throw new Error(`chat still ${chat.status}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("https workspace agents", () => {
  let server: ServerProcess;
  let token: string;
  let trustedUrl: string;
  let untrustedUrl: string;

  beforeAll(async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "tether-https-"));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const trusted = makeCertificate(dir, "trusted");
    const untrusted = makeCertificate(dir, "untrusted");
    for (const [which, cert] of [
      ["trusted", trusted],
      ["untrusted", untrusted],
    ] as const) {
      const agent = await startTestAgent();
      cleanups.push(() => agent.close());
      const url = await tlsProxy(agent, cert);
      if (which === "trusted") trustedUrl = url;
      else untrustedUrl = url;
    }
    await seedEmbeddedDatabase(path.join(dir, "data"));
    server = await startServerProcess(
      ["--data-dir", path.join(dir, "data"), "--no-local-workspace", "--model", "demo"],
      dir,
      (fn) => void cleanups.push(fn),
      // The documented way to trust a private CA: Node reads it at start-up.
      { env: { ...process.env, NODE_EXTRA_CA_CERTS: trusted.cert } },
    );
    const first = await api<{ token: string }>(
      server.url,
      undefined,
      "POST",
      "/api/v1/users/first",
      {
        email: "owner@example.com",
        password: "correct horse battery",
      },
    );
    token = first.token;
  }, 90_000);

  afterAll(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  it("an agent behind TLS with a CA the server trusts runs the chat's command and is listed healthy", async () => {
    const ws = await api<{ id: string }>(server.url, token, "POST", "/api/v1/workspaces", {
      name: "tls",
      agent_url: trustedUrl,
    });
    const chat = await api<ChatView>(server.url, token, "POST", "/api/v1/chats", {
      workspace_id: ws.id,
      message: "$ echo over-tls",
    });
    const done = await settled(server, token, chat.id);
    expect(done.status).toBe("waiting");
    const { messages } = await api<{ messages: { parts: Record<string, unknown>[] }[] }>(
      server.url,
      token,
      "GET",
      `/api/v1/chats/${chat.id}/messages`,
    );
    const results = messages.flatMap((m) => m.parts).filter((p) => p.type === "tool-result");
    expect(results.map((p) => p.result)).toEqual([
      expect.objectContaining({ status: "completed", exit_code: 0, output: "over-tls\n" }),
    ]);
    const { workspaces } = await api<{
      workspaces: { id: string; health?: { reachable: boolean } }[];
    }>(server.url, token, "GET", "/api/v1/workspaces");
    expect(workspaces.find((w) => w.id === ws.id)!.health).toMatchObject({ reachable: true });
  });

  it("an agent whose certificate the server does not trust ends the turn in error at once, and the list still answers", async () => {
    const ws = await api<{ id: string }>(server.url, token, "POST", "/api/v1/workspaces", {
      name: "untrusted",
      agent_url: untrustedUrl,
    });
    const chat = await api<ChatView>(server.url, token, "POST", "/api/v1/chats", {
      workspace_id: ws.id,
      message: "$ echo never",
    });
    const done = await settled(server, token, chat.id);
    expect(done.status).toBe("error");
    expect(done.last_error!.message).toContain("TLS certificate is not trusted");
    expect(done.last_error!.message).toContain("NODE_EXTRA_CA_CERTS");
    const { workspaces } = await api<{
      workspaces: { id: string; health?: { reachable: boolean } }[];
    }>(server.url, token, "GET", "/api/v1/workspaces");
    expect(workspaces.find((w) => w.id === ws.id)!.health).toMatchObject({ reachable: false });
  });
});
