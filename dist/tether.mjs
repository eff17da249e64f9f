// src/cli/main.ts
import { Command, InvalidArgumentError } from "commander";

// src/agent/server.ts
import { randomUUID, timingSafeEqual } from "node:crypto";
import os from "node:os";
import path from "node:path";
import Fastify from "fastify";
import { z as z2 } from "zod";

// src/contract/clock.ts
var realClock = {
  now: () => performance.timeOrigin + performance.now(),
  setTimer(ms, fn) {
    const t = setTimeout(fn, Math.max(0, ms));
    return { cancel: () => clearTimeout(t) };
  },
};

// src/contract/ids.ts
var CANONICAL_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
var NIL_UUID = "00000000-0000-0000-0000-000000000000";
var MAX_INT64 = 2n ** 63n - 1n;
function parseChatId(value) {
  if (!CANONICAL_UUID.test(value)) return void 0;
  const lower = value.toLowerCase();
  return lower === NIL_UUID ? void 0 : lower;
}
function toMessageId(value) {
  let id;
  if (typeof value === "string") {
    if (!/^[0-9]+$/.test(value)) return void 0;
    id = BigInt(value);
  } else if (typeof value === "number") {
    if (!Number.isSafeInteger(value)) return void 0;
    id = BigInt(value);
  } else {
    id = value;
  }
  return id > 0n && id <= MAX_INT64 ? id : void 0;
}

// src/contract/uuid.ts
import { v5 } from "uuid";
var TOOL_CALL_UUID_NAMESPACE = "c5773f4c-0b3f-57bc-9147-36daf7921a1b";
function toolCallUuid(chatId, messageId, providerToolCallId) {
  const idBytes =
    typeof providerToolCallId === "string"
      ? Buffer.from(providerToolCallId, "utf8")
      : providerToolCallId;
  const name = Buffer.alloc(24 + idBytes.length);
  name.write(chatId.replaceAll("-", ""), 0, 16, "hex");
  name.writeBigUInt64BE(messageId, 16);
  name.set(idBytes, 24);
  return v5(name, TOOL_CALL_UUID_NAMESPACE);
}

// src/contract/errors.ts
var TOOL_CALL_ERRORS = {
  stale_tool_call: "The tool call is in an older message than the chat's latest message.",
  agent_started_after_tool_call: "The workspace agent started after the tool call was committed.",
  input_mismatch: "The request differs from the recorded request for this tool call.",
  tool_call_canceled: "The tool call was canceled.",
};
function toolCallErrorBody(code, detail) {
  const body = { message: TOOL_CALL_ERRORS[code], code };
  if (detail !== void 0) body.detail = detail;
  return body;
}

// src/contract/headers.ts
var CHAT_ID_HEADER = "Coder-Chat-Id";
var MESSAGE_ID_HEADER = "Coder-Tool-Call-Message-Id";
var TOOL_CALL_ID_HEADER = "Coder-Tool-Call-Id";
var AGE_HEADER = "Coder-Tool-Call-Age-Ms";
var RUN_AGE_HEADER = "Coder-Tool-Call-Run-Age-Ms";
var MAX_AGE_MS = 9223372036854;
var UNESCAPED = new Uint8Array(256);
for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~$&+:=@") {
  UNESCAPED[c.charCodeAt(0)] = 1;
}
function unescapeToolCallId(value) {
  const input = Buffer.from(value, "utf8");
  const out = Buffer.alloc(input.length);
  let n = 0;
  for (let i = 0; i < input.length; i++) {
    const b = input[i];
    if (b !== 37) {
      out[n++] = b;
      continue;
    }
    const hi = hexValue(input[i + 1]);
    const lo = hexValue(input[i + 2]);
    if (hi < 0 || lo < 0) return void 0;
    out[n++] = (hi << 4) | lo;
    i += 2;
  }
  return out.subarray(0, n);
}
function hexValue(b) {
  if (b === void 0) return -1;
  if (b >= 48 && b <= 57) return b - 48;
  if (b >= 65 && b <= 70) return b - 65 + 10;
  if (b >= 97 && b <= 102) return b - 97 + 10;
  return -1;
}
var TOOL_CALL_HEADERS = [MESSAGE_ID_HEADER, TOOL_CALL_ID_HEADER, AGE_HEADER];
function values(headers, name) {
  const v = headers[name.toLowerCase()];
  return v === void 0 || v.length === 0 ? void 0 : v;
}
function parseToolCallHeaders(headers) {
  const present = TOOL_CALL_HEADERS.map((name) => values(headers, name));
  for (const [i, v] of present.entries()) {
    if (v !== void 0 && v.length > 1) {
      return { kind: "error", detail: `invalid ${TOOL_CALL_HEADERS[i]} header: multiple values` };
    }
  }
  const [messageValue, idValue, ageValue] = present.map((v) => v?.[0]);
  if (messageValue === void 0 && idValue === void 0 && ageValue === void 0) {
    return { kind: "none" };
  }
  if (messageValue === void 0 || idValue === void 0 || ageValue === void 0) {
    const missing = TOOL_CALL_HEADERS.filter((_, i) => present[i] === void 0);
    return { kind: "error", detail: `incomplete tool call headers: missing ${missing.join(", ")}` };
  }
  const messageId = toMessageId(messageValue);
  if (messageId === void 0) {
    return {
      kind: "error",
      detail: `invalid ${MESSAGE_ID_HEADER} header: ${JSON.stringify(messageValue)} is not a decimal integer from 1 to 9223372036854775807`,
    };
  }
  const toolCallId = unescapeToolCallId(idValue);
  if (toolCallId === void 0) {
    return { kind: "error", detail: `invalid ${TOOL_CALL_ID_HEADER} header: bad %-escape` };
  }
  if (toolCallId.length === 0) {
    return { kind: "error", detail: `invalid ${TOOL_CALL_ID_HEADER} header: empty tool call ID` };
  }
  if (!/^[0-9]+$/.test(ageValue) || BigInt(ageValue) > BigInt(MAX_AGE_MS)) {
    return {
      kind: "error",
      detail: `invalid ${AGE_HEADER} header: ${JSON.stringify(ageValue)} is not a whole number of milliseconds from 0 to ${MAX_AGE_MS}`,
    };
  }
  return { kind: "tool_call", headers: { messageId, toolCallId, ageMs: Number(ageValue) } };
}
function parseChatIdHeader(headers) {
  const v = values(headers, CHAT_ID_HEADER);
  if (v === void 0) return { kind: "none" };
  if (v.length > 1)
    return { kind: "error", detail: `invalid ${CHAT_ID_HEADER} header: multiple values` };
  const chatId = parseChatId(v[0]);
  return chatId === void 0 ? { kind: "none" } : { kind: "chat", chatId };
}

// src/contract/types.ts
import { z } from "zod";
var StartProcessRequest = z.strictObject({
  command: z.string(),
  workdir: z.string().optional(),
  env: z.record(z.string(), z.string()).optional(),
  background: z.boolean().optional(),
});
var SignalProcessRequest = z.strictObject({
  signal: z.enum(["kill", "terminate"]),
});
var EditFilesRequest = z.strictObject({
  files: z.array(
    z.strictObject({
      path: z.string(),
      edits: z.array(
        z.strictObject({
          old_text: z.string(),
          new_text: z.string(),
          replace_all: z.boolean().optional(),
        }),
      ),
    }),
  ),
  include_diff: z.boolean().optional(),
});
var ListDirectoryRequest = z.strictObject({
  path: z.array(z.string()),
  relativity: z.enum(["root", "home"]),
});

// src/contract/assert.ts
function assertNever(x) {
  throw new Error(`Unexpected value: ${JSON.stringify(x)}`);
}

// src/agent/answer.ts
var JSON_CONTENT_TYPE = "application/json";
function jsonAnswer(status, value) {
  return { status, contentType: JSON_CONTENT_TYPE, body: Buffer.from(JSON.stringify(value)) };
}
function errorAnswer(status, message, detail) {
  return jsonAnswer(status, detail === void 0 ? { message } : { message, detail });
}
var AnswerError = class extends Error {
  constructor(status, message, detail) {
    super(message);
    this.status = status;
    this.detail = detail;
  }
  status;
  detail;
  toAnswer() {
    return errorAnswer(this.status, this.message, this.detail);
  }
};

// src/agent/files/read.ts
import { open, stat } from "node:fs/promises";

