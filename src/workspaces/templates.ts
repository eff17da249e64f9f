// Templates: a named folder of Terraform files, the TTL its workspaces get by default, and the
// longest TTL a member's workspace may ask for (none: any, 0 included).
// Files are versioned: a change of files is a new version, and a version never changes after
// it is written, so a running workspace keeps the files it was started from until its next
// start applies the newest. A template a workspace uses cannot be deleted.

import { randomUUID } from "node:crypto";
import { z } from "zod";
import type { Queryable } from "../chatd/db/index.ts";

/** A template's workspaces stop after an hour without activity unless it says otherwise. */
export const DEFAULT_TEMPLATE_TTL_MS = 60 * 60_000;
/** At most this many files in a template. */
export const MAX_TEMPLATE_FILES = 200;
/** At most this many bytes over all of a template's files (UTF-8). */
export const MAX_TEMPLATE_BYTES = 512 * 1024;

/** One path segment a template may use: no `.`/`..`, no separators, nothing hidden by Terraform. */
function validPath(p: string): boolean {
  if (p.length === 0 || p.length > 500 || p.includes("\\") || p.includes("\0")) return false;
  if (p.startsWith("/")) return false;
  const segments = p.split("/");
  if (segments.some((s) => s === "" || s === "." || s === "..")) return false;
  // Terraform's own working files are the runner's to write.
  if (segments[0] === ".terraform" || /^terraform\.tfstate/.test(segments.at(-1)!)) return false;
  return true;
}

/** The folders a path lies in: `a/b/c` → `a`, `a/b`. */
function foldersOf(p: string): string[] {
  const segments = p.split("/");
  return segments.slice(1).map((_, i) => segments.slice(0, i + 1).join("/"));
}

/** A template's files: relative paths to their text, at least one `.tf` at the top. */
export const TemplateFiles = z
  .record(z.string(), z.string())
  .refine((f) => Object.keys(f).length > 0, "must hold at least one file")
  .refine((f) => Object.keys(f).length <= MAX_TEMPLATE_FILES, `at most ${MAX_TEMPLATE_FILES} files`)
  .refine(
    (f) => Object.keys(f).every(validPath),
    "paths must be relative, without '.', '..', '.terraform/' or terraform.tfstate",
  )
  .refine(
    (f) => !Object.keys(f).some((p) => foldersOf(p).some((dir) => Object.hasOwn(f, dir))),
    "a path must not be both a file and a folder (e.g. scripts and scripts/start.sh)",
  )
  .refine(
    (f) => Object.keys(f).some((p) => !p.includes("/") && p.endsWith(".tf")),
    "must hold a .tf file at the top level (e.g. main.tf)",
  )
  .refine(
    (f) =>
      Object.values(f).reduce((n, text) => n + Buffer.byteLength(text), 0) <= MAX_TEMPLATE_BYTES,
    `at most ${MAX_TEMPLATE_BYTES} bytes in all`,
  );
export type TemplateFiles = z.infer<typeof TemplateFiles>;

export interface Template {
  id: string;
  name: string;
  description: string;
  version: number;
  defaultTtlMs: number;
  /** The longest TTL a member's workspace may have (never 0, "never stop"); null: no cap. */
  maxTtlMs: number | null;
  createdAt: Date;
  updatedAt: Date;
  /** How many workspaces use it. */
  workspaceCount: number;
}

export function rowToTemplate(r: Record<string, unknown>): Template {
  return {
    id: r.id as string,
    name: r.name as string,
    description: r.description as string,
    version: r.version as number,
    defaultTtlMs: Number(r.default_ttl_ms),
    maxTtlMs: r.max_ttl_ms === null || r.max_ttl_ms === undefined ? null : Number(r.max_ttl_ms),
    createdAt: r.created_at as Date,
    updatedAt: r.updated_at as Date,
    workspaceCount: Number(r.workspace_count ?? 0),
  };
}

const SELECT_TEMPLATES = `SELECT t.*, (SELECT count(*) FROM workspaces w WHERE w.template_id = t.id) AS workspace_count
  FROM templates t`;

/** The name is taken by another template. */
export class TemplateNameTakenError extends Error {
  override readonly name = "TemplateNameTakenError";
  constructor(readonly templateName: string) {
    super(`A template named "${templateName}" already exists.`);
  }
}

/** Whether a TTL (0: never stop) keeps within a template's max_ttl_ms (null: no cap). */
export function withinMaxTtl(ttlMs: number, maxTtlMs: number | null): boolean {
  return maxTtlMs === null || (ttlMs > 0 && ttlMs <= maxTtlMs);
}

/** The template's default_ttl_ms would not keep within its max_ttl_ms. */
export class TemplateTtlError extends Error {
  override readonly name = "TemplateTtlError";
  constructor(
    readonly defaultTtlMs: number,
    readonly maxTtlMs: number,
  ) {
    super(
      `The template's default_ttl_ms (${defaultTtlMs}) must be within its max_ttl_ms (${maxTtlMs}), and not 0.`,
    );
  }
}

/** Workspaces still use the template. */
export class TemplateInUseError extends Error {
  override readonly name = "TemplateInUseError";
  constructor(readonly count: number) {
    super(`${count} workspace${count === 1 ? " uses" : "s use"} this template.`);
  }
}

