// One Terraform run of a build: the template version's files and the workspace's last state
// are written into a private temporary directory (0700, removed afterwards), then `terraform
// init` and `apply` (start, stop) or `destroy` (delete) run there with `-input=false`, in an
// environment made by childEnv — the server's own secrets never reach a template's
// provisioners; only the Tether variables (TF_VAR_tether_*) and Terraform's own settings do.
// Output goes to `onOutput` with every secret scrubbed. The state Terraform leaves is answered
// on success and on failure alike, so nothing it created is forgotten.

import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { childEnv } from "./child-env.ts";
import type { BuildTransition } from "./builds.ts";
import { Scrubber } from "./scrub.ts";
import type { TemplateFiles } from "./templates.ts";

/** After SIGINT (Terraform stops gracefully and writes its state), SIGKILL after this long. */
export const TERRAFORM_INTERRUPT_GRACE_MS = 15_000;
/** After Terraform exits, its output is read for at most this long more. */
const OUTPUT_DRAIN_MS = 2_000;
const STATE_FILE = "terraform.tfstate";

/** The input variables every template may declare (API.md), set as TF_VAR_<name>. */
export interface TemplateVariables {
  tether_workspace_id: string;
  tether_workspace_name: string;
  /** The owner's email ("" for an ownerless workspace). */
  tether_owner: string;
  /** 1 for a start, 0 for a stop or delete: compute takes `count = var.tether_start_count`. */
  tether_start_count: 0 | 1;
  /** The access URL the workspace's agent dials. */
  tether_server_url: string;
  /** The agent token of this start ("" for a stop or delete: the old one is revoked). */
  tether_agent_token: string;
  /** This server's `bin/tether`, absolute. */
  tether_bin: string;
}

export interface TerraformRunOptions {
  transition: BuildTransition;
  files: TemplateFiles;
  /** The state the last build saved. */
  state?: string;
  variables: TemplateVariables;
  /** Texts scrubbed from the output (the agent token is added by itself). */
  secrets?: string[];
  /** The terraform executable (default `terraform`, found on PATH). */
  terraformBin?: string;
  /** The plugin cache shared by every build on this machine (TF_PLUGIN_CACHE_DIR). */
  pluginCacheDir: string;
  /** Receives the scrubbed output as it comes. */
  onOutput(text: string): void;
  /** Aborting it interrupts Terraform (SIGINT, then SIGKILL after the grace). */
  signal: AbortSignal;
  interruptGraceMs?: number;
}

export type TerraformResult =
  { status: "succeeded"; state?: string } | { status: "failed"; error: string; state?: string };

/** The arguments of each step of a transition. */
export function terraformSteps(transition: BuildTransition): string[][] {
  const apply =
    transition === "delete"
      ? ["destroy", "-auto-approve", "-input=false", "-no-color"]
      : ["apply", "-auto-approve", "-input=false", "-no-color"];
  return [["init", "-input=false", "-no-color"], apply];
}

/** The environment of a Terraform process: the allowlist, Terraform's settings, the variables. */
export function terraformEnv(
  variables: TemplateVariables,
  pluginCacheDir: string,
  from: NodeJS.ProcessEnv = process.env,
): NodeJS.ProcessEnv {
  const vars: Record<string, string> = {};
  for (const [name, value] of Object.entries(variables)) vars[`TF_VAR_${name}`] = String(value);
  return childEnv(
    {
      TF_IN_AUTOMATION: "1",
      TF_INPUT: "0",
      CHECKPOINT_DISABLE: "1",
      TF_PLUGIN_CACHE_DIR: pluginCacheDir,
      // A provider mirror or other CLI settings the operator set up (a path, not a secret).
      TF_CLI_CONFIG_FILE:
        from.TF_CLI_CONFIG_FILE && existsSync(from.TF_CLI_CONFIG_FILE)
          ? from.TF_CLI_CONFIG_FILE
          : undefined,
      ...vars,
    },
    from,
  );
}

