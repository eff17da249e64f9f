// Seeded mutations shared by the agent's and the server's generators: hostile strings, JSON
// bodies made wrong in every way a parser or a schema can meet (wrong types, deep nesting,
// huge strings, NUL, lone surrogates, invalid UTF-8, prototype keys), and header values
// (missing, empty, negative, huge, non-decimal, unicode, repeated).

import type { Rng } from "../chaos/rng.ts";

/** A UUID drawn from the seed (so a replay sends the same one). */
export function seededUuid(rng: Rng): string {
  const hex = Array.from({ length: 32 }, () => "0123456789abcdef"[rng.int(0, 15)]).join("");
  const v = "89ab"[rng.int(0, 3)];
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-${v}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/** Short hostile strings: NUL, a lone surrogate, escapes, unicode, traversal, formats. */
export const NASTY = [
  "\u0000",
  "a\u0000b",
  "\ud800",
  "x\udfffy",
  "工具-é",
  "👩‍💻",
  "\u202e",
  "\r\n",
  "%00",
  "%zz",
  "../../..",
  "${HOME}",
  "$(id)",
  "'\"`",
  "\\",
  " ",
  "",
  "null",
  "-1",
  "0",
  "9223372036854775808",
  "1e309",
  "NaN",
  "__proto__",
  "constructor",
] as const;

export function nasty(rng: Rng): string {
  if (rng.chance(0.08)) return "x".repeat(rng.pick([1024, 65_536, 1_100_000]));
  return rng.pick(NASTY);
}

/** A string with a nasty piece inserted at a random place (or replacing it). */
export function spoil(rng: Rng, s: string): string {
  const piece = nasty(rng);
  if (rng.chance(0.2)) return piece;
  const at = rng.int(0, s.length);
  return s.slice(0, at) + piece + s.slice(at);
}

/** A value of a wrong type, or a hostile one. */
export function wrongValue(rng: Rng, depth = 0): unknown {
  switch (rng.int(0, 10)) {
    case 0:
      return null;
    case 1:
      return rng.pick([0, -1, 1.5, 1e308, -0, 2 ** 53 + 1]);
    case 2:
      return rng.chance(0.5);
    case 3:
      return [];
    case 4:
      return {};
    case 5:
      return depth < 3 ? [wrongValue(rng, depth + 1)] : [1];
    case 6:
      return depth < 3 ? { a: wrongValue(rng, depth + 1) } : { a: 1 };
    default:
      return nasty(rng);
  }
}

type Json = unknown;

/** The paths of every value inside `v` (objects and arrays walked), the root first. */
function slots(v: Json, at: (string | number)[] = [], out: (string | number)[][] = []) {
  out.push(at);
  if (Array.isArray(v)) v.forEach((x, i) => slots(x, [...at, i], out));
  else if (v !== null && typeof v === "object")
    for (const [k, x] of Object.entries(v)) slots(x, [...at, k], out);
  return out;
}

function setAt(root: Json, at: (string | number)[], value: Json): Json {
  if (at.length === 0) return value;
  const copy = structuredClone(root) as Record<string | number, Json>;
  let cur = copy;
  for (const k of at.slice(0, -1)) cur = cur[k] as Record<string | number, Json>;
  cur[at.at(-1)!] = value;
  return copy;
}

function deleteAt(root: Json, at: (string | number)[]): Json {
  if (at.length === 0) return undefined;
  const copy = structuredClone(root) as Record<string | number, Json>;
  let cur = copy;
  for (const k of at.slice(0, -1)) cur = cur[k] as Record<string | number, Json>;
  if (Array.isArray(cur)) cur.splice(at.at(-1) as number, 1);
  else delete cur[at.at(-1)!];
  return copy;
}

function getAt(root: Json, at: (string | number)[]): Json {
  let cur = root as Record<string | number, Json>;
  for (const k of at) cur = cur?.[k] as Record<string | number, Json>;
  return cur;
}

export type BodyMutation =
  | "none"
  | "wrong_type"
  | "delete_key"
  | "extra_key"
  | "proto_key"
  | "nasty_string"
  | "huge_string"
  | "deep_nesting"
  | "invalid_utf8"
  | "truncated_json"
  | "not_json"
  | "scalar_body"
  | "empty"
  | "duplicate_key";

/** A JSON body, maybe mutated; returns the bytes and which mutation was made. */
export function mutateJson(
  rng: Rng,
  value: Json,
  pMutate: number,
): { body: Buffer; mutation: BodyMutation } {
  if (!rng.chance(pMutate)) return { body: Buffer.from(JSON.stringify(value)), mutation: "none" };
  const mutation = rng.weighted<Exclude<BodyMutation, "none">>({
    wrong_type: 4,
    delete_key: 2,
    extra_key: 1,
    proto_key: 2,
    nasty_string: 5,
    huge_string: 1,
    deep_nesting: 1,
    invalid_utf8: 2,
    truncated_json: 1,
    not_json: 1,
    scalar_body: 1,
    empty: 1,
    duplicate_key: 1,
  });
  const all = slots(value);
  const at = rng.pick(all);
  const text = (v: Json) => Buffer.from(JSON.stringify(v) ?? "");
  switch (mutation) {
    case "wrong_type":
      return { body: text(setAt(value, at, wrongValue(rng))), mutation };
    case "delete_key":
      return { body: text(deleteAt(value, at) ?? {}), mutation };
    case "extra_key": {
      const target = getAt(value, at);
      if (target === null || typeof target !== "object" || Array.isArray(target))
        return { body: text({ ...(value as object), extra: wrongValue(rng) }), mutation };
      return { body: text(setAt(value, [...at, nasty(rng)], wrongValue(rng))), mutation };
    }
    case "proto_key": {
      const json = JSON.stringify(value);
      const key = rng.pick(["__proto__", "constructor", "prototype"]);
      const inner = rng.pick([`{"polluted":true}`, `{"prototype":{"polluted":true}}`, "null", "1"]);
      const body = json.startsWith("{")
        ? `{"${key}":${inner}${json.length > 2 ? "," : ""}${json.slice(1)}`
        : `{"${key}":${inner}}`;
      return { body: Buffer.from(body), mutation };
    }
    case "nasty_string": {
      const cur = getAt(value, at);
      const s = typeof cur === "string" ? spoil(rng, cur) : nasty(rng);
      return { body: text(setAt(value, at, s)), mutation };
    }
    case "huge_string":
      return {
        body: text(setAt(value, at, "y".repeat(rng.pick([100_000, 900_000, 1_100_000])))),
        mutation,
      };
    case "deep_nesting": {
      const n = rng.pick([100, 1_000, 10_000, 100_000]);
      const deep = rng.chance(0.5)
        ? "[".repeat(n) + "]".repeat(n)
        : '{"a":'.repeat(n) + "1" + "}".repeat(n);
      const json = JSON.stringify(setAt(value, at, "@@DEEP@@"));
      return { body: Buffer.from(json.replace('"@@DEEP@@"', deep)), mutation };
    }
    case "invalid_utf8": {
      const json = Buffer.from(JSON.stringify(setAt(value, at, "@@BAD@@")));
      const i = json.indexOf("@@BAD@@");
      const bad = Buffer.from(
        rng.pick([[0xff], [0xc3], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80], [0xc0, 0xaf]]),
      );
      if (i < 0) return { body: Buffer.concat([json, bad]), mutation };
      return {
        body: Buffer.concat([json.subarray(0, i), bad, json.subarray(i + 7)]),
        mutation,
      };
    }
    case "truncated_json": {
      const json = Buffer.from(JSON.stringify(value));
      return { body: json.subarray(0, rng.int(0, Math.max(0, json.length - 1))), mutation };
    }
    case "not_json":
      return {
        body: Buffer.from(rng.pick(["{nope", "command=ls", "<xml/>", "\u0000\u0001", "{'a':1}"])),
        mutation,
      };
    case "scalar_body":
      return {
        body: Buffer.from(rng.pick(["null", "[]", "1", '"str"', "true", "[{}]"])),
        mutation,
      };
    case "empty":
      return { body: Buffer.alloc(0), mutation };
    case "duplicate_key": {
      const json = JSON.stringify(value);
      const m = /^\{"([^"]+)":/.exec(json);
      if (!m) return { body: Buffer.from(json), mutation };
      return {
        body: Buffer.from(`{"${m[1]}":${JSON.stringify(wrongValue(rng))},${json.slice(1)}`),
        mutation,
      };
    }
  }
}