async function nameTaken(q: Queryable, name: string, exceptId?: string): Promise<boolean> {
  const r = await q.query("SELECT 1 FROM templates WHERE name = $1 AND id IS DISTINCT FROM $2", [
    name,
    exceptId ?? null,
  ]);
  return r.rows.length > 0;
}

export async function createTemplate(
  q: Queryable,
  t: {
    name: string;
    description?: string;
    files: TemplateFiles;
    defaultTtlMs?: number;
    maxTtlMs?: number | null;
    createdBy: string | null;
  },
): Promise<Template> {
  const defaultTtlMs = t.defaultTtlMs ?? DEFAULT_TEMPLATE_TTL_MS;
  const maxTtlMs = t.maxTtlMs ?? null;
  if (!withinMaxTtl(defaultTtlMs, maxTtlMs)) throw new TemplateTtlError(defaultTtlMs, maxTtlMs!);
  if (await nameTaken(q, t.name)) throw new TemplateNameTakenError(t.name);
  const id = randomUUID();
  await q.query(
    `INSERT INTO templates (id, name, description, default_ttl_ms, max_ttl_ms, version, created_by)
     VALUES ($1, $2, $3, $4, $5, 1, $6)`,
    [id, t.name, t.description ?? "", defaultTtlMs, maxTtlMs, t.createdBy],
  );
  await q.query(
    "INSERT INTO template_versions (template_id, version, files, created_by) VALUES ($1, 1, $2, $3)",
    [id, t.files, t.createdBy],
  );
  return (await getTemplate(q, id))!;
}

export async function listTemplates(q: Queryable): Promise<Template[]> {
  const r = await q.query(`${SELECT_TEMPLATES} ORDER BY t.name`);
  return r.rows.map(rowToTemplate);
}

export async function getTemplate(
  q: Queryable,
  id: string,
  forUpdate = false,
): Promise<Template | undefined> {
  if (forUpdate) await q.query("SELECT 1 FROM templates WHERE id = $1 FOR UPDATE", [id]);
  const r = await q.query(`${SELECT_TEMPLATES} WHERE t.id = $1`, [id]);
  return r.rows[0] ? rowToTemplate(r.rows[0]) : undefined;
}

/** A version's files (undefined when the template or version is gone). */
export async function templateFiles(
  q: Queryable,
  templateId: string,
  version: number,
): Promise<TemplateFiles | undefined> {
  const r = await q.query<{ files: TemplateFiles }>(
    "SELECT files FROM template_versions WHERE template_id = $1 AND version = $2",
    [templateId, version],
  );
  return r.rows[0]?.files;
}

/**
 * Changes a template (call inside a transaction). New files make a new version — unless they
 * equal the newest version's, which changes nothing.
 */
export async function updateTemplate(
  q: Queryable,
  id: string,
  p: {
    name?: string;
    description?: string;
    files?: TemplateFiles;
    defaultTtlMs?: number;
    /** null removes the cap. */
    maxTtlMs?: number | null;
    updatedBy: string | null;
  },
): Promise<Template | undefined> {
  const old = await getTemplate(q, id, true);
  if (!old) return undefined;
  const defaultTtlMs = p.defaultTtlMs ?? old.defaultTtlMs;
  const maxTtlMs = p.maxTtlMs === undefined ? old.maxTtlMs : p.maxTtlMs;
  if (!withinMaxTtl(defaultTtlMs, maxTtlMs)) throw new TemplateTtlError(defaultTtlMs, maxTtlMs!);
  if (p.name !== undefined && (await nameTaken(q, p.name, id)))
    throw new TemplateNameTakenError(p.name);
  let version = old.version;
  if (p.files !== undefined) {
    const current = await templateFiles(q, id, old.version);
    if (!sameFiles(current, p.files)) {
      version += 1;
      await q.query(
        "INSERT INTO template_versions (template_id, version, files, created_by) VALUES ($1, $2, $3, $4)",
        [id, version, p.files, p.updatedBy],
      );
    }
  }
  await q.query(
    `UPDATE templates SET name = coalesce($2, name), description = coalesce($3, description),
       default_ttl_ms = $4, max_ttl_ms = $5, version = $6, updated_at = now()
     WHERE id = $1`,
    [id, p.name ?? null, p.description ?? null, defaultTtlMs, maxTtlMs, version],
  );
  return getTemplate(q, id);
}

function sameFiles(a: TemplateFiles | undefined, b: TemplateFiles): boolean {
  if (!a) return false;
  const ka = Object.keys(a).sort();
  const kb = Object.keys(b).sort();
  return ka.length === kb.length && ka.every((k, i) => k === kb[i] && a[k] === b[k]);
}

/** Deletes a template no workspace uses (call inside a transaction); false when it is gone. */
export async function deleteTemplate(q: Queryable, id: string): Promise<boolean> {
  const t = await getTemplate(q, id, true);
  if (!t) return false;
  if (t.workspaceCount > 0) throw new TemplateInUseError(t.workspaceCount);
  await q.query("DELETE FROM templates WHERE id = $1", [id]);
  return true;
}
