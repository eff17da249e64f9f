// `tether templates push DIR --name N` and `tether templates list` (admin): a template is a
// folder in git, pushed through the API — created when the name is new, else its files become
// a new version (running workspaces take it at their next start; unchanged files change
// nothing). Terraform's own working files (.terraform/, state, hidden folders) are left out.

import { readdir, readFile, stat } from "node:fs/promises";
import path from "node:path";
import { Command, InvalidArgumentError } from "commander";
import { api } from "./chat-client.ts";
import { resolveToken } from "./credentials.ts";
import { visible } from "./terminal-text.ts";

/** Files larger than this are refused (a template is text: Terraform files and scripts). */
const MAX_FILE_BYTES = 256 * 1024;

interface TemplateJson {
  id: string;
  name: string;
  description: string;
  version: number;
  default_ttl_ms: number;
  workspace_count?: number;
}

interface Connection {
  server: string;
  token?: string;
}

/** The folder's files as `{relative/path: text}`, leaving out Terraform's and hidden ones. */
export async function readTemplateDir(dir: string): Promise<Record<string, string>> {
  const files: Record<string, string> = {};
  const walk = async (rel: string): Promise<void> => {
    for (const entry of await readdir(path.join(dir, rel), { withFileTypes: true })) {
      const name = entry.name;
      const relPath = rel === "" ? name : `${rel}/${name}`;
      if (name.startsWith(".") || /^terraform\.tfstate/.test(name)) continue;
      if (entry.isDirectory()) await walk(relPath);
      else if (entry.isFile()) {
        const full = path.join(dir, relPath);
        if ((await stat(full)).size > MAX_FILE_BYTES)
          throw new Error(`${relPath} is larger than ${MAX_FILE_BYTES} bytes.`);
        files[relPath] = await readFile(full, "utf8");
      }
    }
  };
  await walk("");
  if (!Object.keys(files).some((f) => !f.includes("/") && f.endsWith(".tf")))
    throw new Error(`${dir} has no .tf file at its top level.`);
  return files;
}

export async function pushTemplate(
  dir: string,
  o: Connection & { name: string; description?: string; defaultTtlMs?: number },
): Promise<string> {
  const files = await readTemplateDir(dir);
  const token = await resolveToken({ server: o.server, ...(o.token && { token: o.token }) });
  const { templates } = await api<{ templates: TemplateJson[] }>(
    o.server,
    token,
    "GET",
    "/api/v1/templates",
  );
  const existing = templates.find((t) => t.name === o.name);
  const fields = {
    files,
    ...(o.description !== undefined && { description: o.description }),
    ...(o.defaultTtlMs !== undefined && { default_ttl_ms: o.defaultTtlMs }),
  };
  if (!existing) {
    const t = await api<TemplateJson>(o.server, token, "POST", "/api/v1/templates", {
      name: o.name,
      ...fields,
    });
    return `created template ${t.name} (${t.id}), version ${t.version}`;
  }
  const t = await api<TemplateJson>(
    o.server,
    token,
    "PATCH",
    `/api/v1/templates/${existing.id}`,
    fields,
  );
  return t.version === existing.version
    ? `template ${t.name} (${t.id}) unchanged, version ${t.version}`
    : `updated template ${t.name} (${t.id}) to version ${t.version}`;
}

export async function listTemplatesText(o: Connection): Promise<string> {
  const token = await resolveToken({ server: o.server, ...(o.token && { token: o.token }) });
  const { templates } = await api<{ templates: TemplateJson[] }>(
    o.server,
    token,
    "GET",
    "/api/v1/templates",
  );
  if (templates.length === 0) return "no templates";
  const rows = [
    ["NAME", "VERSION", "TTL", "WORKSPACES", "ID", "DESCRIPTION"],
    ...templates.map((t) => [
      t.name,
      String(t.version),
      t.default_ttl_ms === 0 ? "never" : `${Math.round(t.default_ttl_ms / 60_000)}m`,
      String(t.workspace_count ?? 0),
      t.id,
      t.description,
    ]),
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows
    .map((r) =>
      r
        .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!)))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

function nonNegativeInt(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0)
    throw new InvalidArgumentError("Must be a whole number of milliseconds, 0 or more.");
  return n;
}

export function templatesCommand(): Command {
  const cmd = new Command("templates").description(
    "Workspace templates (admin): push a folder of Terraform files, list them.",
  );
  const connection = (c: Command) =>
    c
      .option("--server <url>", "server URL", "http://127.0.0.1:3000")
      .option("--token <token>", "API token (default: $TETHER_TOKEN, or the saved one)");
  connection(
    cmd
      .command("push")
      .description("Create the template from DIR, or make DIR its new version.")
      .argument("<dir>", "the template's folder (Terraform files at its top)")
      .requiredOption("--name <name>", "the template's name")
      .option("--description <text>", "what the template makes")
      .option(
        "--default-ttl-ms <n>",
        "idle time before its workspaces stop (0: never)",
        nonNegativeInt,
      ),
  ).action(
    async (
      dir: string,
      o: Connection & { name: string; description?: string; defaultTtlMs?: number },
    ) => {
      process.stdout.write(`${await pushTemplate(dir, o)}\n`);
    },
  );
  connection(cmd.command("list").description("List the templates.")).action(
    async (o: Connection) => {
      process.stdout.write(`${visible(await listTemplatesText(o))}\n`);
    },
  );
  return cmd;
}
