// Requests to the server, generated from its own OpenAPI document (`GET /api/v1/openapi.json`:
// every route, its path and query parameters and its JSON body schema) and mutated: bodies,
// parameters, identities, methods, paths and content types.

import type { Rng } from "../chaos/rng.ts";
import { enc } from "./agent-requests.ts";
import { mutateHeader, mutateJson, nasty, seededUuid, spoil } from "./mutate.ts";
import type { WireRequest } from "./send.ts";

type Schema = Record<string, unknown>;

export interface Operation {
  method: string;
  /** OpenAPI form, `{id}` for a path parameter. */
  path: string;
  params: { name: string; in: "path" | "query"; required: boolean; schema: Schema }[];
  body?: Schema;
  public: boolean;
}

/** The operations of an OpenAPI document. */
export function operations(doc: Schema): Operation[] {
  const out: Operation[] = [];
  for (const [path, methods] of Object.entries(
    doc.paths as Record<string, Record<string, Schema>>,
  )) {
    for (const [method, op] of Object.entries(methods)) {
      const body = (op.requestBody as Schema | undefined)?.content as
        Record<string, { schema: Schema }> | undefined;
      out.push({
        method: method.toUpperCase(),
        path,
        params: (op.parameters ?? []) as Operation["params"],
        ...(body?.["application/json"] && { body: body["application/json"].schema }),
        public: Array.isArray(op.security) && op.security.length === 0,
      });
    }
  }
  return out;
}

export interface ServerIdentity {
  name: string;
  token: string;
}

export interface ServerPool {
  /** Ids the fuzz may name (sandbox resources only: never the campaign's own). */
  ids: string[];
  identities: ServerIdentity[];
}

export interface ServerCase {
  route: string;
  wire: WireRequest;
  baseline: boolean;
  mutations: string[];
}

/** A value for a JSON schema (zod's output: types, formats, enums, anyOf, bounds). */
export function valueFor(rng: Rng, s: Schema, pool: ServerPool, mark: string, depth = 0): unknown {
  if (Array.isArray(s.anyOf))
    return valueFor(rng, rng.pick(s.anyOf as Schema[]), pool, mark, depth);
  if (Array.isArray(s.oneOf))
    return valueFor(rng, rng.pick(s.oneOf as Schema[]), pool, mark, depth);
  if (Array.isArray(s.allOf)) return valueFor(rng, (s.allOf as Schema[])[0]!, pool, mark, depth);
  if (Array.isArray(s.enum)) return rng.pick(s.enum as unknown[]);
  if ("const" in s) return s.const;
  const type = Array.isArray(s.type)
    ? rng.pick(s.type as string[])
    : (s.type as string | undefined);
  switch (type) {
    case "string": {
      if (s.format === "uuid")
        return rng.chance(0.6) && pool.ids.length ? rng.pick(pool.ids) : seededUuid(rng);
      if (s.format === "email") return `fz-${mark.toLowerCase()}-${rng.int(0, 1e6)}@example.test`;
      if (s.format === "date-time") return new Date(Date.now() + rng.int(-1e9, 1e10)).toISOString();
      if (typeof s.pattern === "string" && s.pattern.includes("0-9")) return String(rng.int(1, 50));
      if (s.format === "uri" || (typeof s.description === "string" && /url/i.test(s.description))) {
        return rng.pick([
          "http://127.0.0.1:1",
          "https://example.test",
          "http://[::1]:9/x",
          "http://169.254.169.254/",
          "ftp://x",
          "http://u:p@example.test/",
        ]);
      }
      const min = Number(s.minLength ?? 0);
      const max = Number(s.maxLength ?? 40);
      const base = `${mark}-${"word".repeat(rng.int(0, 3))}`;
      const padded = base.length < min ? base + "p".repeat(min - base.length) : base;
      return padded.slice(0, Math.max(min, Math.min(max, padded.length)));
    }
    case "integer":
    case "number": {
      const min = Number(s.minimum ?? s.exclusiveMinimum ?? 0);
      const max = Number(s.maximum ?? s.exclusiveMaximum ?? min + 100_000);
      return rng.int(
        Math.ceil(min) + (s.exclusiveMinimum !== undefined ? 1 : 0),
        Math.floor(Math.min(max, min + 1e9)),
      );
    }
    case "boolean":
      return rng.chance(0.5);
    case "array":
      return depth > 4
        ? []
        : Array.from(
            { length: rng.int(Number(s.minItems ?? 0), Math.max(Number(s.minItems ?? 0), 3)) },
            () => valueFor(rng, (s.items as Schema) ?? {}, pool, mark, depth + 1),
          );
    case "null":
      return null;
    case "object":
    default: {
      if (type === undefined && !s.properties) return rng.chance(0.5) ? mark : rng.int(0, 10);
      const props = (s.properties ?? {}) as Record<string, Schema>;
      const required = new Set((s.required ?? []) as string[]);
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(props)) {
        if (required.has(k) || rng.chance(0.5)) out[k] = valueFor(rng, v, pool, mark, depth + 1);
      }
      return out;
    }
  }
}