async function writeTemplate(dir: string, files: TemplateFiles, state?: string): Promise<void> {
  for (const [rel, text] of Object.entries(files)) {
    const file = path.join(dir, rel);
    // TemplateFiles refuses `..` and absolute paths; this is the belt to those braces.
    if (!file.startsWith(dir + path.sep))
      throw new Error(`Template path ${rel} leaves its folder.`);
    await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
    await writeFile(file, text, { mode: 0o600 });
  }
  if (state !== undefined) await writeFile(path.join(dir, STATE_FILE), state, { mode: 0o600 });
}

type StepResult = { status: "ok" } | { status: "failed"; error: string };

function runStep(
  bin: string,
  args: string[],
  dir: string,
  env: NodeJS.ProcessEnv,
  out: (text: string) => void,
  signal: AbortSignal,
  graceMs: number,
): Promise<StepResult> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve({ status: "failed", error: stoppedMessage(signal) });
      return;
    }
    out(`$ terraform ${args.join(" ")}\n`);
    const child = spawn(bin, args, { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] });
    child.stdout.setEncoding("utf8").on("data", out);
    child.stderr.setEncoding("utf8").on("data", out);
    let kill: NodeJS.Timeout | undefined;
    const onAbort = () => {
      child.kill("SIGINT");
      kill = setTimeout(() => child.kill("SIGKILL"), graceMs);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    let spawnError: NodeJS.ErrnoException | undefined;
    // Ends at exit, once its output is read — or soon after, should a process the template left
    // behind still hold the pipes open.
    child.once("exit", (code, sig) => {
      const drained = new Promise<void>((r) => {
        if (child.stdout.readableEnded && child.stderr.readableEnded) r();
        else child.once("close", () => r());
      });
      const late = new Promise<void>((r) => setTimeout(r, OUTPUT_DRAIN_MS).unref());
      void Promise.race([drained, late]).then(() => done(code, sig));
    });
    child.once("error", (err: NodeJS.ErrnoException) => {
      spawnError = err;
      if (child.pid === undefined) done(null, null);
    });
    const done = (code: number | null, sig: NodeJS.Signals | null) => {
      signal.removeEventListener("abort", onAbort);
      clearTimeout(kill);
      if (spawnError) {
        resolve({
          status: "failed",
          error:
            spawnError.code === "ENOENT"
              ? `Terraform was not found (${bin}): install it on every server replica, on the PATH.`
              : `Terraform could not be started: ${spawnError.message}`,
        });
      } else if (signal.aborted) {
        resolve({ status: "failed", error: stoppedMessage(signal) });
      } else if (code === 0) {
        resolve({ status: "ok" });
      } else {
        resolve({
          status: "failed",
          error: `terraform ${args[0]} ${code === null ? `was killed by ${sig}` : `exited with code ${code}`}; the build log has its output.`,
        });
      }
    };
  });
}

function stoppedMessage(signal: AbortSignal): string {
  const reason: unknown = signal.reason;
  return `The build was stopped before it finished: ${reason instanceof Error ? reason.message : String(reason)}`;
}

export async function runTerraform(o: TerraformRunOptions): Promise<TerraformResult> {
  const scrub = new Scrubber([o.variables.tether_agent_token, ...(o.secrets ?? [])]);
  const out = (text: string) => {
    const safe = scrub.push(text);
    if (safe !== "") o.onOutput(safe);
  };
  await mkdir(o.pluginCacheDir, { recursive: true });
  const dir = await mkdtemp(path.join(os.tmpdir(), "tether-build-"));
  try {
    await writeTemplate(dir, o.files, o.state);
    const env = terraformEnv(o.variables, o.pluginCacheDir);
    let result: StepResult = { status: "ok" };
    for (const args of terraformSteps(o.transition)) {
      result = await runStep(
        o.terraformBin ?? "terraform",
        args,
        dir,
        env,
        out,
        o.signal,
        o.interruptGraceMs ?? TERRAFORM_INTERRUPT_GRACE_MS,
      );
      if (result.status === "failed") break;
    }
    const rest = scrub.flush();
    if (rest !== "") o.onOutput(rest);
    const state = await readFile(path.join(dir, STATE_FILE), "utf8").catch(() => undefined);
    const changed = state !== undefined && state !== o.state ? { state } : {};
    return result.status === "ok"
      ? { status: "succeeded", ...changed }
      : { status: "failed", error: result.error, ...changed };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
