// Text the database cannot store never reaches it raw (issue 11). Postgres refuses a NUL
// anywhere in text and jsonb (22021, 22P05), and jsonb refuses a lone UTF-16 surrogate (which
// JSON.stringify writes as \udXXX): one such character in a command's output once failed every
// commit of a chat, for good. Every write of a transition passes through here first, so the
// rule holds for tool output, file content, model text and error texts alike: each NUL and each
// unpaired surrogate becomes U+FFFD, and a tool result says in its `note` what was replaced.

import type { MessagePart } from "../messages.ts";

/** What replaces a character the database cannot store. */
export const REPLACEMENT_CHARACTER = "\ufffd";

/** A NUL, a high surrogate not followed by a low one, or a low one not preceded by a high one. */
// eslint-disable-next-line no-control-regex -- NUL is exactly what must be found
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
const UNSTORABLE_TEST = new RegExp(UNSTORABLE.source);

/** How many characters of each kind were replaced. */
export interface Replaced {
  nul: number;
  surrogates: number;
}

function none(): Replaced {
  return { nul: 0, surrogates: 0 };
}

/** `s` with every NUL and unpaired surrogate replaced; counts what it replaced into `n`. */
function clean(s: string, n: Replaced): string {
  if (!UNSTORABLE_TEST.test(s)) return s;
  return s.replace(UNSTORABLE, (c) => {
    if (c === "\u0000") n.nul++;
    else n.surrogates++;
    return REPLACEMENT_CHARACTER;
  });
}

/** A copy of `v` (every string and object key cleaned); `v` itself when nothing needed it. */
function cleanValue(v: unknown, n: Replaced): unknown {
  if (typeof v === "string") return clean(v, n);
  if (Array.isArray(v)) {
    let changed = false;
    const out = v.map((item) => {
      const c = cleanValue(item, n);
      if (c !== item) changed = true;
      return c;
    });
    return changed ? out : v;
  }
  if (typeof v === "object" && v !== null && !(v instanceof Date)) {
    let changed = false;
    const out: Record<string, unknown> = {};
    for (const [k, item] of Object.entries(v)) {
      const key = clean(k, n);
      const c = cleanValue(item, n);
      if (key !== k || c !== item) changed = true;
      out[key] = c;
    }
    return changed ? out : v;
  }
  return v;
}

/** Any JSON-like value, made storable; what was replaced is counted. */
export function storableValue<T>(value: T): { value: T; replaced: Replaced } {
  const replaced = none();
  return { value: cleanValue(value, replaced) as T, replaced };
}

/** A text column's value, made storable (only NUL matters there; surrogates are encoded). */
export function storableText(text: string): string {
  return clean(text, none());
}

/** The sentence a tool result's note gets, e.g. "3 NUL bytes were replaced with U+FFFD". */
export function replacedNote(r: Replaced): string | undefined {
  const what: string[] = [];
  if (r.nul > 0) what.push(`${r.nul} NUL byte${r.nul === 1 ? "" : "s"}`);
  if (r.surrogates > 0)
    what.push(`${r.surrogates} unpaired UTF-16 surrogate${r.surrogates === 1 ? "" : "s"}`);
  if (what.length === 0) return undefined;
  const verb = r.nul + r.surrogates === 1 ? "was" : "were";
  return (
    `${what.join(" and ")} ${verb} replaced with U+FFFD (the database cannot store them); ` +
    "the rest is as the workspace gave it."
  );
}

/**
 * A message's parts, made storable. A tool result whose strings needed it gets a `note` (added
 * to the note it has) saying how many characters were replaced.
 */
export function storableParts(parts: MessagePart[]): MessagePart[] {
  return parts.map((p) => {
    const { value, replaced } = storableValue(p);
    if (value.type !== "tool-result") return value;
    const note = replacedNote(replaced);
    const result = value.result;
    if (!note || typeof result !== "object" || result === null || Array.isArray(result))
      return value;
    const r = result as Record<string, unknown>;
    const before = typeof r.note === "string" && r.note !== "" ? `${r.note} ` : "";
    return { ...value, result: { ...r, note: `${before}${note}` } };
  });
}

/** JSON text of `value` that a jsonb column accepts. */
export function storableJson(value: unknown): string {
  return JSON.stringify(storableValue(value).value);
}
