// A server for template workspace tests, all real: `bin/tether server` (embedded database, no
// local workspace, short lifecycle intervals) with HOME set to a fresh directory, so the local
// template's homes live there; the fake model provider; the owner's token; and helpers to push
// a template with `bin/tether templates push`, make workspaces and chats, and wait for states.
// `close()` stops the server and then every agent and container the templates left.

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { startFakeProvider, type FakeProvider } from "./fake-provider.ts";
import { alive, BIN } from "./server.ts";
import { waitFor, type ApiMessage } from "./replicas.ts";

export { waitFor, type ApiMessage };

/** A server process that has not printed its listening line in this long failed to start. */
const START_TIMEOUT_MS = 90_000;
/** A stopped server that has not exited in this long is killed. */
const EXIT_TIMEOUT_MS = 20_000;

export const EXAMPLES = path.resolve(import.meta.dirname, "../../examples/templates");

export function terraformAvailable(): boolean {
  return spawnSync("terraform", ["version"], { stdio: "ignore" }).status === 0;
}

export function dockerAvailable(): boolean {
  return spawnSync("docker", ["info"], { stdio: "ignore", timeout: 20_000 }).status === 0;
}

export interface BuildJson {
  id: string;
  transition: "start" | "stop" | "delete";
  reason: "user" | "autostop" | "chat";
  status: "pending" | "running" | "succeeded" | "failed";
  created_at: string;
  started_at?: string;
  finished_at?: string;
  error?: string;
}

export interface WorkspaceJson {
  id: string;
  name: string;
  status: string;
  template_id: string;
  ttl_ms: number;
  deadline: string | null;
  agent: { connected: boolean };
  latest_build: BuildJson | null;
}

export interface WorkspaceServer {
  url: string;
  /** The server's HOME: the local template keeps its homes under ~/.tether-workspaces. */
  home: string;
  fake: FakeProvider;
  token: string;
  proc: ChildProcess;
  stderr(): string;
  api<T>(method: string, route: string, body?: unknown): Promise<T>;
  /** The answer's status and text, whatever the status. */
  raw(method: string, route: string, body?: unknown): Promise<{ status: number; text: string }>;
  /** `bin/tether templates push DIR --name NAME` against this server; answers its stdout. */
  push(dir: string, name: string, extra?: string[]): Promise<string>;
  templateId(name: string): Promise<string>;
  workspace(id: string): Promise<WorkspaceJson>;
  builds(id: string): Promise<BuildJson[]>;
  /** Waits until the workspace runs with its agent connected. */
  waitRunning(id: string, ms?: number): Promise<WorkspaceJson>;
  waitStatus(id: string, status: string, ms?: number): Promise<WorkspaceJson>;
  /** A chat on the workspace with a first message. */
  chat(workspaceId: string, message: string): Promise<string>;
  send(chatId: string, text: string): Promise<void>;
  /** Waits until the chat's turn is over; answers its status and messages. */
  settle(chatId: string, ms?: number): Promise<{ status: string; messages: ApiMessage[] }>;
  close(): Promise<void>;
}

/** The tool results of a chat's messages, in order. */
export function toolResults(messages: ApiMessage[]): { status: string; [k: string]: unknown }[] {
  return messages.flatMap((m) =>
    m.parts.flatMap((p) => (p.type === "tool-result" && p.result ? [p.result] : [])),
  );
}

/** Kills what the local template left: every agent whose pid file is under `home`. */
async function killLocalAgents(home: string): Promise<void> {
  const root = path.join(home, ".tether-workspaces");
  const files = await readdir(root).catch(() => [] as string[]);
  for (const f of files.filter((x) => x.endsWith(".agent.pid"))) {
    const pid = Number((await readFile(path.join(root, f), "utf8").catch(() => "")).trim());
    if (Number.isSafeInteger(pid) && pid > 0 && alive(pid)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone
      }
    }
  }
}

/** Removes the containers and volumes of the given workspaces (the docker template's names). */
export function removeDockerWorkspaces(ids: string[]): void {
  for (const id of ids) {
    spawnSync("docker", ["rm", "-f", `tether-ws-${id}`], { stdio: "ignore" });
    spawnSync("docker", ["volume", "rm", "-f", `tether-home-${id}`], { stdio: "ignore" });
  }
}