// src/agent/files/errors.ts
import { isAbsolute } from "node:path";
function parsing(check) {
  try {
    return { ok: true, value: check() };
  } catch (err) {
    if (err instanceof AnswerError) return { ok: false, answer: err.toAnswer() };
    throw err;
  }
}
function parseJson(body) {
  try {
    return JSON.parse(body.toString("utf8"));
  } catch {
    throw new AnswerError(400, "Request body must be valid JSON.");
  }
}
async function answering(run) {
  try {
    return await run();
  } catch (err) {
    if (err instanceof AnswerError) return err.toAnswer();
    return errorAnswer(
      500,
      "The file operation failed unexpectedly. Try again; if it keeps failing, report this error.",
      errorText(err),
    );
  }
}
function errorText(err) {
  return err instanceof Error ? err.message : String(err);
}
function errorCode(err) {
  if (typeof err !== "object" || err === null || !("code" in err)) return void 0;
  return typeof err.code === "string" ? err.code : void 0;
}
function requireAbsolutePath(path2, what) {
  if (path2 === void 0 || path2 === "") {
    throw new AnswerError(
      400,
      `${what} is required. Pass an absolute path such as /home/me/a.txt.`,
    );
  }
  if (path2.includes("\0")) {
    throw new AnswerError(400, `${what} contains a NUL byte. Pass a real absolute path.`);
  }
  if (!isAbsolute(path2)) {
    throw new AnswerError(
      400,
      `${what} must be an absolute path, got ${JSON.stringify(path2)}. Start it with "/".`,
    );
  }
  return path2;
}
function parseCount(value, name) {
  if (value === void 0 || value === "") return void 0;
  const n = Number(value);
  if (!/^[0-9]+$/.test(value) || !Number.isSafeInteger(n)) {
    throw new AnswerError(
      400,
      `The ${name} query parameter must be a non-negative whole number, got ${JSON.stringify(value)}.`,
    );
  }
  return n;
}
function parseBody(schema, body, route) {
  const result = schema.safeParse(body);
  if (result.success && result.data !== void 0) return result.data;
  const issues = (result.error?.issues ?? []).map((i) => `${fieldName(i.path)}: ${i.message}`);
  throw new AnswerError(
    400,
    `The ${route} request body is invalid: ${issues.join("; ")}. Fix the named fields and send it again.`,
  );
}
function fieldName(path2) {
  let name = "";
  for (const key of path2) {
    if (typeof key === "number") name += `[${key}]`;
    else name += name === "" ? String(key) : `.${String(key)}`;
  }
  return name === "" ? "body" : name;
}
function fileSystemError(err, path2, action) {
  if (err instanceof AnswerError) return err;
  switch (errorCode(err) ?? "") {
    case "ENOENT":
      return new AnswerError(
        404,
        `Not found: ${path2}. Check the path, or list its directory to find the right name.`,
      );
    case "EACCES":
    case "EPERM":
      return new AnswerError(
        403,
        `Permission denied ${action} ${path2}. Use a path the agent's user may access.`,
      );
    case "ENOTDIR":
      return new AnswerError(400, `A parent of ${path2} is not a directory. Check the path.`);
    case "EISDIR":
      return new AnswerError(400, `${path2} is a directory, not a file. Pass the path of a file.`);
    case "ENAMETOOLONG":
      return new AnswerError(400, `The path ${path2} is too long. Use a shorter path.`);
    case "ELOOP":
      return new AnswerError(400, `The path ${path2} has a symbolic link loop. Fix the links.`);
    default:
      return new AnswerError(500, `Failed ${action} ${path2}.`, errorText(err));
  }
}

// src/agent/files/read.ts
var OCTET_STREAM = "application/octet-stream";
var CHUNK_BYTES = 1 << 20;
function readFile(query) {
  return answering(async () => {
    const path2 = requireAbsolutePath(query.path, "The path query parameter");
    const offset = parseCount(query.offset, "offset") ?? 0;
    const limit = parseCount(query.limit, "limit") || Infinity;
    await requireRegularFile(path2);
    const handle = await open(path2, "r").catch((err) => {
      throw fileSystemError(err, path2, "reading");
    });
    try {
      const chunks = [];
      let position = offset;
      let remaining = limit;
      while (remaining > 0) {
        const chunk = Buffer.allocUnsafe(Math.min(remaining, CHUNK_BYTES));
        const { bytesRead } = await handle.read(chunk, 0, chunk.length, position);
        if (bytesRead === 0) break;
        chunks.push(chunk.subarray(0, bytesRead));
        position += bytesRead;
        remaining -= bytesRead;
      }
      return { status: 200, contentType: OCTET_STREAM, body: Buffer.concat(chunks) };
    } catch (err) {
      throw fileSystemError(err, path2, "reading");
    } finally {
      await handle.close();
    }
  });
}
async function requireRegularFile(path2) {
  const info2 = await stat(path2).catch((err) => {
    throw fileSystemError(err, path2, "reading");
  });
  if (info2.isDirectory()) {
    throw new AnswerError(
      400,
      `${path2} is a directory, not a file. Use list-directory to see what it contains.`,
    );
  }
  if (!info2.isFile()) {
    throw new AnswerError(
      400,
      `${path2} is not a regular file (it is a device, FIFO or socket). Pass the path of a file.`,
    );
  }
  return info2.size;
}

// src/agent/files/lines.ts
import { readFile as readWholeFile } from "node:fs/promises";
var READ_FILE_LINES_LIMITS = {
  /** A larger file is refused. */
  maxFileSize: 1 << 20,
  /** A longer line is cut to this many bytes, marker included. */
  maxLineBytes: 1024,
  /** The most lines one answer holds, and the default `limit`. */
  maxResponseLines: 2e3,
  /** The most bytes `content` holds. */
  maxResponseBytes: 32768,
};
var LINE_TRUNCATION_MARKER = " ... [truncated]";
function readFileLines(query) {
  return answering(async () => {
    const path2 = requireAbsolutePath(query.path, "The path query parameter");
    const offset = Math.max(parseCount(query.offset, "offset") ?? 1, 1);
    const limit = Math.min(
      parseCount(query.limit, "limit") || READ_FILE_LINES_LIMITS.maxResponseLines,
      READ_FILE_LINES_LIMITS.maxResponseLines,
    );
    let response;
    try {
      response = await numberedLines(path2, offset, limit);
    } catch (err) {
      const failure = fileSystemError(err, path2, "reading");
      const detail = failure.detail === void 0 ? "" : ` (${failure.detail})`;
      response = { success: false, error: failure.message + detail };
    }
    return jsonAnswer(200, response);
  });
}
async function numberedLines(path2, offset, limit) {
  const { maxFileSize, maxResponseBytes } = READ_FILE_LINES_LIMITS;
  const tooLarge = (size) =>
    new AnswerError(
      400,
      `${path2} is ${size} bytes, more than the ${maxFileSize} bytes read-file-lines reads. Use read-file with offset and limit, or grep, to get the part you need.`,
    );
  const statSize = await requireRegularFile(path2);
  if (statSize > maxFileSize) throw tooLarge(statSize);
  const data = await readWholeFile(path2);
  if (data.length > maxFileSize) throw tooLarge(data.length);
  const lines2 = splitLines(data.toString("utf8"));
  if (offset > Math.max(lines2.length, 1)) {
    const has = lines2.length === 0 ? "is empty" : `has ${lines2.length} lines`;
    throw new AnswerError(
      400,
      `Offset ${offset} is past the end of ${path2}, which ${has}. Pass an offset from 1 to ${Math.max(lines2.length, 1)}.`,
    );
  }
  const numbered = [];
  let bytes = 0;
  for (let i = offset - 1; i < lines2.length && numbered.length < limit; i++) {
    const entry = `${i + 1}	${cutLine(lines2[i] ?? "")}`;
    const size = Buffer.byteLength(entry) + (numbered.length > 0 ? 1 : 0);
    if (bytes + size > maxResponseBytes) break;
    numbered.push(entry);
    bytes += size;
  }
  return {
    success: true,
    file_size: data.length,
    total_lines: lines2.length,
    lines_read: numbered.length,
    content: numbered.join("\n"),
  };
}
function splitLines(text) {
  if (text === "") return [];
  const lines2 = (text.endsWith("\n") ? text.slice(0, -1) : text).split("\n");
  return lines2.map((line) => (line.endsWith("\r") ? line.slice(0, -1) : line));
}
function cutLine(line, maxBytes = READ_FILE_LINES_LIMITS.maxLineBytes) {
  if (line.length * 3 <= maxBytes) return line;
  const bytes = Buffer.from(line, "utf8");
  if (bytes.length <= maxBytes) return line;
  let end = maxBytes - Buffer.byteLength(LINE_TRUNCATION_MARKER);
  while (end > 0 && ((bytes[end] ?? 0) & 192) === 128) end--;
  return bytes.subarray(0, end).toString("utf8") + LINE_TRUNCATION_MARKER;
}

// src/agent/files/write.ts
import { mkdir, stat as stat2 } from "node:fs/promises";
import { dirname as dirname2 } from "node:path";

