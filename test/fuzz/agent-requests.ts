// Requests to the workspace agent, generated from the contract's route table (CONTRACT.md 7)
// and mutated. Every side-effecting request carries a marker, `FZ-<index>-ZF`, in what it would
// run or write, so the end check can tell which requests had an effect: a refused one never may.

import {
  escapeToolCallId,
  toolCallUuid,
  parseChatId,
  toMessageId,
} from "../../src/contract/index.ts";
import type { Rng } from "../chaos/rng.ts";
import { mutateHeader, mutateJson, nasty, seededUuid, spoil, wrongValue } from "./mutate.ts";
import type { WireRequest } from "./send.ts";

export interface AgentTarget {
  token: string;
  /** The workspace directory (the agent's --dir). */
  dir: string;
}

/** A generated agent request and what it meant, for the invariants. */
export interface AgentCase {
  route: string;
  wire: WireRequest;
  /** The marker its side effect would leave, if any. */
  marker?: string;
  /** The tool call its headers name, when they were sent unmutated. */
  toolCall?: { chatId: string; messageId: number; id: string };
  /** The request carries an Origin header: it must be refused. */
  origin: boolean;
  /** A JSON route with a Content-Type other than application/json (and a body). */
  wrongType: boolean;
  /** Whether the request is the unmutated baseline (a 4xx is not expected then). */
  baseline: boolean;
  mutations: string[];
}

/** Percent-encodes the UTF-8 bytes of `s` (a lone surrogate becomes EF BF BD, never a throw). */
export function enc(s: string): string {
  let out = "";
  for (const b of Buffer.from(s, "utf8")) {
    const c = String.fromCharCode(b);
    out += /[A-Za-z0-9\-_.~]/.test(c) ? c : "%" + b.toString(16).toUpperCase().padStart(2, "0");
  }
  return out;
}

export const marker = (index: number) => `FZ-${index}-ZF`;

/** Per-lane state: a lane's chat, and its message counter (kept rising, like chatd's). */
export interface Lane {
  chatId: string;
  message: number;
  /** Process ids this lane started (for output, signal and cancel requests). */
  processes: string[];
}

const JSON_ROUTES = new Set(["start", "signal", "cancel", "edit", "list_dir"]);