export async function startWorkspaceServer(
  o: {
    args?: string[];
    /** Environment added to the server's (its own secrets, to check they never leak). */
    env?: Record<string, string>;
  } = {},
): Promise<WorkspaceServer> {
  const home = await mkdtemp(path.join(os.tmpdir(), "tether-ws-test-"));
  const fake = await startFakeProvider();
  const args = [
    "server",
    "--listen",
    "127.0.0.1:0",
    "--data-dir",
    path.join(home, "data"),
    "--no-local-workspace",
    "--model",
    "openai-compatible:fake-model",
    "--model-base-url",
    fake.url,
    "--lifecycle-interval-ms",
    "300",
    ...(o.args ?? []),
  ];
  const proc = spawn(BIN, args, {
    cwd: home,
    detached: true,
    env: { ...process.env, HOME: home, ...o.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let err = "";
  proc.stderr.on("data", (c: Buffer) => {
    err += c.toString();
    if (process.env.TETHER_TEST_SERVER_LOG) process.stderr.write(c);
  });
  const exited = new Promise<void>((r) => proc.once("exit", () => r()));
  const close = async (): Promise<void> => {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill("SIGTERM");
      await Promise.race([exited, new Promise((r) => setTimeout(r, EXIT_TIMEOUT_MS))]);
    }
    try {
      process.kill(-proc.pid!, "SIGKILL");
    } catch {
      // gone
    }
    await killLocalAgents(home);
    await fake.close();
    await rm(home, { recursive: true, force: true });
  };
  let url: string;
  try {
    url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`the server did not start in ${START_TIMEOUT_MS} ms: ${err}`)),
        START_TIMEOUT_MS,
      );
      let out = "";
      proc.stdout.on("data", (c: Buffer) => {
        out += c.toString();
        const m = /^listening on (http:\/\/\S+)$/m.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      });
      void exited.then(() => reject(new Error(`the server exited: ${err}`)));
    });
  } catch (e) {
    await close();
    throw e;
  }

  const raw = async (method: string, route: string, body?: unknown, token?: string) => {
    const res = await fetch(new URL(route, url), {
      method,
      headers: {
        ...(token && { authorization: `Bearer ${token}` }),
        ...(body !== undefined && { "content-type": "application/json" }),
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    return { status: res.status, text: await res.text() };
  };
  const first = await raw("POST", "/api/v1/users/first", {
    email: "owner@example.com",
    password: "correct horse battery",
  });
  const token = (JSON.parse(first.text) as { token: string }).token;
  const api = async <T>(method: string, route: string, body?: unknown): Promise<T> => {
    const r = await raw(method, route, body, token);
    if (r.status < 200 || r.status > 299)
      throw new Error(`${method} ${route}: ${r.status} ${r.text}`);
    return (r.text ? JSON.parse(r.text) : undefined) as T;
  };
  const workspace = (id: string) => api<WorkspaceJson>("GET", `/api/v1/workspaces/${id}`);
  const s: WorkspaceServer = {
    url,
    home,
    fake,
    token,
    proc,
    stderr: () => err,
    api,
    raw: (method, route, body) => raw(method, route, body, token),
    async push(dir, name, extra = []) {
      const r = spawnSync(
        BIN,
        ["templates", "push", dir, "--name", name, "--server", url, "--token", token, ...extra],
        { encoding: "utf8", cwd: home, env: { ...process.env, HOME: home } },
      );
      if (r.status !== 0) throw new Error(`templates push failed: ${r.stderr}`);
      return r.stdout;
    },
    async templateId(name) {
      const { templates } = await api<{ templates: { id: string; name: string }[] }>(
        "GET",
        "/api/v1/templates",
      );
      const t = templates.find((x) => x.name === name);
      if (!t) throw new Error(`no template ${name}`);
      return t.id;
    },
    workspace,
    builds: async (id) =>
      (await api<{ builds: BuildJson[] }>("GET", `/api/v1/workspaces/${id}/builds`)).builds,
    waitRunning: (id, ms = 60_000) =>
      waitFor(
        `workspace ${id} running with its agent connected`,
        async () => {
          const w = await workspace(id);
          if (w.status === "failed")
            throw new Error(`workspace ${id} failed: ${JSON.stringify(w.latest_build)}`);
          return w.status === "running" && w.agent.connected && w;
        },
        ms,
      ),
    waitStatus: (id, status, ms = 60_000) =>
      waitFor(
        `workspace ${id} ${status}`,
        async () => {
          const w = await workspace(id);
          return w.status === status && w;
        },
        ms,
      ),
    async chat(workspaceId, message) {
      const c = await api<{ id: string }>("POST", "/api/v1/chats", {
        workspace_id: workspaceId,
        message,
      });
      return c.id;
    },
    async send(chatId, text) {
      await api("POST", `/api/v1/chats/${chatId}/messages`, { text });
    },
    async settle(chatId, ms = 60_000) {
      const status = await waitFor(
        `chat ${chatId} to settle`,
        async () => {
          const c = await api<{ status: string }>("GET", `/api/v1/chats/${chatId}`);
          return (c.status === "waiting" || c.status === "error") && c.status;
        },
        ms,
      );
      const { messages } = await api<{ messages: ApiMessage[] }>(
        "GET",
        `/api/v1/chats/${chatId}/messages`,
      );
      return { status, messages };
    },
    close,
  };
  return s;
}

/**
 * Makes the fake model act like the demo one: a user message `$ CMD` runs CMD (`$& CMD` in
 * the background; `stall:N` answers in N slow words, 1 s each); after a tool result it answers
 * with a short text.
 */
export function commandModel(fake: FakeProvider): void {
  fake.respond((req) => {
    const last = req.messages.at(-1);
    if (last?.role === "tool") return { text: "done." };
    const text = typeof last?.content === "string" ? last.content : JSON.stringify(last?.content);
    const stall = /^stall:(\d+)/.exec(text);
    if (stall)
      return {
        text: Array.from({ length: Number(stall[1]) }, () => "slow").join(" "),
        delayMs: 1_000,
      };
    const m = /^\$(&?) ([\s\S]+)$/.exec(text);
    if (!m) return { text: "ok." };
    return {
      toolCalls: [
        {
          name: "execute",
          args: { command: m[2], timeout: "60s", ...(m[1] && { run_in_background: true }) },
        },
      ],
    };
  });
}