// src/agent/files/atomic.ts
import { randomBytes } from "node:crypto";
import { open as open2, realpath, rename, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
var NEW_FILE_MODE = 420;
var TEMP_FILE_MARK = ".tether-";
async function resolveTarget(path2) {
  try {
    return await realpath(path2);
  } catch (err) {
    if (errorCode(err) === "ENOENT") return path2;
    throw err;
  }
}
async function writeAtomically(path2, data, mode) {
  const temp = join(
    dirname(path2),
    `.${basename(path2).slice(0, 64)}${TEMP_FILE_MARK}${randomBytes(8).toString("hex")}.tmp`,
  );
  let handle;
  let created = false;
  try {
    handle = await open2(temp, "wx", 384);
    created = true;
    await handle.writeFile(data);
    await handle.chmod(mode);
    await handle.sync();
    await handle.close();
    handle = void 0;
    await rename(temp, path2);
  } catch (err) {
    await handle?.close().catch(() => void 0);
    if (created) await rm(temp, { force: true }).catch(() => void 0);
    throw err;
  }
}

// src/agent/files/write.ts
function writeFile(path2, body) {
  return answering(async () => {
    const requested = requireAbsolutePath(path2, "The path query parameter");
    try {
      const target = await resolveTarget(requested);
      const mode = await existingMode(target);
      await mkdir(dirname2(target), { recursive: true }).catch((err) => {
        const code = errorCode(err);
        if (code === "EEXIST" || code === "ENOTDIR") {
          throw new AnswerError(400, `A parent of ${requested} is a file, not a directory.`);
        }
        throw err;
      });
      await writeAtomically(target, body, mode ?? NEW_FILE_MODE);
    } catch (err) {
      throw fileSystemError(err, requested, "writing");
    }
    const answer = {
      message: `Successfully wrote to ${JSON.stringify(requested)}`,
    };
    return jsonAnswer(200, answer);
  });
}
function parseWritePath(path2) {
  return parsing(() => requireAbsolutePath(path2, "The path query parameter"));
}
async function existingMode(path2) {
  try {
    const info2 = await stat2(path2);
    if (info2.isDirectory()) {
      throw new AnswerError(400, `${path2} is a directory; write-file only writes files.`);
    }
    return info2.mode & 4095;
  } catch (err) {
    if (errorCode(err) === "ENOENT") return void 0;
    throw err;
  }
}

// src/agent/files/edit.ts
import { readFile as readFile2, stat as stat3 } from "node:fs/promises";
import { normalize } from "node:path";

// src/agent/files/diff.ts
var CONTEXT_LINES = 3;
var MAX_ALIGN_CELLS = 4e6;
function unifiedDiff(path2, before, after) {
  if (before === after) return "";
  const ops = diffLines(lines(before), lines(after));
  let out = `--- ${path2}
+++ ${path2}
`;
  for (const [from, to] of hunkRanges(ops)) out += hunk(ops, from, to);
  return out;
}
function lines(text) {
  return text === "" ? [] : text.split(/(?<=\n)/);
}
function diffLines(a, b) {
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (
    tail < a.length - head &&
    tail < b.length - head &&
    a[a.length - 1 - tail] === b[b.length - 1 - tail]
  ) {
    tail++;
  }
  const same = (line) => ({ kind: " ", line });
  return [
    ...a.slice(0, head).map(same),
    ...alignMiddle(a.slice(head, a.length - tail), b.slice(head, b.length - tail)),
    ...a.slice(a.length - tail).map(same),
  ];
}
function alignMiddle(a, b) {
  const n = a.length;
  const m = b.length;
  if (n === 0 || m === 0 || n * m > MAX_ALIGN_CELLS) {
    return [...a.map((line) => ({ kind: "-", line })), ...b.map((line) => ({ kind: "+", line }))];
  }
  const width = m + 1;
  const common = new Uint32Array((n + 1) * width);
  const at = (i2, j2) => common[i2 * width + j2] ?? 0;
  for (let i2 = n - 1; i2 >= 0; i2--) {
    for (let j2 = m - 1; j2 >= 0; j2--) {
      common[i2 * width + j2] =
        a[i2] === b[j2] ? at(i2 + 1, j2 + 1) + 1 : Math.max(at(i2 + 1, j2), at(i2, j2 + 1));
    }
  }
  const ops = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      ops.push({ kind: " ", line: a[i++] ?? "" });
      j++;
    } else if (j >= m || (i < n && at(i + 1, j) >= at(i, j + 1))) {
      ops.push({ kind: "-", line: a[i++] ?? "" });
    } else {
      ops.push({ kind: "+", line: b[j++] ?? "" });
    }
  }
  return ops;
}
function hunkRanges(ops) {
  const shown = new Array(ops.length).fill(false);
  ops.forEach((op, i) => {
    if (op.kind === " ") return;
    const end = Math.min(ops.length - 1, i + CONTEXT_LINES);
    for (let k = Math.max(0, i - CONTEXT_LINES); k <= end; k++) shown[k] = true;
  });
  const ranges = [];
  for (let i = 0; i < ops.length; i++) {
    if (!shown[i]) continue;
    const from = i;
    while (i < ops.length && shown[i]) i++;
    ranges.push([from, i]);
  }
  return ranges;
}
function hunk(ops, from, to) {
  let oldBefore = 0;
  let newBefore = 0;
  for (const op of ops.slice(0, from)) {
    if (op.kind !== "+") oldBefore++;
    if (op.kind !== "-") newBefore++;
  }
  const body = ops.slice(from, to);
  const oldCount = body.filter((op) => op.kind !== "+").length;
  const newCount = body.filter((op) => op.kind !== "-").length;
  const oldStart = oldCount === 0 ? oldBefore : oldBefore + 1;
  const newStart = newCount === 0 ? newBefore : newBefore + 1;
  let out = `@@ -${oldStart},${oldCount} +${newStart},${newCount} @@
`;
  for (const op of body) {
    out += op.kind + op.line;
    if (!op.line.endsWith("\n")) out += "\n\\ No newline at end of file\n";
  }
  return out;
}

// src/agent/files/match.ts
function applyEdit(text, edit) {
  const exact = occurrences(text, edit.old_text);
  if (exact.length > 0) {
    return decide("exact", exact, edit, (starts) =>
      replaceSpans(text, starts, edit.old_text.length, edit.new_text),
    );
  }
  const lines2 = splitKeepingEol(text);
  const wanted = splitKeepingEol(edit.old_text).map((line) => line.text);
  if (wanted.every((line) => line.trim() === "")) return { status: "not_found" };
  for (const [pass, normalize2] of LINE_PASSES) {
    const starts = lineMatches(lines2, wanted, normalize2);
    if (starts.length > 0) {
      return decide(pass, starts, edit, (chosen) =>
        replaceLines(lines2, chosen, wanted.length, edit.new_text),
      );
    }
  }
  return { status: "not_found" };
}
var LINE_PASSES = [
  ["trailing_whitespace", (line) => line.trimEnd()],
  ["surrounding_whitespace", (line) => line.trim()],
];
function decide(pass, starts, edit, replace) {
  if (starts.length > 1 && edit.replace_all !== true) {
    return { status: "ambiguous", pass, matches: starts.length };
  }
  return { status: "applied", text: replace(starts), pass };
}
function occurrences(haystack, needle) {
  const starts = [];
  for (let at = haystack.indexOf(needle); at !== -1; at = haystack.indexOf(needle, at + 1)) {
    starts.push(at);
  }
  return starts;
}
function nonOverlapping(starts, length) {
  const chosen = [];
  let free = 0;
  for (const start of starts) {
    if (start < free) continue;
    chosen.push(start);
    free = start + length;
  }
  return chosen;
}
function replaceSpans(text, starts, length, replacement) {
  let out = "";
  let copied = 0;
  for (const start of nonOverlapping(starts, length)) {
    out += text.slice(copied, start) + replacement;
    copied = start + length;
  }
  return out + text.slice(copied);
}
function splitKeepingEol(text) {
  const lines2 = [];
  let start = 0;
  while (start < text.length) {
    const nl = text.indexOf("\n", start);
    if (nl === -1) {
      lines2.push({ text: text.slice(start), eol: "" });
      break;
    }
    const crlf = nl > start && text[nl - 1] === "\r";
    lines2.push({ text: text.slice(start, crlf ? nl - 1 : nl), eol: crlf ? "\r\n" : "\n" });
    start = nl + 1;
  }
  return lines2;
}
function lineMatches(lines2, wanted, normalize2) {
  const target = wanted.map(normalize2);
  const starts = [];
  for (let i = 0; i + target.length <= lines2.length; i++) {
    if (target.every((line, j) => normalize2(lines2[i + j]?.text ?? "") === line)) starts.push(i);
  }
  return starts;
}
function replaceLines(lines2, starts, count, newText) {
  const eol = usualEol(lines2);
  const added = splitKeepingEol(newText).map((line) => line.text);
  const out = [];
  let copied = 0;
  for (const start of nonOverlapping(starts, count)) {
    out.push(...lines2.slice(copied, start));
    const lastEol = lines2[start + count - 1]?.eol ?? eol;
    added.forEach((text, k) => out.push({ text, eol: k === added.length - 1 ? lastEol : eol }));
    copied = start + count;
  }
  out.push(...lines2.slice(copied));
  return out.map((line) => line.text + line.eol).join("");
}
function usualEol(lines2) {
  let crlf = 0;
  let lf = 0;
  for (const line of lines2) {
    if (line.eol === "\r\n") crlf++;
    else if (line.eol === "\n") lf++;
  }
  return crlf > lf ? "\r\n" : "\n";
}

