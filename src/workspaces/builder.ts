// The builder: one per replica. It claims pending builds (any replica may run any build),
// renews their leases with the worker's heartbeat, ends builds whose replica died, and runs
// each claimed build: token, Terraform, log, state, and the workspace's new status — all of a
// build's writes fenced on its lease, except the state, which is saved whenever the build is
// still the workspace's latest, so what Terraform created is never forgotten.

import type { Logger } from "pino";
import { realClock, type Clock, type Timer } from "../contract/index.ts";
import type { Database, Queryable } from "../chatd/db/index.ts";
import type { SecretBox } from "../chatd/secrets/index.ts";
import { agentTokensIn, mintAgentToken, revokeAgentTokens } from "./agent-tokens.ts";
import {
  appendBuildLog,
  claimBuilds,
  expireBuilds,
  finishBuild,
  renewBuilds,
  WORKSPACE_CHANNEL,
  type Build,
  type WorkspaceChange,
} from "./builds.ts";
import { closeRun, openRun } from "./runs.ts";
import { loadState, saveState } from "./state.ts";
import { templateFiles } from "./templates.ts";
import { runTerraform, type TemplateVariables, type TerraformResult } from "./terraform.ts";

/**
 * Pending builds and expired leases are looked for this often; a queued build is claimed at
 * once through its notification, so this only bounds a lost one (and an idle server's load).
 */
export const BUILD_POLL_MS = 5_000;
/** Builds one replica runs at once. */
export const MAX_CONCURRENT_BUILDS = 4;
/** Log output is written to the database at least this often while a build runs. */
export const BUILD_LOG_FLUSH_MS = 250;
/** A build's log keeps at most this many bytes; the rest is dropped with a note. */
export const MAX_BUILD_LOG_BYTES = 2 * 1024 * 1024;

export interface BuilderOptions {
  db: Database;
  /** Seals the Terraform state at rest (state.ts). */
  secrets: SecretBox;
  /** This replica's worker ID: the holder of the builds it claims. */
  workerId: string;
  /** The address agents dial, passed as tether_server_url. */
  accessUrl: string;
  /** This server's bin/tether, absolute, passed as tether_bin. */
  tetherBin: string;
  /** Shared by every build of this machine. */
  pluginCacheDir: string;
  terraformBin?: string;
  leaseMs: number;
  heartbeatMs: number;
  pollMs?: number;
  maxConcurrent?: number;
  clock?: Clock;
  log: Logger;
  /** Grace between SIGINT and SIGKILL when a build is stopped. */
  interruptGraceMs?: number;
}

interface Running {
  build: Build;
  ac: AbortController;
  done: Promise<void>;
}

export class Builder {
  readonly #o: BuilderOptions;
  readonly #clock: Clock;
  readonly #running = new Map<string, Running>();
  #timers: Timer[] = [];
  #unlisten: (() => Promise<void>) | undefined;
  #round: Promise<void> | undefined;
  #again = false;
  #stopped = false;

  constructor(o: BuilderOptions) {
    this.#o = o;
    this.#clock = o.clock ?? realClock;
  }