export type HeaderMutation =
  "missing" | "empty" | "negative" | "huge" | "non_decimal" | "unicode" | "repeated" | "nasty";

/** A header's value mutated: undefined drops it, an array repeats it. */
export function mutateHeader(
  rng: Rng,
  value: string,
): { value: string | string[] | undefined; mutation: HeaderMutation } {
  const mutation = rng.weighted<HeaderMutation>({
    missing: 2,
    empty: 2,
    negative: 1,
    huge: 1,
    non_decimal: 2,
    unicode: 2,
    repeated: 2,
    nasty: 1,
  });
  switch (mutation) {
    case "missing":
      return { value: undefined, mutation };
    case "empty":
      return { value: "", mutation };
    case "negative":
      return { value: rng.pick(["-1", "-0", `-${value}`, "-9223372036854775808"]), mutation };
    case "huge":
      return {
        value: rng.pick([
          "9".repeat(40),
          "18446744073709551616",
          value + "1".repeat(4000),
          "x".repeat(12_000),
        ]),
        mutation,
      };
    case "non_decimal":
      return {
        value: rng.pick(["1e3", "0x10", " 1", "1 ", "1.5", "+1", "١٢", "abc", "1,2", `${value}%`]),
        mutation,
      };
    case "unicode":
      // Node writes a header string's chars as Latin-1 bytes: this sends UTF-8 bytes raw.
      return {
        value: Buffer.from(rng.pick(["工具-é", `${value}é`, "ünïcödé", "👩‍💻"]), "utf8").toString(
          "latin1",
        ),
        mutation,
      };
    case "repeated":
      return {
        value: rng.chance(0.5) ? [value, value] : [value, rng.pick(["1", "x", seededUuid(rng)])],
        mutation,
      };
    case "nasty":
      return { value: rng.pick(["%00", "%zz", "%", "a%2", "\t", "null", "undefined"]), mutation };
  }
}