/** Routes a campaign never sends as itself: its own identity and setup must survive. */
function unsafe(op: Operation, identity: ServerIdentity): boolean {
  return identity.name === "owner" && op.method !== "GET";
}

export function serverCase(
  rng: Rng,
  index: number,
  ops: Operation[],
  pool: ServerPool,
): ServerCase {
  const mark = `FZ-${index}-ZF`;
  const mutations: string[] = [];
  const mutate = rng.chance(0.8);
  const op = rng.pick(ops);
  let identity = rng.pick(pool.identities);
  if (unsafe(op, identity)) identity = pool.identities.find((i) => i.name !== "owner")!;
  let path = op.path;
  const query: string[] = [];
  for (const p of op.params) {
    let v = String(valueFor(rng, p.schema, pool, mark));
    if (mutate && rng.chance(0.25)) {
      v = rng.chance(0.5) ? spoil(rng, v) : nasty(rng);
      mutations.push(`param:${p.name}`);
    }
    if (p.in === "path") path = path.replace(`{${p.name}}`, enc(v));
    else if (p.required || rng.chance(0.6)) {
      query.push(`${enc(p.name)}=${enc(v)}`);
      if (mutate && rng.chance(0.1)) {
        query.push(`${enc(p.name)}=${enc(v)}`);
        mutations.push(`query:${p.name}:repeated`);
      }
    }
  }
  let method = op.method;
  if (mutate && rng.chance(0.05)) {
    method = rng.pick(["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]);
    mutations.push(`method:${method}`);
  }
  if (mutate && rng.chance(0.04)) {
    path = rng.pick([
      `${path}/`,
      `${path}//x`,
      path.replace("/api/v1", "/api/v2"),
      `/api/v1/${"x/".repeat(rng.int(1, 300))}`,
      "/api/v1/%2e%2e/%2e%2e/etc/passwd",
      `/${enc(nasty(rng))}`,
      "/internal/v1/chats/x/parts",
    ]);
    mutations.push("path");
  }
  const headers: Record<string, string | string[]> = {};
  if (identity.token) headers.authorization = `Bearer ${identity.token}`;
  let body: Buffer | undefined;
  if (op.body && method !== "GET" && method !== "HEAD") {
    const m = mutateJson(rng, valueFor(rng, op.body, pool, mark), mutate ? 0.6 : 0);
    body = m.body;
    if (m.mutation !== "none") mutations.push(`body:${m.mutation}`);
    headers["content-type"] = "application/json";
  } else if (mutate && rng.chance(0.05) && method !== "GET" && method !== "HEAD") {
    body = Buffer.from(rng.pick(["{}", "null", "x"]));
    headers["content-type"] = "application/json";
    mutations.push("body:unexpected");
  }
  if (mutate && rng.chance(0.25)) {
    const name = rng.pick([
      "authorization",
      "content-type",
      "cookie",
      "origin",
      "x-forwarded-for",
      "x-csrf",
      "accept",
    ]);
    const base =
      name === "authorization"
        ? rng.pick([
            headers.authorization ?? "Bearer x",
            "Bearer ",
            "Basic eDp5",
            `Bearer ${spoil(rng, identity.token)}`,
          ])
        : name === "content-type"
          ? rng.pick([
              "text/plain",
              "application/x-www-form-urlencoded",
              "application/json; charset=latin1",
              "multipart/form-data",
            ])
          : name === "cookie"
            ? `tether_session=${identity.token}`
            : name === "origin"
              ? "https://evil.example"
              : "1.2.3.4";
    const m = rng.chance(0.5) ? { value: base, mutation: "set" } : mutateHeader(rng, String(base));
    if (m.value === undefined) delete headers[name];
    else headers[name] = m.value;
    mutations.push(`header:${name}:${m.mutation}`);
  }
  const wire: WireRequest = {
    method,
    path: query.length ? `${path}?${query.join("&")}` : path,
    headers,
    ...(body && { body }),
  };
  if (mutate && rng.chance(0.02) && body) {
    const kind = rng.pick(["truncated", "slow"] as const);
    wire.raw =
      kind === "truncated"
        ? { kind, declared: body.length + rng.int(1, 1000) }
        : { kind, chunks: rng.int(2, 4), delayMs: rng.int(50, 250) };
    mutations.push(`raw:${kind}`);
  }
  return {
    route: `${op.method} ${op.path}`,
    wire,
    baseline: mutations.length === 0,
    mutations: [`as:${identity.name}`, ...mutations],
  };
}