  /** Builds this replica runs now. */
  get runningBuilds(): string[] {
    return [...this.#running.keys()];
  }

  /**
   * Starts claiming. `takeOverAll`: the only replica of an embedded database ends every
   * running build of its previous process at once instead of waiting for their leases.
   */
  async start(o: { takeOverAll?: boolean } = {}): Promise<void> {
    if (o.takeOverAll) await this.#expire(true);
    this.#unlisten = await this.#o.db.listen(WORKSPACE_CHANNEL, (payload) => {
      try {
        if ((JSON.parse(payload) as WorkspaceChange).build_status === "pending") this.kick();
      } catch {
        // not ours
      }
    });
    this.kick();
    this.#every(this.#o.pollMs ?? BUILD_POLL_MS, () => this.kick());
    this.#every(this.#o.heartbeatMs, () => void this.#heartbeat());
  }

  /** Stops claiming and interrupts the builds it runs; each ends failed, its state saved. */
  async stop(): Promise<void> {
    this.#stopped = true;
    for (const t of this.#timers) t.cancel();
    this.#timers = [];
    await this.#unlisten?.();
    await this.#round;
    const running = [...this.#running.values()];
    for (const r of running) r.ac.abort(new Error("the server replica is stopping"));
    await Promise.all(running.map((r) => r.done));
  }

  /** Runs a claim round now, or once more after the one in progress. */
  kick(): void {
    if (this.#stopped) return;
    if (this.#round) {
      this.#again = true;
      return;
    }
    this.#round = this.#claimRound().finally(() => (this.#round = undefined));
  }

  #every(ms: number, fn: () => void): void {
    const schedule = () => {
      const t = this.#clock.setTimer(ms, () => {
        this.#timers = this.#timers.filter((x) => x !== t);
        if (this.#stopped) return;
        fn();
        schedule();
      });
      this.#timers.push(t);
    };
    schedule();
  }

  async #expire(all: boolean): Promise<void> {
    const expired = await expireBuilds(this.#o.db, this.#o.leaseMs, { all });
    for (const b of expired)
      this.#o.log.warn({ build_id: b.id, workspace_id: b.workspaceId }, "build lease expired");
  }

  async #claimRound(): Promise<void> {
    do {
      this.#again = false;
      try {
        await this.#expire(false);
        const free = (this.#o.maxConcurrent ?? MAX_CONCURRENT_BUILDS) - this.#running.size;
        const claimed = await this.#o.db.transaction((tx) =>
          claimBuilds(tx, this.#o.workerId, free),
        );
        for (const b of claimed) this.#run(b);
      } catch (err) {
        this.#o.log.warn({ err }, "build claim failed");
      }
    } while (this.#again && !this.#stopped);
  }

  async #heartbeat(): Promise<void> {
    const live = [...this.#running.values()];
    try {
      const held = await renewBuilds(
        this.#o.db,
        this.#o.workerId,
        live.map((r) => r.build.id),
      );
      for (const r of live) {
        if (!held.has(r.build.id)) r.ac.abort(new Error("this replica lost the build's lease"));
      }
    } catch (err) {
      this.#o.log.warn({ err }, "build heartbeat failed");
    }
  }

  #run(build: Build): void {
    const ac = new AbortController();
    const done = this.#execute(build, ac.signal)
      .catch((err: unknown) =>
        this.#o.log.error({ err, build_id: build.id }, "build failed unexpectedly"),
      )
      .finally(() => {
        this.#running.delete(build.id);
        this.kick();
      });
    this.#running.set(build.id, { build, ac, done });
  }

  async #execute(build: Build, signal: AbortSignal): Promise<void> {
    const { db, log } = this.#o;
    const blog = log.child({ build_id: build.id, workspace_id: build.workspaceId });
    blog.info({ transition: build.transition, reason: build.reason }, "build started");
    const logWriter = new BuildLogWriter(db, build.id, this.#clock);
    let result: TerraformResult;
    try {
      const prepared = await this.#prepare(build);
      if (prepared.status === "failed") {
        result = prepared;
        logWriter.write(`${prepared.error}\n`);
      } else {
        result = await runTerraform({
          transition: build.transition,
          files: prepared.files,
          ...(prepared.state !== undefined && { state: prepared.state }),
          variables: prepared.variables,
          secrets: prepared.secrets,
          pluginCacheDir: this.#o.pluginCacheDir,
          ...(this.#o.terraformBin !== undefined && { terraformBin: this.#o.terraformBin }),
          ...(this.#o.interruptGraceMs !== undefined && {
            interruptGraceMs: this.#o.interruptGraceMs,
          }),
          onOutput: (text) => logWriter.write(text),
          signal,
        });
      }
    } catch (err) {
      result = { status: "failed", error: `The build could not run: ${(err as Error).message}` };
      logWriter.write(`${result.error}\n`);
    }
    if (result.status === "failed") logWriter.write(`\nBuild failed: ${result.error}\n`);
    await logWriter.close();
    const finished = await db.transaction(async (tx) => {
      const w = await tx.query<{ latest_build_id: string | null }>(
        "SELECT latest_build_id FROM workspaces WHERE id = $1 FOR UPDATE",
        [build.workspaceId],
      );
      const latest = w.rows[0]?.latest_build_id === build.id;
      const ours = await finishBuild(
        tx,
        build,
        this.#o.workerId,
        result.status === "succeeded" ? result : { status: "failed", error: result.error },
      );
      if ((ours || latest) && result.state !== undefined)
        await saveState(tx, this.#o.secrets, build.workspaceId, build.id, result.state);
      if (ours && result.status === "succeeded") await this.#succeeded(tx, build);
      return ours;
    });
    blog.info({ status: result.status, recorded: finished }, "build finished");
  }

  /** What a build needs: its files, the last state and the variables (a token for a start). */
  async #prepare(build: Build): Promise<
    | {
        status: "ok";
        files: Record<string, string>;
        state?: string;
        /** Scrubbed from the log besides this build's token. */
        secrets: string[];
        variables: TemplateVariables;
      }
    | { status: "failed"; error: string }
  > {
    const { db } = this.#o;
    const r = await db.query<{
      name: string;
      template_id: string | null;
      email: string | null;
    }>(
      `SELECT w.name, w.template_id, u.email FROM workspaces w LEFT JOIN users u ON u.id = w.owner_id
       WHERE w.id = $1`,
      [build.workspaceId],
    );
    const w = r.rows[0];
    if (!w?.template_id) return { status: "failed", error: "The workspace has no template." };
    const files = await templateFiles(db, w.template_id, build.templateVersion);
    if (!files)
      return {
        status: "failed",
        error: `Version ${build.templateVersion} of the workspace's template is gone.`,
      };
    const state = await loadState(db, this.#o.secrets, build.workspaceId);
    // A start mints the token of its agent (older ones end); a stop or delete ends them all.
    const token = await db.transaction(async (tx) => {
      await revokeAgentTokens(tx, build.workspaceId);
      return build.transition === "start" ? mintAgentToken(tx, build.workspaceId) : "";
    });
    // Tokens of earlier starts a template kept in its resources: a plan prints them (Terraform
    // marks only what came from a sensitive variable, not what a resource made of it).
    const earlierTokens =
      state === undefined ? [] : await agentTokensIn(db, build.workspaceId, state);
    return {
      status: "ok",
      files,
      ...(state !== undefined && { state }),
      secrets: earlierTokens,
      variables: {
        tether_workspace_id: build.workspaceId,
        tether_workspace_name: w.name,
        tether_owner: w.email ?? "",
        tether_start_count: build.transition === "start" ? 1 : 0,
        tether_server_url: this.#o.accessUrl,
        tether_agent_token: token,
        tether_bin: this.#o.tetherBin,
      },
    };
  }

  /** The workspace after a build that succeeded: running, stopped, or gone. */
  async #succeeded(tx: Queryable, build: Build): Promise<void> {
    switch (build.transition) {
      case "start":
        await tx.query("UPDATE workspaces SET last_active_at = now() WHERE id = $1", [
          build.workspaceId,
        ]);
        await openRun(tx, build.workspaceId);
        return;
      case "stop":
        await closeRun(tx, build.workspaceId);
        return;
      case "delete":
        await closeRun(tx, build.workspaceId);
        await tx.query("DELETE FROM workspaces WHERE id = $1", [build.workspaceId]);
        return;
      default: {
        const never: never = build.transition;
        throw new Error(`unknown transition ${String(never)}`);
      }
    }
  }
}

/**
 * Writes a build's output to its log in batches (every BUILD_LOG_FLUSH_MS), in order, up to
 * MAX_BUILD_LOG_BYTES. A failed write is retried with the next batch; close() flushes the rest.
 */
class BuildLogWriter {
  #pending = "";
  #bytes = 0;
  #truncated = false;
  #timer: Timer | undefined;
  #flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Queryable,
    private readonly buildId: string,
    private readonly clock: Clock,
  ) {}

  write(text: string): void {
    if (this.#truncated) return;
    const n = Buffer.byteLength(text);
    if (this.#bytes + n > MAX_BUILD_LOG_BYTES) {
      this.#truncated = true;
      this.#pending += `\n[the log is cut here: it passed ${MAX_BUILD_LOG_BYTES} bytes]\n`;
    } else {
      this.#bytes += n;
      this.#pending += text;
    }
    this.#timer ??= this.clock.setTimer(BUILD_LOG_FLUSH_MS, () => {
      this.#timer = undefined;
      void this.#flush();
    });
  }

  #flush(): Promise<void> {
    this.#flushing = this.#flushing.then(async () => {
      const chunk = this.#pending;
      this.#pending = "";
      try {
        await appendBuildLog(this.db, this.buildId, chunk);
      } catch {
        this.#pending = chunk + this.#pending;
      }
    });
    return this.#flushing;
  }

  async close(): Promise<void> {
    this.#timer?.cancel();
    this.#timer = undefined;
    await this.#flush();
  }
}