export function agentCase(rng: Rng, index: number, lane: Lane, t: AgentTarget): AgentCase {
  const route = rng.weighted({
    start: 6,
    list: 2,
    output: 2,
    signal: 1,
    cancel: 2,
    edit: 3,
    write: 3,
    read: 2,
    read_lines: 2,
    list_dir: 1,
    info: 1,
    unknown: 1,
  });
  const mark = marker(index);
  const mutations: string[] = [];
  const mutate = rng.chance(0.8);
  const pBody = mutate ? 0.5 : 0;
  const file = `${t.dir}/fz/${index}`;
  const withChat = rng.chance(0.85);
  const withToolCall = withChat && rng.chance(0.8);
  const messageId = ++lane.message;
  const toolCallId = rng.chance(0.2) ? `工具-${index}` : `call_${index}`;
  let method = "GET";
  let path = "/api/v0/info";
  let value: unknown;
  let rawBody: Buffer | undefined;
  let effect = false;
  let middleware = false;
  const query: [string, string][] = [];

  const pid = () =>
    rng.chance(0.6) && lane.processes.length > 0
      ? rng.pick(lane.processes)
      : rng.chance(0.5)
        ? seededUuid(rng)
        : nasty(rng);
  switch (route) {
    case "start":
      method = "POST";
      path = "/api/v0/processes/start";
      middleware = effect = true;
      value = {
        command: rng.pick([
          `echo ${mark} >> ${t.dir}/runs.log`,
          `printf '${mark}\\n' >> ${t.dir}/runs.log; printf 'a\\000b'`,
          // No /dev/zero: a mutated `head -c N /dev/zero` (`head $(id)-c N`) reads it forever.
          `echo ${mark} >> ${t.dir}/runs.log; printf '%0${rng.pick([10, 70_000])}d' 0`,
          `echo ${mark} >> ${t.dir}/runs.log; sleep 0.${rng.int(1, 3)}`,
        ]),
        ...(rng.chance(0.3) && {
          workdir: rng.pick([t.dir, "fz", "/tmp", `${t.dir}/missing-${index}`]),
        }),
        ...(rng.chance(0.3) && { env: { FZ: mark, [rng.pick(["A", "B_1", "LANG"])]: "x" } }),
        ...(rng.chance(0.2) && { background: rng.chance(0.5) }),
      };
      break;
    case "list":
      path = "/api/v0/processes/list";
      break;
    case "output":
      path = `/api/v0/processes/${enc(pid())}/output`;
      if (rng.chance(0.3)) query.push(["wait", rng.pick(["true", "false", "1", ""])]);
      break;
    case "signal":
      method = "POST";
      path = `/api/v0/processes/${enc(pid())}/signal`;
      value = { signal: rng.pick(["kill", "terminate", "hup", ""]) };
      break;
    case "cancel": {
      method = "POST";
      const uuid = withChat
        ? toolCallUuid(parseChatId(lane.chatId)!, toMessageId(messageId)!, toolCallId)
        : seededUuid(rng);
      path = `/api/v0/tool-calls/${rng.chance(0.85) ? uuid : enc(pid())}/cancel`;
      value = rng.chance(0.2)
        ? undefined
        : { stop_if_run_age_below_ms: rng.pick([0, 1000, -5, 60_000]) };
      break;
    }
    case "edit":
      method = "POST";
      path = "/api/v0/edit-files";
      middleware = effect = true;
      value = {
        files: [
          {
            path: `${t.dir}/edit.txt`,
            edits: [
              {
                old_text: rng.pick(["AAA", "line", "missing"]),
                new_text: mark,
                ...(rng.chance(0.3) && { replace_all: true }),
              },
            ],
          },
        ],
        ...(rng.chance(0.3) && { include_diff: true }),
      };
      break;
    case "write":
      method = "POST";
      path = "/api/v0/write-file";
      middleware = effect = true;
      // A spoiled name stays inside the campaign's directory (`../..` at most reaches its root).
      query.push(["path", rng.chance(0.9) ? file : `${t.dir}/fz/${spoil(rng, String(index))}`]);
      if (rng.chance(0.15)) query.push(["path", file]);
      rawBody = Buffer.from(
        rng.pick([
          `${mark}\n`,
          `${mark}\u0000\n`,
          `${mark}\n` + "z".repeat(rng.pick([10, 200_000])),
        ]),
        "utf8",
      );
      if (rng.chance(0.1)) rawBody = Buffer.concat([rawBody, Buffer.from([0xff, 0xfe, 0x00])]);
      break;
    case "read":
    case "read_lines":
      path = route === "read" ? "/api/v0/read-file" : "/api/v0/read-file-lines";
      query.push([
        "path",
        rng.pick([
          `${t.dir}/runs.log`,
          `${t.dir}/edit.txt`,
          "/proc/self/mem",
          "/proc/self/status",
          "/dev/zero",
          "/dev/urandom",
          "/",
          "relative.txt",
          `${t.dir}/nope`,
          `${t.dir}/a\u0000b`,
          spoil(rng, `${t.dir}/edit.txt`),
        ]),
      ]);
      if (rng.chance(0.3))
        query.push(["offset", rng.pick(["0", "1", "-1", "99999999999999999999", "x", ""])]);
      if (rng.chance(0.3)) query.push(["limit", rng.pick(["0", "10", "-1", "1.5", "x"])]);
      if (rng.chance(0.15)) query.push([rng.pick(["path", "offset", "limit"]), "1"]);
      break;
    case "list_dir":
      method = "POST";
      path = "/api/v0/list-directory";
      value = {
        path: rng.pick([
          [],
          t.dir.split("/").filter(Boolean),
          ["proc", "self"],
          ["..", ".."],
          ["a\u0000"],
        ]),
        relativity: rng.pick(["root", "home", "other"]),
      };
      break;
    case "info":
      break;
    case "unknown":
      method = rng.pick(["GET", "POST", "PUT", "DELETE"]);
      path = rng.pick([
        "/",
        "/api/v0",
        "/api/v0/processes",
        "/api/v1/health",
        "/api/v0/processes//output",
        `/api/v0/${"a/".repeat(rng.int(1, 400))}`,
        "/%2e%2e/%2e%2e/etc/passwd",
        "/api/v0/read-file/../info",
      ]);
      break;
  }

  // Methods: a route's path with another method is a 404, never a run.
  if (mutate && rng.chance(0.06)) {
    method = rng.pick(["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]);
    mutations.push(`method:${method}`);
  }
  const headers: Record<string, string | string[]> = { authorization: `Bearer ${t.token}` };
  if (withChat) headers["coder-chat-id"] = lane.chatId;
  if (withToolCall && (middleware || route === "cancel")) {
    headers["coder-tool-call-message-id"] = String(messageId);
    headers["coder-tool-call-id"] = escapeToolCallId(toolCallId);
    headers["coder-tool-call-age-ms"] = "0";
  }
  let body: Buffer | undefined = rawBody;
  if (value !== undefined) {
    const m = mutateJson(rng, value, pBody);
    body = m.body;
    if (m.mutation !== "none") mutations.push(`body:${m.mutation}`);
  }
  if (body !== undefined)
    headers["content-type"] = route === "write" ? "application/octet-stream" : "application/json";

  let headersMutated = false;
  if (mutate && rng.chance(0.45)) {
    const names = [
      "coder-chat-id",
      "coder-tool-call-message-id",
      "coder-tool-call-id",
      "coder-tool-call-age-ms",
      "authorization",
      "content-type",
    ];
    for (let n = rng.int(1, 2); n > 0; n--) {
      const name = rng.pick(names);
      const base =
        typeof headers[name] === "string" ? headers[name] : rng.pick(["1", lane.chatId, "x"]);
      const m = mutateHeader(rng, name === "content-type" && rng.chance(0.5) ? "text/plain" : base);
      if (m.value === undefined) delete headers[name];
      else headers[name] = m.value;
      if (name !== "content-type") headersMutated = true;
      mutations.push(`header:${name}:${m.mutation}`);
    }
  }
  const origin = mutate && rng.chance(0.05);
  if (origin) {
    headers.origin = rng.pick(["https://evil.example", "null", "", "http://127.0.0.1"]);
    mutations.push("header:origin");
  }
  if (mutate && rng.chance(0.04)) {
    const junk = rng.pick(["x-fz", "coder-chat-id", "transfer-encoding"]);
    headers[junk] = junk === "transfer-encoding" ? "gzip" : wrongString(rng);
    mutations.push(`header:${junk}:extra`);
  }

  let rawHead = false; // the raw bytes carry their own head: no Origin, no Content-Type
  let qs = query.map(([k, v]) => `${enc(k)}=${enc(v)}`).join("&");
  if (mutate && rng.chance(0.05)) {
    qs += (qs ? "&" : "") + rng.pick(["%zz", "path", "path=%00", "a[b]=1", "&&&", "path[]=x"]);
    mutations.push("query:junk");
  }
  const wire: WireRequest = {
    method,
    path: qs ? `${path}?${qs}` : path,
    headers,
    ...(body && { body }),
  };

  // Raw delivery: truncated and slow bodies, and bytes node:http will not put in a header.
  if (mutate && rng.chance(0.03)) {
    const kind = rng.pick(["truncated", "slow", "bytes"] as const);
    if (kind === "truncated") wire.raw = { kind, declared: (body?.length ?? 0) + rng.int(1, 5000) };
    else if (kind === "slow") wire.raw = { kind, chunks: rng.int(2, 5), delayMs: rng.int(50, 300) };
    else {
      const bad = rng.pick(["\u0000", "\r", "\u007f", "é"]);
      const bytes = Buffer.concat([
        Buffer.from(
          `${method} ${wire.path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.token}\r\nCoder-Chat-Id: ${lane.chatId}${bad}\r\nCoder-Tool-Call-Id: a${bad}b\r\nContent-Length: ${body?.length ?? 0}\r\nConnection: close\r\n\r\n`,
          "latin1",
        ),
        body ?? Buffer.alloc(0),
      ]);
      wire.raw = { kind, bytes };
      headersMutated = true;
      rawHead = true;
    }
    mutations.push(`raw:${kind}`);
  }

  const ct = headers["content-type"];
  const wrongType =
    JSON_ROUTES.has(route) &&
    body !== undefined &&
    body.length > 0 &&
    !(typeof ct === "string" && ct.split(";")[0]!.trim().toLowerCase() === "application/json");
  return {
    route,
    wire,
    ...(effect && { marker: mark }),
    ...(withToolCall &&
      (middleware || route === "cancel") &&
      !headersMutated && { toolCall: { chatId: lane.chatId, messageId, id: toolCallId } }),
    origin: origin && !rawHead,
    wrongType: wrongType && !rawHead,
    baseline: mutations.length === 0,
    mutations,
  };
}

function wrongString(rng: Rng): string {
  const v = wrongValue(rng);
  return typeof v === "string"
    ? v.replace(/[^\t\x20-\x7e]/g, "?").slice(0, 200)
    : JSON.stringify(v);
}