// src/agent/files/edit.ts
function parseEditFilesRequest(body) {
  return parsing(() => checkRequest(parseJson(body)));
}
function applyEdits(request) {
  return answering(() => applyChecked(request));
}
function checkRequest(body) {
  const request = parseBody(EditFilesRequest, body, "edit-files");
  checkShape(request);
  return request;
}
async function applyChecked(request) {
  checkShape(request);
  const planned = [];
  for (const [i, file] of request.files.entries()) planned.push(await planFile(file, i + 1));
  refuseAliases(planned);
  await writeAll(planned);
  if (request.include_diff !== true) return jsonAnswer(200, {});
  const response = {
    files: planned.map((f) => ({ path: f.path, diff: unifiedDiff(f.path, f.before, f.after) })),
  };
  return jsonAnswer(200, response);
}
function checkShape(request) {
  if (request.files.length === 0) {
    throw new AnswerError(
      400,
      "No files to edit. Send at least one entry in files, each with a path and its edits.",
    );
  }
  const seen = /* @__PURE__ */ new Map();
  request.files.forEach((file, i) => {
    const n = i + 1;
    const path2 = requireAbsolutePath(file.path, `The path of file ${n}`);
    const first = seen.get(normalize(path2));
    if (first !== void 0) {
      throw new AnswerError(
        400,
        `File ${n} repeats the path ${path2} of file ${first}. List each file once and put all of its edits in its edits array.`,
      );
    }
    seen.set(normalize(path2), n);
    if (file.edits.length === 0) {
      throw new AnswerError(
        400,
        `File ${n} (${path2}) has no edits. Add an edit with old_text and new_text, or remove the file.`,
      );
    }
    file.edits.forEach((edit, j) => {
      if (edit.old_text !== "") return;
      throw new AnswerError(
        400,
        `old_text is empty in ${path2} (file ${n}, edit ${j + 1}). Copy the exact text to replace; to write a whole file, use write-file.`,
      );
    });
  });
}
async function planFile(file, n) {
  const { path: path2 } = file;
  let target;
  let mode;
  let data;
  try {
    target = await resolveTarget(path2);
    const info2 = await stat3(target);
    if (!info2.isFile()) {
      const what = info2.isDirectory() ? "a directory" : "not a regular file";
      throw new AnswerError(400, `${path2} (file ${n}) is ${what}. Pass the path of a text file.`);
    }
    mode = info2.mode & 4095;
    data = await readFile2(target);
  } catch (err) {
    if (errorCode(err) === "ENOENT") {
      throw new AnswerError(
        404,
        `${path2} (file ${n}) does not exist. edit-files changes existing files only; check the path, or create the file with write-file.`,
      );
    }
    throw fileSystemError(err, path2, "reading");
  }
  const before = data.toString("utf8");
  if (!Buffer.from(before, "utf8").equals(data)) {
    throw new AnswerError(
      400,
      `${path2} (file ${n}) is not valid UTF-8 text, so edit-files cannot change it safely. Use write-file to replace it.`,
    );
  }
  let after = before;
  for (const [j, edit] of file.edits.entries()) {
    const outcome = applyEdit(after, edit);
    const where = `${path2} (file ${n}, edit ${j + 1})`;
    const order =
      j === 0
        ? void 0
        : `Edits of one file apply in order: edit ${j + 1} searched the text as edits 1-${j} left it.`;
    switch (outcome.status) {
      case "applied":
        after = outcome.text;
        break;
      case "not_found":
        throw new AnswerError(
          400,
          `old_text was not found in ${where}. Read the file again and copy the text exactly.`,
          order,
        );
      case "ambiguous":
        throw new AnswerError(
          400,
          `old_text matches ${outcome.matches} places in ${where}. Add surrounding lines to make it unique, or set replace_all to change every match.`,
          [PASS_NOTES[outcome.pass], order].filter((s) => s !== void 0).join(" "),
        );
      default: {
        const unhandled = outcome;
        throw new Error(`unhandled edit outcome ${JSON.stringify(unhandled)}`);
      }
    }
  }
  return { n, path: path2, target, mode, before, after };
}
var PASS_NOTES = {
  exact: "The matches are exact.",
  trailing_whitespace: "The matches are whole lines, ignoring trailing whitespace.",
  surrounding_whitespace: "The matches are whole lines, ignoring leading and trailing whitespace.",
};
function refuseAliases(planned) {
  const seen = /* @__PURE__ */ new Map();
  for (const file of planned) {
    const first = seen.get(file.target);
    if (first !== void 0) {
      throw new AnswerError(
        400,
        `File ${file.n} (${file.path}) is the same file as file ${first.n} (${first.path}). List each file once and put all of its edits in its edits array.`,
      );
    }
    seen.set(file.target, file);
  }
}
async function writeAll(planned) {
  const written = [];
  for (const file of planned) {
    if (file.after === file.before) continue;
    try {
      await writeAtomically(file.target, file.after, file.mode);
    } catch (err) {
      const failure = fileSystemError(err, file.path, "writing");
      const done =
        written.length === 0 ? "No file was changed." : `Already written: ${written.join(", ")}.`;
      throw new AnswerError(
        failure.status,
        `Failed to write ${file.path} (file ${file.n}). ${done}`,
        failure.detail === void 0 ? failure.message : `${failure.message} ${failure.detail}`,
      );
    }
    written.push(file.path);
  }
}

// src/agent/files/list.ts
import { homedir } from "node:os";
import { join as join2 } from "node:path";
import { readdir, stat as stat4 } from "node:fs/promises";
function listDirectory(body, homeDir = homedir()) {
  return answering(async () => {
    const request = parseBody(ListDirectoryRequest, body, "list-directory");
    const dir = requireAbsolutePath(
      join2(base(request.relativity, homeDir), ...request.path),
      "The directory path",
    );
    const info2 = await stat4(dir).catch((err) => {
      throw fileSystemError(err, dir, "listing");
    });
    if (!info2.isDirectory()) {
      throw new AnswerError(400, `${dir} is not a directory. Use read-file-lines to read a file.`);
    }
    const entries = await readdir(dir, { withFileTypes: true }).catch((err) => {
      throw fileSystemError(err, dir, "listing");
    });
    const contents = await Promise.all(
      entries.map(async (entry) => {
        const path2 = join2(dir, entry.name);
        const isDir = entry.isDirectory() || (entry.isSymbolicLink() && (await isDirectory(path2)));
        return { name: entry.name, absolute_path_string: path2, is_dir: isDir };
      }),
    );
    contents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const response = {
      absolute_path: dir.split("/").filter((part) => part !== ""),
      absolute_path_string: dir,
      contents,
    };
    return jsonAnswer(200, response);
  });
}
function base(relativity, homeDir) {
  switch (relativity) {
    case "root":
      return "/";
    case "home":
      return homeDir;
    default: {
      const unhandled = relativity;
      throw new Error(`unhandled relativity ${String(unhandled)}`);
    }
  }
}
async function isDirectory(path2) {
  try {
    return (await stat4(path2)).isDirectory();
  } catch {
    return false;
  }
}

// src/agent/processes/process.ts
import { spawn } from "node:child_process";

