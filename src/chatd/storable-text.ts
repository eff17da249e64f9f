// Text the database can store. Postgres text and jsonb cannot hold NUL (U+0000), and a UTF-16
// surrogate without its pair has no UTF-8 form (jsonb refuses its `\ud800` escape; a text
// column would get U+FFFD in its place, silently). The API refuses such input at its edge
// (400 naming the field); what the server itself writes from untrusted text (audit details:
// a tool call's command) is made storable first with toStorableText.

/** NUL, a high surrogate not followed by a low one, or a low surrogate not after a high one. */
// eslint-disable-next-line no-control-regex -- NUL is exactly what this looks for
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const UNSTORABLE_ALL = new RegExp(UNSTORABLE.source, "g");

/** Whether `s` can be stored as it is (no NUL, no unpaired surrogate). */
export function isStorableText(s: string): boolean {
  return !UNSTORABLE.test(s);
}

/** `s` with each NUL and unpaired surrogate replaced by U+FFFD. */
export function toStorableText(s: string): string {
  return s.replace(UNSTORABLE_ALL, "\ufffd");
}

/** A visited value and how it was reached (its path is built only when it is reported). */
interface Visit {
  value: unknown;
  key: string | number | undefined;
  parent: Visit | undefined;
}

function pathOf(v: Visit | undefined, last?: string): (string | number)[] {
  const path: (string | number)[] = last === undefined ? [] : [last];
  for (let at = v; at?.key !== undefined; at = at.parent) path.unshift(at.key);
  return path;
}

/**
 * The path (keys and array indexes) of the first string in `value`, an object key or a value,
 * that is not storable; undefined when every one is. Iterative, and each value costs O(1) until
 * one is reported: a deeply nested body can neither overflow the stack nor take quadratic time.
 */
export function findUnstorableText(value: unknown): (string | number)[] | undefined {
  const stack: Visit[] = [{ value, key: undefined, parent: undefined }];
  while (stack.length > 0) {
    const visit = stack.pop()!;
    const v = visit.value;
    if (typeof v === "string") {
      if (!isStorableText(v)) return pathOf(visit);
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], key: i, parent: visit });
    } else if (typeof v === "object" && v !== null) {
      const keys = Object.keys(v);
      for (const k of keys) if (!isStorableText(k)) return pathOf(visit, k);
      for (let i = keys.length - 1; i >= 0; i--) {
        const k = keys[i]!;
        stack.push({ value: (v as Record<string, unknown>)[k], key: k, parent: visit });
      }
    }
  }
  return undefined;
}
