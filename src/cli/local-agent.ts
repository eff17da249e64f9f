// The server's local workspace agent: its own process in its own process group, so a crash
// of the server (even of its whole process group) leaves the agent and its commands running.
// A restarted server re-adopts an agent that still answers, starts one only when none does,
// restarts it if it dies, and stops it on a graceful stop. The agent gets an allowlisted
// environment (childEnv: no key or database URL of the server reaches it or its commands) and
// its token in TETHER_AGENT_TOKEN, never on its command line; the file that lets a restarted
// server re-adopt it keeps the token sealed.

import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, openSync } from "node:fs";
import { mkdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { SecretBox } from "../chatd/secrets/index.ts";
import { AgentClient } from "../contract/index.ts";
import { childEnv } from "../workspaces/child-env.ts";

const BIN = fileURLToPath(new URL("../../bin/tether", import.meta.url));
/** How long a started agent has to print its listening line. */
export const AGENT_START_TIMEOUT_MS = 20_000;
/**
 * How long a freshly started agent is given before chats use it. An agent refuses a tool call
 * committed less than its 2 s age margin before it started (it cannot prove it never saw it),
 * so a call made in the agent's first seconds would come back "unknown"; waiting past the
 * margin keeps a new server's first command from that.
 */
export const AGENT_WARMUP_MS = 2_500;
/** How often the server checks that its agent still answers. */
export const AGENT_CHECK_INTERVAL_MS = 2_000;

/** The slot of the local agent's token in local-agent.json (secretSlot). */
const AGENT_FILE_TOKEN_SLOT = "local-agent.json/token";

interface AgentFile {
  url: string;
  /** Sealed (SecretBox). */
  token: string;
  pid: number;
  dir: string;
}

export interface LocalAgent {
  url: string;
  token: string;
  pid: number;
  /** True when an agent from an earlier server process was re-adopted. */
  adopted: boolean;
}

async function answers(url: string, token: string): Promise<boolean> {
  const client = new AgentClient({ baseUrl: url, token });
  try {
    const info = await client.info({ timeoutMs: 1_000 });
    return info.tool_calls;
  } catch {
    return false;
  } finally {
    client.close();
  }
}

export interface LocalAgentOptions {
  /** The server's data dir: local-agent.json and local-agent.log live there. */
  dataDir: string;
  /** The workspace directory the agent serves (absolute). */
  workspaceDir: string;
  /** Seals the token in local-agent.json. */
  secrets: SecretBox;
  /** The umask of the agent and its commands; unset, the server's own. */
  umask?: number;
  /** Told the agent's address whenever it changes (start, restart). */
  onChange: (agent: LocalAgent) => Promise<void>;
}

export class LocalAgentSupervisor {
  readonly #o: LocalAgentOptions;
  readonly #file: string;
  readonly #log: string;
  #current: LocalAgent | undefined;
  #launching: Promise<LocalAgent> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(o: LocalAgentOptions) {
    this.#o = o;
    this.#file = path.join(o.dataDir, "local-agent.json");
    this.#log = path.join(o.dataDir, "local-agent.log");
  }

  /**
   * Re-adopts the agent an earlier server left, or starts one, without telling onChange: what
   * a server runs while its database opens, so the agent's start and warm-up overlap it. Once
   * only; start() continues from it.
   */
  launch(): Promise<LocalAgent> {
    this.#launching ??= (async () => {
      await mkdir(this.#o.dataDir, { recursive: true, mode: 0o700 });
      const agent = (await this.#adopt()) ?? (await this.#spawn());
      this.#current = agent;
      return agent;
    })();
    return this.#launching;
  }

  /** launch(), then tells onChange and keeps the agent alive. */
  async start(): Promise<LocalAgent> {
    const agent = await this.launch();
    if (this.#stopped) throw new Error("The local workspace agent was stopped while starting.");
    await this.#o.onChange(agent);
    this.#timer = setInterval(() => void this.#check(), AGENT_CHECK_INTERVAL_MS);
    this.#timer.unref();
    return agent;
  }

  /**
   * Graceful stop: the agent (and with it every process it started) stops too; one still being
   * launched is stopped once it answers.
   */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    await this.#launching?.catch(() => undefined);
    const a = this.#current;
    if (!a) return;
    try {
      process.kill(a.pid, "SIGTERM");
    } catch {
      // already gone
    }
    await rm(this.#file, { force: true });
  }

  async #adopt(): Promise<LocalAgent | undefined> {
    let saved: AgentFile;
    let token: string;
    try {
      saved = JSON.parse(await readFile(this.#file, "utf8")) as AgentFile;
      token = this.#o.secrets.open(saved.token, AGENT_FILE_TOKEN_SLOT);
    } catch {
      return undefined; // no file, or one this key does not open: start a new agent
    }
    if (saved.dir !== this.#o.workspaceDir || !(await answers(saved.url, token))) return undefined;
    return { url: saved.url, token, pid: saved.pid, adopted: true };
  }

  async #spawn(): Promise<LocalAgent> {
    const token = randomBytes(24).toString("base64url");
    const logStart = (await stat(this.#log).catch(() => undefined))?.size ?? 0;
    const log = openSync(this.#log, "a", 0o600);
    const args = [BIN, "agent", "--listen", "127.0.0.1:0", "--dir", this.#o.workspaceDir];
    // Node cannot set a child's umask: a shell sets it and execs the agent (same PID).
    const [command, argv] =
      this.#o.umask === undefined
        ? [process.execPath, args]
        : [
            "/bin/sh",
            [
              "-c",
              `umask ${this.#o.umask.toString(8)} && exec "$0" "$@"`,
              process.execPath,
              ...args,
            ],
          ];
    const child = spawn(command, argv, {
      detached: true, // its own process group: a crash of the server's group leaves it running
      stdio: ["ignore", log, log],
      env: childEnv({ TETHER_AGENT_TOKEN: token }),
    });
    closeSync(log);
    child.unref();
    const pid = child.pid;
    if (pid === undefined) throw new Error("Could not start the local workspace agent.");
    const url = await this.#waitForListening(pid, logStart);
    await new Promise((r) => setTimeout(r, AGENT_WARMUP_MS));
    const saved: AgentFile = {
      url,
      token: this.#o.secrets.seal(token, AGENT_FILE_TOKEN_SLOT),
      pid,
      dir: this.#o.workspaceDir,
    };
    await writeFile(this.#file, JSON.stringify(saved), { mode: 0o600 });
    return { url, token, pid, adopted: false };
  }

  /** Reads the agent's log from `logStart` until its `listening on` line appears. */
  async #waitForListening(pid: number, logStart: number): Promise<string> {
    const end = Date.now() + AGENT_START_TIMEOUT_MS;
    while (Date.now() < end) {
      const text = (await readFile(this.#log).catch(() => Buffer.alloc(0)))
        .subarray(logStart)
        .toString("utf8");
      const m = /listening on (http:\/\/\S+)/.exec(text);
      if (m) return m[1]!;
      try {
        process.kill(pid, 0);
      } catch {
        throw new Error(`The local workspace agent exited at start; see ${this.#log}.`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(
      `The local workspace agent did not start within ${AGENT_START_TIMEOUT_MS} ms; see ${this.#log}.`,
    );
  }

  async #check(): Promise<void> {
    const a = this.#current;
    if (this.#stopped || !a || (await answers(a.url, a.token))) return;
    if (this.#stopped) return;
    try {
      const next = await this.#spawn();
      this.#current = next;
      await this.#o.onChange(next);
    } catch {
      // tried again at the next check
    }
  }
}