// src/agent/processes/output.ts
var HEAD_BYTES = 16 * 1024;
var TAIL_BYTES = 16 * 1024;
var MAX_LINE_BYTES = 2048;
var LINE_TRUNCATION_SUFFIX = " ... [truncated]";
var SUFFIX = Buffer.from(LINE_TRUNCATION_SUFFIX);
var LINE_KEEP_BYTES = MAX_LINE_BYTES - SUFFIX.length;
var NEWLINE = 10;
var NEWLINE_BYTES = Buffer.from("\n");
var OutputBuffer = class {
  /** Allocated on the first write; bytes [0, #headLen) are the output's first bytes. */
  #head;
  #headLen = 0;
  /** Allocated when the head is full; holds the last bytes, oldest at #tailPos once full. */
  #tail;
  #tailPos = 0;
  #tailFull = false;
  /** Every byte ever written, kept or not. */
  #total = 0;
  /** Bytes written so far, kept or not. */
  get totalBytes() {
    return this.#total;
  }
  /** Appends a chunk: copies at most HEAD_BYTES + TAIL_BYTES of it, never scans it. */
  write(chunk) {
    const n = chunk.length;
    if (n === 0) return;
    this.#total += n;
    let off = 0;
    if (this.#headLen < HEAD_BYTES) {
      this.#head ??= Buffer.allocUnsafe(HEAD_BYTES);
      off = Math.min(HEAD_BYTES - this.#headLen, n);
      this.#head.set(chunk.subarray(0, off), this.#headLen);
      this.#headLen += off;
      if (off === n) return;
    }
    this.#writeTail(chunk, off);
  }
  #writeTail(chunk, off) {
    const tail = (this.#tail ??= Buffer.allocUnsafe(TAIL_BYTES));
    const rest = chunk.length - off;
    if (rest >= TAIL_BYTES) {
      tail.set(chunk.subarray(chunk.length - TAIL_BYTES), 0);
      this.#tailPos = 0;
      this.#tailFull = true;
      return;
    }
    const first = Math.min(TAIL_BYTES - this.#tailPos, rest);
    tail.set(chunk.subarray(off, off + first), this.#tailPos);
    this.#tailPos += first;
    if (this.#tailPos === TAIL_BYTES) {
      this.#tailPos = 0;
      this.#tailFull = true;
    }
    if (first < rest) {
      tail.set(chunk.subarray(off + first), 0);
      this.#tailPos = rest - first;
    }
  }
  /** The tail's bytes, oldest first (a copy when the ring has wrapped). */
  #tailBytes() {
    if (!this.#tail) return Buffer.alloc(0);
    if (!this.#tailFull) return this.#tail.subarray(0, this.#tailPos);
    return Buffer.concat([
      this.#tail.subarray(this.#tailPos),
      this.#tail.subarray(0, this.#tailPos),
    ]);
  }
  /**
   * The output as the contract shows it: long lines capped in head and tail separately,
   * then head + tail, or head + omission marker + tail when bytes were dropped. Decoded as
   * UTF-8 here; `retained_bytes` is the UTF-8 byte length of the returned string.
   */
  render() {
    const head = capLines(this.#head ? this.#head.subarray(0, this.#headLen) : Buffer.alloc(0));
    const rawTail = this.#tailBytes();
    const tail = capLines(rawTail);
    const omitted = this.#total - this.#headLen - rawTail.length;
    if (omitted === 0) {
      return { output: Buffer.concat([head, tail]).toString("utf8") };
    }
    const output =
      head.toString("utf8") +
      `

... [omitted ${omitted} bytes] ...

` +
      tail.toString("utf8");
    return {
      output,
      truncated: {
        original_bytes: this.#total,
        retained_bytes: Buffer.byteLength(output, "utf8"),
        omitted_bytes: omitted,
        strategy: "head_tail",
      },
    };
  }
};
function capLines(bytes) {
  if (bytes.length <= MAX_LINE_BYTES) return bytes;
  const parts = [];
  let changed = false;
  let start = 0;
  while (start < bytes.length) {
    const nl = bytes.indexOf(NEWLINE, start);
    const end = nl === -1 ? bytes.length : nl;
    if (end - start > MAX_LINE_BYTES) {
      parts.push(bytes.subarray(start, start + LINE_KEEP_BYTES), SUFFIX);
      changed = true;
    } else {
      parts.push(bytes.subarray(start, end));
    }
    if (nl === -1) break;
    parts.push(NEWLINE_BYTES);
    start = nl + 1;
  }
  return changed ? Buffer.concat(parts) : bytes;
}

// src/agent/processes/process.ts
var TrackedProcess = class _TrackedProcess {
  id;
  /** The chat it was started for, or undefined; never changes. */
  chatId;
  command;
  cwd;
  background;
  startedAt;
  startedAtUnix;
  seq;
  #pid;
  #child;
  #buffer;
  #clock;
  #exitGraceMs;
  /** Set by the shell's 'exit' event. */
  #shellSignaled;
  #shellCode = 0;
  #graceTimer;
  /** A cancel sent SIGKILL while the process was running. */
  #cancelKillSent = false;
  #exit;
  /** Called once at exit; each removes itself. */
  #waiters = /* @__PURE__ */ new Set();
  constructor(o, child, pid, buffer) {
    this.id = o.id;
    this.chatId = o.chatId;
    this.command = o.command;
    this.cwd = o.cwd;
    this.background = o.background;
    this.startedAt = o.startedAt;
    this.startedAtUnix = Math.floor(Date.now() / 1e3);
    this.seq = o.seq;
    this.#pid = pid;
    this.#child = child;
    this.#buffer = buffer;
    this.#clock = o.clock;
    this.#exitGraceMs = o.exitGraceMs;
  }
  /** Spawns the shell and resolves once it has started ('spawn') or failed ('error'). */
  static spawn(o) {
    const buffer = new OutputBuffer();
    let child;
    try {
      child = spawn("sh", ["-c", o.command], {
        cwd: o.cwd,
        env: o.env,
        stdio: ["ignore", "pipe", "pipe"],
        detached: true,
      });
    } catch (err) {
      return Promise.resolve({ ok: false, detail: describe(err, o.cwd) });
    }
    const onData = (chunk) => buffer.write(chunk);
    for (const stream of [child.stdout, child.stderr]) {
      stream?.on("data", onData);
      stream?.on("error", () => {});
    }
    return new Promise((resolve) => {
      const onError = (err) => {
        child.off("spawn", onSpawn);
        resolve({ ok: false, detail: describe(err, o.cwd) });
      };
      const onSpawn = () => {
        child.off("error", onError);
        child.on("error", () => {});
        const pid = child.pid;
        if (pid === void 0) {
          resolve({ ok: false, detail: "The process has no pid." });
          return;
        }
        const proc = new _TrackedProcess(o, child, pid, buffer);
        child.once("exit", (code, signal) => proc.#onShellExit(code, signal));
        child.once("close", () => proc.#finish(false));
        resolve({ ok: true, proc });
      };
      child.once("error", onError);
      child.once("spawn", onSpawn);
    });
  }
  /** False once the process counts as exited. */
  get running() {
    return this.#exit === void 0;
  }
  get exitCode() {
    return this.#exit?.code;
  }
  /** Clock ms of the exit. */
  get exitedAt() {
    return this.#exit?.at;
  }
  get exitedAtUnix() {
    return this.#exit?.atUnix;
  }
  /** True only when a cancel's kill ended the process; never changes once true. */
  get canceled() {
    return this.#exit?.canceled ?? false;
  }
  /** Counted as exited by the grace timer: members of its group may still be alive. */
  get mayLinger() {
    return this.#exit?.byGrace ?? false;
  }
  render() {
    return this.#buffer.render();
  }
  /** Sends `sig` to the whole process group. A group that is gone is not an error. */
  signalGroup(sig) {
    try {
      process.kill(-this.#pid, sig);
    } catch {}
  }
  /** The stop rule's kill: SIGKILL the group, remembering that a cancel sent it. */
  killForCancel() {
    if (!this.running) return;
    this.#cancelKillSent = true;
    this.signalGroup("SIGKILL");
  }
  /** Resolves when the process counts as exited, `signal` aborts, or `maxMs` (if set) pass. */
  waitExited(signal, maxMs) {
    if (!this.running || signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        timer?.cancel();
        signal?.removeEventListener("abort", done);
        this.#waiters.delete(done);
        resolve();
      };
      const timer = maxMs === void 0 ? void 0 : this.#clock.setTimer(maxMs, done);
      signal?.addEventListener("abort", done, { once: true });
      this.#waiters.add(done);
    });
  }
  #onShellExit(code, signal) {
    this.#shellSignaled = signal !== null;
    this.#shellCode = code ?? -1;
    if (this.#exit) return;
    this.#graceTimer = this.#clock.setTimer(this.#exitGraceMs, () => this.#finish(true));
  }
  /** Records the exit once: on 'close' (shell exited, pipes at EOF) or the grace timer. */
  #finish(byGrace) {
    if (this.#exit || this.#shellSignaled === void 0) return;
    this.#graceTimer?.cancel();
    const signaled = this.#shellSignaled;
    this.#exit = {
      code: signaled ? -1 : this.#shellCode,
      at: this.#clock.now(),
      atUnix: Math.floor(Date.now() / 1e3),
      byGrace,
      canceled: this.#cancelKillSent && signaled,
    };
    if (byGrace) {
      this.#child.stdout?.destroy();
      this.#child.stderr?.destroy();
    }
    for (const wake of [...this.#waiters]) wake();
  }
};
function describe(err, cwd) {
  const message = err instanceof Error ? err.message : String(err);
  return `${message} (working directory "${cwd}")`;
}

// src/agent/processes/manager.ts
var OUTPUT_WAIT_MAX_MS = 3e5;
var REAP_AFTER_MS = 3e5;
var LIST_MAX = 10;
var CLOSE_WAIT_MS = 5e3;
var DEFAULT_EXIT_GRACE_MS = 250;
var ProcessManager = class {
  #clock;
  #defaultDir;
  #env;
  #exitGraceMs;
  /** Registered processes, by id, until a list reaps them. */
  #procs = /* @__PURE__ */ new Map();
  /**
   * Ids being spawned. With #procs it refuses a duplicate id; once a process is reaped its id
   * could only come back through a tool call the record store already refuses, so nothing
   * here grows with the number of processes ever started.
   */
  #spawning = /* @__PURE__ */ new Set();
  #seq = 0;
  #closed = false;
  constructor(o) {
    this.#clock = o.clock;
    this.#defaultDir = o.defaultDir;
    this.#env = { ...(o.env ?? process.env) };
    this.#exitGraceMs = o.exitGraceMs ?? DEFAULT_EXIT_GRACE_MS;
  }
  /** Spawns `sh -c command` in its own process group; registers it only once it started. */
  async start(o) {
    if (this.#closed) return failed("The process manager is closed.");
    if (this.#procs.has(o.id) || this.#spawning.has(o.id)) {
      return failed(`Process "${o.id}" already exists.`);
    }
    this.#spawning.add(o.id);
    const env = { ...this.#env, ...o.env };
    if (o.chatId !== void 0) env.CODER_CHAT_ID = o.chatId;
    const res = await TrackedProcess.spawn({
      id: o.id,
      chatId: o.chatId,
      command: o.command,
      cwd: o.workdir ?? this.#defaultDir,
      env,
      background: o.background ?? false,
      startedAt: o.startedAt,
      seq: this.#seq++,
      clock: this.#clock,
      exitGraceMs: this.#exitGraceMs,
    });
    this.#spawning.delete(o.id);
    if (!res.ok) return failed(res.detail);
    if (this.#closed) res.proc.signalGroup("SIGKILL");
    this.#procs.set(o.id, res.proc);
    return { ok: true, id: o.id };
  }
  /**
   * The process's output and state, after waiting for its exit when `wait` (until exit,
   * `signal` aborts, or OUTPUT_WAIT_MAX_MS). Undefined for an unknown or foreign id.
   */
  async output(id, chatId, o) {
    const proc = this.#visible(id, chatId);
    if (!proc) return void 0;
    if (o.wait) await proc.waitExited(o.signal, OUTPUT_WAIT_MAX_MS);
    const { output, truncated } = proc.render();
    return {
      output,
      ...(truncated && { truncated }),
      running: proc.running,
      ...(proc.exitCode !== void 0 && { exit_code: proc.exitCode }),
      command: proc.command,
    };
  }
  /**
   * Reaps processes that exited more than REAP_AFTER_MS ago (unless `isCurrent(id)`), then
   * lists those the caller may see: running first, then newest first, at most LIST_MAX.
   */
  list(chatId, isCurrent) {
    const now = this.#clock.now();
    for (const [id, proc] of this.#procs) {
      const exitedAt = proc.exitedAt;
      if (exitedAt !== void 0 && now - exitedAt > REAP_AFTER_MS && !isCurrent(id, proc.chatId)) {
        this.#procs.delete(id);
      }
    }
    return [...this.#procs.values()]
      .filter((p) => chatId === void 0 || p.chatId === chatId)
      .sort(
        (a, b) =>
          Number(b.running) - Number(a.running) || b.startedAt - a.startedAt || b.seq - a.seq,
      )
      .slice(0, LIST_MAX)
      .map(info);
  }
  /** `kill` → SIGKILL, `terminate` → SIGTERM to the process group. Never marks `canceled`. */
  signal(id, chatId, sig) {
    const proc = this.#visible(id, chatId);
    if (!proc) return "not_found";
    if (!proc.running) return "not_running";
    proc.signalGroup(sig === "kill" ? "SIGKILL" : "SIGTERM");
    return "ok";
  }
  /**
   * The cancel's stop rule. A process running with run age below `stopIfRunAgeBelowMs`
   * (negative counts as 0, so 0 or less never stops) gets SIGKILL on its group, and this
   * waits for it to count as exited or for `signal` to abort. Undefined when no such process.
   * Isolation is the caller's: the id is derived from the cancel request's own chat.
   */
  async stopToolCallProcess(id, stopIfRunAgeBelowMs, signal) {
    const proc = this.#procs.get(id);
    if (!proc) return void 0;
    const runAge = this.#clock.now() - proc.startedAt;
    const threshold = Math.max(0, stopIfRunAgeBelowMs);
    if (proc.running && runAge < threshold) {
      proc.killForCancel();
      await proc.waitExited(signal);
    }
    const { output, truncated } = proc.render();
    return {
      running: proc.running,
      canceled: proc.canceled,
      output,
      ...(truncated && { truncated }),
      ...(proc.exitCode !== void 0 && { exit_code: proc.exitCode }),
      run_age_ms: Math.floor(Math.max(0, runAge)),
    };
  }
  /** Agent shutdown: SIGKILL every process group that may still live, wait for the exits. */
  async closeAll() {
    this.#closed = true;
    const procs = [...this.#procs.values()];
    for (const p of procs) {
      if (p.running || p.mayLinger) p.signalGroup("SIGKILL");
    }
    await Promise.all(procs.map((p) => p.waitExited(void 0, CLOSE_WAIT_MS)));
  }
  /** The process if the caller may see it: any process for an operator, else its chat's. */
  #visible(id, chatId) {
    const proc = this.#procs.get(id);
    if (!proc || (chatId !== void 0 && proc.chatId !== chatId)) return void 0;
    return proc;
  }
};
function failed(detail) {
  return { ok: false, message: "Failed to start process.", detail };
}
function info(p) {
  const i = {
    id: p.id,
    command: p.command,
    workdir: p.cwd,
    background: p.background,
    running: p.running,
    started_at_unix: p.startedAtUnix,
  };
  if (p.exitCode !== void 0) i.exit_code = p.exitCode;
  if (p.exitedAtUnix !== void 0) i.exited_at_unix = p.exitedAtUnix;
  return i;
}

// src/agent/toolcalls/middleware.ts
import { createHash } from "node:crypto";

// src/agent/toolcalls/store.ts
var AGE_MARGIN_MS = 2e3;
var ToolCallRecord = class {
  constructor(inputHash2, createdAt, canceled) {
    this.inputHash = inputHash2;
    this.createdAt = createdAt;
    this.canceled = canceled;
  }
  inputHash;
  createdAt;
  canceled;
  /** The answer, written once, before `done` resolves. */
  #result;
  #resolve;
  /** Resolves with the recorded answer once the one run publishes it. */
  done = new Promise((resolve) => (this.#resolve = resolve));
  get result() {
    return this.#result;
  }
  /** Publishes the run's answer; later calls are ignored (the first answer wins). */
  publish(answer) {
    if (this.#result !== void 0) return;
    this.#result = answer;
    this.#resolve(answer);
  }
};
function recordKey(toolCallId) {
  return toolCallId.toString("latin1");
}
var ToolCallStore = class {
  clock;
  /** The agent start: when this store began keeping records. */
  startedAt;
  #chats = /* @__PURE__ */ new Map();
  constructor(clock) {
    this.clock = clock;
    this.startedAt = clock.now();
  }
  /**
   * The decision table, in its order. `now` is the instant the request entered.
   * `agentUptime - AGE_MARGIN_MS <= age` is the "started after" test, written without
   * `age + margin` so the largest age cannot overflow.
   */
  decide(key, ageMs, now) {
    const chat = this.#chats.get(key.chatId);
    if (chat && key.messageId < chat.latestMessageId)
      return { kind: "refused", code: "stale_tool_call" };
    const record =
      chat && key.messageId === chat.latestMessageId
        ? chat.records.get(recordKey(key.toolCallId))
        : void 0;
    if (record) return { kind: "found", record };
    if (now - this.startedAt - AGE_MARGIN_MS <= Math.max(ageMs, 0)) {
      return { kind: "refused", code: "agent_started_after_tool_call" };
    }
    return { kind: "not_found" };
  }
  /** Start, edit or write: run once, replay, or refuse. */
  beginRun(key, inputHash2, ageMs, now) {
    const d = this.decide(key, ageMs, now);
    switch (d.kind) {
      case "refused":
        return d;
      case "found":
        if (d.record.canceled) return { kind: "refused", code: "tool_call_canceled" };
        if (!d.record.inputHash.equals(inputHash2))
          return { kind: "refused", code: "input_mismatch" };
        return { kind: "replay", record: d.record };
      case "not_found":
        return {
          kind: "run",
          record: this.#insert(key, new ToolCallRecord(inputHash2, now, false)),
        };
      default:
        return assertNever(d);
    }
  }
  /** Cancel: a call never received is recorded as canceled, so a start in transit never runs. */
  beginCancel(key, ageMs, now) {
    const d = this.decide(key, ageMs, now);
    switch (d.kind) {
      case "refused":
        return d;
      case "found":
        return d.record.canceled
          ? { kind: "never_started" }
          : { kind: "started", record: d.record };
      case "not_found":
        this.#insert(key, new ToolCallRecord(Buffer.alloc(0), now, true));
        return { kind: "never_started" };
      default:
        return assertNever(d);
    }
  }
  /** The key is in its chat's latest message and has a record. */
  current(key) {
    const chat = this.#chats.get(key.chatId);
    return (
      chat !== void 0 &&
      chat.latestMessageId === key.messageId &&
      chat.records.has(recordKey(key.toolCallId))
    );
  }
  /**
   * The process `processId` of `chatId` was started by a tool call that is still current
   * (CONTRACT.md 7, reaping). Scans only the chat's latest message, so it costs no index.
   */
  isCurrentProcess(processId, chatId) {
    const chat = chatId === void 0 ? void 0 : this.#chats.get(chatId);
    if (!chat) return false;
    for (const id of chat.records.keys()) {
      if (toolCallUuid(chatId, chat.latestMessageId, Buffer.from(id, "latin1")) === processId)
        return true;
    }
    return false;
  }
  /** Number of chats with state; state grows with chats, never with tool calls. */
  get chatCount() {
    return this.#chats.size;
  }
  /** Inserting for a newer message drops every older record of the chat; only inserts raise it. */
  #insert(key, record) {
    let chat = this.#chats.get(key.chatId);
    if (!chat || key.messageId > chat.latestMessageId) {
      chat = { latestMessageId: key.messageId, records: /* @__PURE__ */ new Map() };
      this.#chats.set(key.chatId, chat);
    }
    chat.records.set(recordKey(key.toolCallId), record);
    return record;
  }
};
function contextFor(key) {
  return { key, uuid: toolCallUuid(key.chatId, key.messageId, key.toolCallId) };
}

// src/agent/toolcalls/middleware.ts
var HANDLER_FAILED_MESSAGE = "The tool call handler failed.";
function distinctHeaders(raw) {
  if (raw.headersDistinct) return raw.headersDistinct;
  const out = {};
  for (let i = 0; i < raw.rawHeaders.length; i += 2) {
    (out[raw.rawHeaders[i].toLowerCase()] ??= []).push(raw.rawHeaders[i + 1]);
  }
  return out;
}
function requestState(request) {
  return request.agent;
}
function inputHash(method, rawUrl, body) {
  const q = rawUrl.indexOf("?");
  const path2 = q < 0 ? rawUrl : rawUrl.slice(0, q);
  const query = q < 0 ? "" : rawUrl.slice(q + 1);
  const h = createHash("sha256");
  for (const part of [Buffer.from(method), Buffer.from(path2), Buffer.from(query), body]) {
    const len = Buffer.alloc(8);
    len.writeBigUInt64BE(BigInt(part.length));
    h.update(len).update(part);
  }
  return h.digest();
}
async function runAndPublish(record, run, toolCall) {
  let answer;
  try {
    answer = await run(toolCall);
  } catch {
    answer = jsonAnswer(500, { message: HANDLER_FAILED_MESSAGE });
  }
  record.publish(answer);
}
async function waitForRecord(record, reply) {
  if (record.result) return record.result;
  const res = reply.raw;
  let onClose;
  const gone = new Promise((resolve) => {
    onClose = () => resolve(void 0);
    if (res.destroyed || reply.request.raw.destroyed) resolve(void 0);
    res.once("close", onClose);
  });
  try {
    const answer = await Promise.race([record.done, gone]);
    return answer ?? record.result;
  } finally {
    res.off("close", onClose);
  }
}
function sendAnswer(reply, answer, runAgeMs) {
  reply.code(answer.status);
  if (answer.contentType !== "") reply.header("content-type", answer.contentType);
  if (runAgeMs !== void 0) reply.header(RUN_AGE_HEADER, String(Math.max(0, Math.floor(runAgeMs))));
  return reply.send(answer.body);
}
function withToolCalls(store, route) {
  return async (request, reply) => {
    const { enteredAt, chatId } = requestState(request);
    const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
    const query = request.query;
    const parsed = parseToolCallHeaders(distinctHeaders(request.raw));
    if (parsed.kind === "error") {
      return sendAnswer(reply, errorAnswer(400, "Invalid tool call headers.", parsed.detail));
    }
    if (parsed.kind === "tool_call" && chatId === void 0) {
      return sendAnswer(
        reply,
        errorAnswer(400, "Tool call headers require the Coder-Chat-Id header."),
      );
    }
    const prepared = route({ body, query, chatId, enteredAt });
    if (prepared.kind === "answer") return sendAnswer(reply, prepared.answer);
    if (parsed.kind === "none" || chatId === void 0) {
      return sendAnswer(reply, await prepared.run(void 0));
    }
    const { messageId, toolCallId, ageMs } = parsed.headers;
    const key = { chatId, messageId, toolCallId };
    const decision = store.beginRun(
      key,
      inputHash(request.method, request.raw.url ?? "", body),
      ageMs,
      enteredAt,
    );
    if (decision.kind === "refused") {
      return sendAnswer(reply, jsonAnswer(409, toolCallErrorBody(decision.code)));
    }
    const { record } = decision;
    if (decision.kind === "run") {
      void runAndPublish(record, prepared.run, contextFor(key));
    }
    const answer = await waitForRecord(record, reply);
    if (answer === void 0) {
      reply.hijack();
      return void 0;
    }
    return sendAnswer(reply, answer, store.clock.now() - record.createdAt);
  };
}

// src/agent/toolcalls/cancel.ts
function parseStopThreshold(body) {
  if (body.length === 0) return { ok: true, ms: 0 };
  let value;
  try {
    value = JSON.parse(body.toString("utf8"));
  } catch {
    return { ok: false, detail: "Request body must be valid JSON." };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { ok: false, detail: "Request body must be a JSON object." };
  }
  const ms = value.stop_if_run_age_below_ms;
  if (ms === void 0 || ms === null) return { ok: true, ms: 0 };
  if (typeof ms !== "number" || !Number.isSafeInteger(ms)) {
    return {
      ok: false,
      detail: "stop_if_run_age_below_ms must be an integer number of milliseconds.",
    };
  }
  return { ok: true, ms: Math.max(0, ms) };
}
function cancelRoute(store, stopper) {
  return async (request, reply) => {
    const { enteredAt, chatId } = requestState(request);
    const parsed = parseToolCallHeaders(distinctHeaders(request.raw));
    switch (parsed.kind) {
      case "none":
        return sendAnswer(reply, errorAnswer(400, "Cancel requires the tool call headers."));
      case "error":
        return sendAnswer(reply, errorAnswer(400, "Invalid tool call headers.", parsed.detail));
      case "tool_call":
        break;
      default:
        return assertNever(parsed);
    }
    if (chatId === void 0) {
      return sendAnswer(
        reply,
        errorAnswer(400, "Tool call headers require the Coder-Chat-Id header."),
      );
    }
    const threshold = parseStopThreshold(
      Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0),
    );
    if (!threshold.ok) return sendAnswer(reply, errorAnswer(400, threshold.detail));
    const { messageId, toolCallId, ageMs } = parsed.headers;
    const key = { chatId, messageId, toolCallId };
    const { uuid } = contextFor(key);
    if (request.params.id.toLowerCase() !== uuid) {
      return sendAnswer(
        reply,
        errorAnswer(
          400,
          "The tool call ID in the path does not match the tool call headers.",
          `expected ${uuid} from Coder-Chat-Id and the tool call headers, got ${request.params.id}`,
        ),
      );
    }
    const decision = store.beginCancel(key, ageMs, enteredAt);
    switch (decision.kind) {
      case "refused":
        return sendAnswer(reply, jsonAnswer(409, toolCallErrorBody(decision.code)));
      case "never_started":
        return sendAnswer(reply, jsonAnswer(200, { started: false }));
      case "started":
        break;
      default:
        return assertNever(decision);
    }
    const { record } = decision;
    const recorded = await waitForRecord(record, reply);
    if (recorded === void 0) {
      reply.hijack();
      return void 0;
    }
    const gone = new AbortController();
    const onClose = () => {
      if (!reply.raw.writableEnded) gone.abort();
    };
    reply.raw.once("close", onClose);
    let process2;
    try {
      process2 = await stopper.stopToolCallProcess(uuid, threshold.ms, gone.signal);
    } catch {
      process2 = void 0;
    } finally {
      reply.raw.off("close", onClose);
    }
    if (gone.signal.aborted) {
      reply.hijack();
      return void 0;
    }
    const answer = {
      started: true,
      status_code: recorded.status,
      content_type: recorded.contentType,
      body: recorded.body.toString("base64"),
    };
    if (process2) answer.process = process2;
    return sendAnswer(reply, jsonAnswer(200, answer), store.clock.now() - record.createdAt);
  };
}

// src/agent/server.ts
var AGENT_VERSION = "0.1.0";
var AGENT_API_VERSION = "0";
var JSON_BODY_LIMIT_BYTES = 1024 * 1024;
var WRITE_FILE_BODY_LIMIT_BYTES = 64 * 1024 * 1024;
function parseJsonBody(body, schema) {
  let value;
  try {
    value = JSON.parse(body.toString("utf8"));
  } catch {
    return { ok: false, answer: errorAnswer(400, "Request body must be valid JSON.") };
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const detail = parsed.error.issues
      .map((i) => `${i.path.length > 0 ? i.path.join(".") : "body"}: ${i.message}`)
      .join("; ");
    return { ok: false, answer: errorAnswer(400, "Invalid request body.", detail) };
  }
  return { ok: true, value: parsed.data };
}
var START_BODY = StartProcessRequest.extend({ command: z2.string().optional() });
function reject(answer) {
  return { kind: "answer", answer };
}
function agentFastify(clock, tokenText) {
  const token = tokenText ? Buffer.from(tokenText) : void 0;
  const app = Fastify({
    logger: false,
    bodyLimit: JSON_BODY_LIMIT_BYTES,
    return503OnClosing: true,
  });
  app.decorateRequest("agent", null);
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
  app.addHook("onRequest", async (request, reply) => {
    const state = { enteredAt: clock.now(), chatId: void 0 };
    request.agent = state;
    if (token && !authorized(request, token)) {
      return sendAnswer(
        reply,
        errorAnswer(401, "Missing or wrong agent token.", "Send Authorization: Bearer <token>."),
      );
    }
    const chat = parseChatIdHeader(distinctHeaders(request.raw));
    if (chat.kind === "error")
      return sendAnswer(reply, errorAnswer(400, "Invalid Coder-Chat-Id header.", chat.detail));
    if (chat.kind === "chat") state.chatId = chat.chatId;
    return void 0;
  });
  app.setNotFoundHandler((request, reply) =>
    sendAnswer(
      reply,
      errorAnswer(404, `Route ${request.method} ${request.url.split("?")[0]} not found.`),
    ),
  );
  app.setErrorHandler((err, _request, reply) => {
    if (err.code === "FST_ERR_CTP_BODY_TOO_LARGE") {
      return sendAnswer(reply, errorAnswer(413, "Request body is too large.", err.message));
    }
    if (!err.statusCode || err.statusCode >= 500) {
      process.stderr.write(
        `${JSON.stringify({ level: "error", msg: "agent request failed", err: String(err.stack ?? err.message) })}
`,
      );
    }
    const status =
      err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
    return sendAnswer(reply, errorAnswer(status, status === 500 ? "Internal error." : err.message));
  });
  return app;
}
async function createAgentServer(o) {
  const clock = o.clock ?? realClock;
  const dir = path.resolve(o.dir);
  const store = new ToolCallStore(clock);
  const processes = new ProcessManager({
    clock,
    defaultDir: dir,
    ...(o.env && { env: o.env }),
    ...(o.exitGraceMs !== void 0 && { exitGraceMs: o.exitGraceMs }),
  });
  const startedAtIso = /* @__PURE__ */ new Date().toISOString();
  const homeDir = o.homeDir ?? os.homedir();
  const app = agentFastify(clock, o.token);
  const bodyOf = (request) => (Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0));
  const startRoute = (input) => {
    const req = parseJsonBody(input.body, START_BODY);
    if (!req.ok) return reject(req.answer);
    const { command, workdir, env, background } = req.value;
    if (!command) return reject(errorAnswer(400, "Command is required."));
    return {
      kind: "run",
      run: async (toolCall) => {
        const id = toolCall?.uuid ?? randomUUID();
        const started = await processes.start({
          id,
          command,
          startedAt: input.enteredAt,
          ...(input.chatId && { chatId: input.chatId }),
          ...(workdir !== void 0 && { workdir: path.resolve(dir, workdir) }),
          ...(env && { env }),
          ...(background !== void 0 && { background }),
        });
        if (!started.ok) return errorAnswer(500, started.message, started.detail);
        return jsonAnswer(200, { id, started: true });
      },
    };
  };
  app.post("/api/v0/processes/start", withToolCalls(store, startRoute));
  app.get("/api/v0/processes/list", (request, reply) =>
    sendAnswer(
      reply,
      jsonAnswer(200, {
        processes: processes.list(requestState(request).chatId, (id, chatId) =>
          store.isCurrentProcess(id, chatId),
        ),
      }),
    ),
  );
  app.get("/api/v0/processes/:id/output", async (request, reply) => {
    const gone = new AbortController();
    const onClose = () => gone.abort();
    reply.raw.once("close", onClose);
    const out = await processes.output(request.params.id, requestState(request).chatId, {
      wait: request.query.wait === "true",
      signal: gone.signal,
    });
    reply.raw.off("close", onClose);
    if (gone.signal.aborted) return reply.hijack();
    return sendAnswer(reply, out ? jsonAnswer(200, out) : notFound(request.params.id));
  });
  app.post("/api/v0/processes/:id/signal", (request, reply) => {
    const req = parseJsonBody(bodyOf(request), SignalProcessRequest);
    if (!req.ok) return sendAnswer(reply, req.answer);
    const { id } = request.params;
    const result = processes.signal(id, requestState(request).chatId, req.value.signal);
    switch (result) {
      case "ok":
        return sendAnswer(
          reply,
          jsonAnswer(200, { message: `Sent ${req.value.signal} to process "${id}".` }),
        );
      case "not_found":
        return sendAnswer(reply, notFound(id));
      case "not_running":
        return sendAnswer(reply, errorAnswer(409, `Process "${id}" is not running.`));
    }
  });
  app.post("/api/v0/tool-calls/:id/cancel", cancelRoute(store, processes));
  app.post(
    "/api/v0/edit-files",
    withToolCalls(store, (input) => {
      const req = parseEditFilesRequest(input.body);
      if (!req.ok) return reject(req.answer);
      return { kind: "run", run: () => applyEdits(req.value) };
    }),
  );
  app.post(
    "/api/v0/write-file",
    { bodyLimit: WRITE_FILE_BODY_LIMIT_BYTES },
    withToolCalls(store, (input) => {
      const target = parseWritePath(input.query.path);
      if (!target.ok) return reject(target.answer);
      return { kind: "run", run: () => writeFile(target.value, input.body) };
    }),
  );
  app.get("/api/v0/read-file", async (request, reply) => {
    const answer = await readFile(request.query);
    return sendAnswer(reply, answer);
  });
  app.get("/api/v0/read-file-lines", async (request, reply) =>
    sendAnswer(reply, await readFileLines(request.query)),
  );
  app.post("/api/v0/list-directory", async (request, reply) => {
    const req = parseJsonBody(bodyOf(request), ListDirectoryRequest);
    if (!req.ok) return sendAnswer(reply, req.answer);
    return sendAnswer(reply, await listDirectory(req.value, homeDir));
  });
  app.get("/api/v0/info", (_request, reply) =>
    sendAnswer(
      reply,
      jsonAnswer(200, {
        version: AGENT_VERSION,
        api_version: AGENT_API_VERSION,
        started_at: startedAtIso,
        tool_calls: true,
      }),
    ),
  );
  await app.ready();
  return {
    app,
    store,
    processes,
    async listen(host, port) {
      await app.listen({ host, port });
      const addr = app.server.address();
      if (addr === null || typeof addr === "string")
        throw new Error("The agent is not listening on TCP.");
      const h = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
      return `http://${h}:${addr.port}`;
    },
    async close() {
      await processes.closeAll();
      await app.close();
    },
  };
}
function notFound(id) {
  return errorAnswer(404, `Process "${id}" not found.`);
}
function authorized(request, token) {
  const values2 = distinctHeaders(request.raw).authorization;
  if (values2?.length !== 1) return false;
  const m = /^Bearer (.+)$/.exec(values2[0]);
  if (!m) return false;
  const given = Buffer.from(m[1]);
  return given.length === token.length && timingSafeEqual(given, token);
}

// src/cli/listen.ts
function parseListen(value) {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(value);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) {
    throw new Error(
      `Invalid listen address "${value}": use HOST:PORT, e.g. 127.0.0.1:0 or [::1]:8080.`,
    );
  }
  return { host: m[1] ?? (m[2] || "0.0.0.0"), port };
}

// src/cli/agent.ts
async function runAgent(o) {
  const { host, port } = parseListen(o.listen);
  const agent = await createAgentServer({
    dir: o.dir ?? process.cwd(),
    ...(o.token && { token: o.token }),
  });
  const url = await agent.listen(host, port);
  process.stdout.write(`listening on ${url}
`);
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    agent.close().then(
      () => process.exit(0),
      (err) => {
        process.stderr.write(`error while stopping: ${String(err)}
`);
        process.exit(1);
      },
    );
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
}

// src/cli/main.ts
function listenArg(value) {
  try {
    parseListen(value);
  } catch (err) {
    throw new InvalidArgumentError(err.message);
  }
  return value;
}
async function main(argv) {
  const program = new Command()
    .name("tether")
    .description("A self-hosted control plane for AI coding agents.")
    .showHelpAfterError();
  program
    .command("agent")
    .description("Serve the workspace agent contract for one workspace directory.")
    .requiredOption(
      "--listen <host:port>",
      "address to listen on (port 0 picks a free port)",
      listenArg,
    )
    .option("--dir <dir>", "workspace directory (default: the current directory)")
    .option("--token <token>", "require Authorization: Bearer <token> on every request")
    .action(async (o) => {
      await runAgent(o);
    });
  await program.parseAsync(argv);
}

// ../../tmp/entry.ts
await main(process.argv);
