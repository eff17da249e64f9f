// `tether chat "message"`: sends a message (to a new chat unless --chat), streams the answer
// and tool activity to the terminal, and interrupts the chat on Ctrl-C (a second Ctrl-C
// exits). Without a token it uses the one it saved earlier, or, on a server with no users
// yet, creates the first (admin) user and saves its token in the user's config dir (config.ts).

import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import ora, { type Ora } from "ora";
import { cliTokenPath, saveFirstUser } from "./config.ts";

export interface ChatCommandOptions {
  server: string;
  token?: string;
  chat?: string;
  /** A new chat's workspace, by name or ID (default: the server's default workspace). */
  workspace?: string;
  /** Where a bootstrapped token is kept (default cliTokenPath()). */
  tokenFile?: string;
}

interface ApiMessage {
  id: string;
  role: string;
  parts: { type: string; text?: string; tool_name?: string; args?: unknown; result?: unknown }[];
}

class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export async function api<T>(
  server: string,
  token: string | undefined,
  method: string,
  route: string,
  body?: unknown,
): Promise<T> {
  const res = await fetch(new URL(route, server), {
    method,
    headers: {
      ...(token && { authorization: `Bearer ${token}` }),
      ...(body !== undefined && { "content-type": "application/json" }),
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!res.ok) {
    let message = text;
    try {
      message = (JSON.parse(text) as { message?: string }).message ?? text;
    } catch {
      // keep the raw text
    }
    throw new ApiError(res.status, `${method} ${route}: ${res.status} ${message}`);
  }
  return (text ? JSON.parse(text) : undefined) as T;
}

export async function resolveToken(o: ChatCommandOptions): Promise<string> {
  const explicit = o.token ?? process.env.TETHER_TOKEN;
  if (explicit) return explicit;
  const file = o.tokenFile ?? cliTokenPath();
  const saved = await readFile(file, "utf8").catch(() => "");
  if (saved.trim()) return saved.trim();
  try {
    const password = randomBytes(18).toString("base64url");
    const first = await api<{ token: string }>(o.server, undefined, "POST", "/api/v1/users/first", {
      email: "admin@localhost",
      password,
      name: "Admin",
    });
    process.stderr.write(await saveFirstUser(o.server, file, first.token, password));
    return first.token;
  } catch (err) {
    if (err instanceof ApiError && err.status === 409) {
      throw new Error("This server has users: pass --token TOKEN or set TETHER_TOKEN.");
    }
    throw err;
  }
}

/** One line for a tool call as the model made it. */
function describeCall(name: string, args: unknown): string {
  const a = (args ?? {}) as Record<string, unknown>;
  if (name === "execute") return `$ ${String(a.command)}${a.run_in_background ? " &" : ""}`;
  if (typeof a.path === "string") return `${name} ${a.path}`;
  return name;
}

/** How a committed tool call ended: its status (or exit code) and note, then any output. */
function describeResult(result: unknown): string {
  const r = (result ?? {}) as Record<string, unknown>;
  const status = typeof r.status === "string" ? r.status : "?";
  const note =
    typeof r.note === "string"
      ? ` — ${r.note}`
      : typeof r.message === "string"
        ? ` — ${r.message}`
        : "";
  const head =
    status === "completed" && typeof r.exit_code === "number"
      ? `exit ${r.exit_code}`
      : `${status}${note}`;
  // Partial output too: a canceled or timed-out command shows what it printed.
  const out = typeof r.output === "string" ? r.output.trimEnd() : "";
  return out ? `${head}\n${out}` : head;
}

/** The ID of the workspace named or numbered `nameOrId` the caller may see. */
export async function findWorkspaceId(
  server: string,
  token: string,
  nameOrId: string,
): Promise<string> {
  const { workspaces } = await api<{ workspaces: { id: string; name: string }[] }>(
    server,
    token,
    "GET",
    "/api/v1/workspaces",
  );
  const matches = workspaces.filter((w) => w.id === nameOrId || w.name === nameOrId);
  if (matches.length === 1) return matches[0]!.id;
  throw new Error(
    matches.length === 0
      ? `No workspace is named ${nameOrId}; see bin/tether workspaces list.`
      : `${matches.length} workspaces are named ${nameOrId}; give its ID.`,
  );
}

export async function runChat(text: string, o: ChatCommandOptions): Promise<void> {
  const token = await resolveToken(o);
  // The stream starts after our own message (or, when it is queued, after what the chat held
  // when we sent it), so it shows the whole answer even if part of it is already committed.
  let chatId = o.chat;
  let afterId: string | undefined;
  if (chatId) {
    const before = await api<{ messages: ApiMessage[] }>(
      o.server,
      token,
      "GET",
      `/api/v1/chats/${chatId}/messages`,
    );
    const sent = await api<{ message_id?: string; queued: boolean }>(
      o.server,
      token,
      "POST",
      `/api/v1/chats/${chatId}/messages`,
      { text },
    );
    afterId = sent.message_id ?? before.messages.at(-1)?.id;
    if (sent.queued) process.stderr.write("The chat is busy; your message is queued.\n");
  } else {
    const workspaceId = o.workspace && (await findWorkspaceId(o.server, token, o.workspace));
    const chat = await api<{ id: string }>(o.server, token, "POST", "/api/v1/chats", {
      message: text,
      ...(workspaceId && { workspace_id: workspaceId }),
    });
    chatId = chat.id;
    const msgs = await api<{ messages: ApiMessage[] }>(
      o.server,
      token,
      "GET",
      `/api/v1/chats/${chatId}/messages`,
    );
    afterId = msgs.messages[0]?.id;
  }
  process.stderr.write(`chat ${chatId}\n`);

  const ac = new AbortController();
  // The second Ctrl-C exits, but not before the first one's interrupt has reached the server.
  let interrupting: Promise<unknown> | undefined;
  process.on("SIGINT", () => {
    if (interrupting) {
      const exit = () => process.exit(130);
      void interrupting.finally(exit);
      setTimeout(exit, 2_000).unref();
      return;
    }
    process.stderr.write("\nInterrupting… (Ctrl-C again to exit)\n");
    interrupting = api(o.server, token, "POST", `/api/v1/chats/${chatId}/interrupt`).catch(
      (err: unknown) => process.stderr.write(`The interrupt failed: ${String(err)}\n`),
    );
  });

  const spinner: Ora = ora({
    text: "working",
    stream: process.stderr,
    isEnabled: process.stderr.isTTY,
  });
  spinner.start();
  let streamingText = false;
  const print = (s: string) => {
    spinner.stop();
    process.stdout.write(s);
  };
  const res = await fetch(
    new URL(`/api/v1/chats/${chatId}/stream${afterId ? `?after_id=${afterId}` : ""}`, o.server),
    {
      headers: { authorization: `Bearer ${token}` },
      signal: ac.signal,
    },
  );
  if (!res.ok || !res.body) throw new Error(`stream: ${res.status}`);
  const decoder = new TextDecoder();
  let buf = "";
  let done = false;
  for await (const chunk of res.body) {
    buf += decoder.decode(chunk as Uint8Array, { stream: true });
    let idx: number;
    while ((idx = buf.indexOf("\n\n")) >= 0) {
      const raw = buf.slice(0, idx);
      buf = buf.slice(idx + 2);
      const event = /^event: (.*)$/m.exec(raw)?.[1];
      const data = /^data: (.*)$/m.exec(raw)?.[1];
      if (!event || data === undefined) continue;
      const payload = JSON.parse(data) as Record<string, unknown>;
      if (event === "part") {
        const part = payload.part as { type: string; text?: string };
        if (part.type === "text-delta" && part.text) {
          print(part.text);
          streamingText = true;
        }
      } else if (event === "message") {
        const m = payload as unknown as ApiMessage;
        if (m.role === "assistant") {
          if (streamingText) print("\n");
          else {
            const t = m.parts
              .filter((p) => p.type === "text")
              .map((p) => p.text)
              .join("");
            if (t) print(t + "\n");
          }
          streamingText = false;
          for (const p of m.parts)
            if (p.type === "tool-call") print(`▶ ${describeCall(p.tool_name ?? "?", p.args)}\n`);
        } else if (m.role === "tool") {
          for (const p of m.parts)
            if (p.type === "tool-result")
              print(`  ${describeResult(p.result).replace(/\n/g, "\n  ")}\n`);
        }
        spinner.start();
      } else if (event === "status") {
        const status = payload.status as string;
        if (status === "waiting" || status === "error") done = true;
      } else if (event === "workspace") {
        // A template workspace's state: the turn waits while it starts.
        const w = payload as { status: string; agent: { connected: boolean } };
        spinner.text =
          w.status === "running" && !w.agent.connected
            ? "workspace running, agent connecting"
            : `workspace ${w.status}`;
        if (w.status === "running" && w.agent.connected) spinner.text = "working";
      } else if (event === "error") {
        print(`error: ${String(payload.message)}\n`);
      }
    }
    if (done) break;
  }
  spinner.stop();
  ac.abort();
  const chat = await api<{ status: string; last_error?: { message: string } }>(
    o.server,
    token,
    "GET",
    `/api/v1/chats/${chatId}`,
  );
  if (chat.status === "error") {
    process.stderr.write(`The chat ended in an error: ${chat.last_error?.message ?? "unknown"}\n`);
    process.exitCode = 1;
  }
}
