// `tether workspaces create NAME --template T`, `list`, `start|stop|delete NAME`: template
// workspaces from the command line, through the API. `create` queues the first start and
// answers at once (a chat's turn waits for the workspace anyway); `--wait` waits until it
// runs with its agent connected, or its build failed.

import { Command, InvalidArgumentError } from "commander";
import { api } from "./chat-client.ts";
import { findWorkspaceId, resolveToken } from "./credentials.ts";
import { visible } from "./terminal-text.ts";

/** How often `--wait` reads the workspace. */
const WAIT_POLL_MS = 500;
/** How long `--wait` waits at most. */
const WAIT_TIMEOUT_MS = 10 * 60_000;

interface Connection {
  server: string;
  token?: string;
}

interface WorkspaceJson {
  id: string;
  name: string;
  status?: string;
  template_id?: string;
  ttl_ms?: number;
  deadline?: string | null;
  agent?: { connected: boolean };
  agent_url?: string | null;
  latest_build?: { id: string; status: string; error?: string } | null;
}

async function token(o: Connection): Promise<string> {
  return resolveToken({ server: o.server, ...(o.token && { token: o.token }) });
}

/** A workspace in one line (what the server gave made visible: terminal-text.ts). */
function describe(w: WorkspaceJson): string {
  const agent = w.agent?.connected ? ", agent connected" : "";
  const stops = w.deadline ? `, stops ${w.deadline} if idle` : "";
  const state =
    w.status === undefined ? `registered at ${w.agent_url ?? "?"}` : `${w.status}${agent}${stops}`;
  return visible(`${w.name} (${w.id}): ${state}`);
}

async function waitRunning(o: Connection, t: string, id: string): Promise<WorkspaceJson> {
  const end = Date.now() + WAIT_TIMEOUT_MS;
  for (;;) {
    const w = await api<WorkspaceJson>(o.server, t, "GET", `/api/v1/workspaces/${id}`);
    if (w.status === "running" && w.agent?.connected) return w;
    if (w.status === "failed")
      throw new Error(
        visible(
          `The workspace's build ${w.latest_build?.id ?? ""} failed: ${w.latest_build?.error ?? ""}`,
        ),
      );
    if (Date.now() > end) throw new Error(`The workspace is still ${w.status}.`);
    await new Promise((r) => setTimeout(r, WAIT_POLL_MS));
  }
}

function nonNegativeInt(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0)
    throw new InvalidArgumentError("Must be a whole number of milliseconds, 0 or more.");
  return n;
}

export function workspacesCommand(): Command {
  const cmd = new Command("workspaces").description(
    "Workspaces made from templates: create, list, start, stop, delete.",
  );
  const connection = (c: Command) =>
    c
      .option("--server <url>", "server URL", "http://127.0.0.1:3000")
      .option("--token <token>", "API token (default: $TETHER_TOKEN, or the saved one)");

  connection(
    cmd
      .command("create")
      .description("Make a workspace from a template (its first start is queued).")
      .argument("<name>", "the workspace's name")
      .requiredOption("--template <name-or-id>", "the template")
      .option("--ttl-ms <n>", "idle time before it stops (0: never)", nonNegativeInt)
      .option("--wait", "wait until it runs with its agent connected"),
  ).action(
    async (name: string, o: Connection & { template: string; ttlMs?: number; wait?: boolean }) => {
      const t = await token(o);
      const { templates } = await api<{ templates: { id: string; name: string }[] }>(
        o.server,
        t,
        "GET",
        "/api/v1/templates",
      );
      const template = templates.find((x) => x.id === o.template || x.name === o.template);
      if (!template) throw new Error(`No template ${o.template}; see bin/tether templates list.`);
      let w = await api<WorkspaceJson>(o.server, t, "POST", "/api/v1/workspaces", {
        name,
        template_id: template.id,
        ...(o.ttlMs !== undefined && { ttl_ms: o.ttlMs }),
      });
      if (o.wait) w = await waitRunning(o, t, w.id);
      process.stdout.write(`${describe(w)}\n`);
    },
  );

  connection(cmd.command("list").description("List the workspaces you may use.")).action(
    async (o: Connection) => {
      const t = await token(o);
      const { workspaces } = await api<{ workspaces: WorkspaceJson[] }>(
        o.server,
        t,
        "GET",
        "/api/v1/workspaces",
      );
      process.stdout.write(
        workspaces.length === 0 ? "no workspaces\n" : workspaces.map(describe).join("\n") + "\n",
      );
    },
  );

  for (const what of ["start", "stop", "delete"] as const) {
    connection(
      cmd
        .command(what)
        .description(
          what === "delete"
            ? "Delete a workspace (terraform destroy: its home goes too)."
            : `${what === "start" ? "Start" : "Stop"} a workspace.`,
        )
        .argument("<name-or-id>", "the workspace"),
    ).action(async (nameOrId: string, o: Connection) => {
      const t = await token(o);
      const id = await findWorkspaceId(o.server, t, nameOrId);
      const w = await api<WorkspaceJson>(
        o.server,
        t,
        what === "delete" ? "DELETE" : "POST",
        what === "delete" ? `/api/v1/workspaces/${id}` : `/api/v1/workspaces/${id}/${what}`,
      );
      process.stdout.write(`${describe(w)}\n`);
    });
  }
  return cmd;
}
