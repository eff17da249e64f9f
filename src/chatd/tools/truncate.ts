// Fitting a tool result into the model's context (CHATD.md 5): when its JSON is larger than
// the budget, the largest string (the output, a diff, a file) is cut to what fits, keeping the
// first 2/3 and the last 1/3 with a marker saying how many bytes were cut.

import { utf8Ceil, utf8Floor } from "../../contract/index.ts";
import type { ToolResult } from "./results.ts";

/** The default budget of one tool result's JSON, in bytes (about 8k tokens). */
export const DEFAULT_TOOL_RESULT_BUDGET_BYTES = 32 * 1024;

/** Rounds of narrowing one string: JSON escapes make its encoded size only a bound. */
const MAX_ROUNDS = 16;

interface StringLeaf {
  parent: Record<string, unknown> | unknown[];
  key: string | number;
  bytes: Buffer;
}

/** The text put where bytes were cut out of a string. */
export function cutMarker(cutBytes: number): string {
  return `\n\n... [${cutBytes} bytes cut] ...\n\n`;
}

/**
 * `result` unchanged when its JSON fits `budgetBytes`; otherwise a copy whose largest strings
 * (largest first) are cut to a head of 2/3 and a tail of 1/3 of what fits, around a marker.
 */
export function truncateToolResult(
  result: ToolResult,
  budgetBytes: number = DEFAULT_TOOL_RESULT_BUDGET_BYTES,
): ToolResult {
  if (jsonBytes(result) <= budgetBytes) return result;
  const copy = structuredClone(result) as unknown;
  const leaves = stringLeaves(copy).sort((a, b) => b.bytes.length - a.bytes.length);
  for (const leaf of leaves) {
    let over = jsonBytes(copy) - budgetBytes;
    if (over <= 0) break;
    let keep = Math.max(0, leaf.bytes.length - over - cutMarker(leaf.bytes.length).length);
    for (let round = 0; round < MAX_ROUNDS; round++) {
      setLeaf(leaf, cutString(leaf.bytes, keep));
      over = jsonBytes(copy) - budgetBytes;
      if (over <= 0 || keep === 0) break;
      keep = Math.max(0, keep - over);
    }
  }
  return copy as ToolResult;
}

/** `bytes` as text with at most `keep` bytes kept: 2/3 from the head, 1/3 from the tail. */
function cutString(bytes: Buffer, keep: number): string {
  if (keep >= bytes.length) return bytes.toString("utf8");
  const headKeep = Math.floor((keep * 2) / 3);
  // Never split a UTF-8 sequence.
  const headEnd = utf8Floor(bytes, headKeep);
  const tailStart = utf8Ceil(bytes, bytes.length - (keep - headKeep));
  const head = bytes.subarray(0, headEnd).toString("utf8");
  const tail = bytes.subarray(tailStart).toString("utf8");
  return head + cutMarker(tailStart - headEnd) + tail;
}

function setLeaf(leaf: StringLeaf, value: string): void {
  if (Array.isArray(leaf.parent)) leaf.parent[leaf.key as number] = value;
  else leaf.parent[leaf.key as string] = value;
}

function stringLeaves(value: unknown): StringLeaf[] {
  const out: StringLeaf[] = [];
  const visit = (parent: Record<string, unknown> | unknown[], key: string | number, v: unknown) => {
    if (typeof v === "string") out.push({ parent, key, bytes: Buffer.from(v, "utf8") });
    else if (Array.isArray(v)) v.forEach((item, i) => visit(v, i, item));
    else if (typeof v === "object" && v !== null) {
      const record = v as Record<string, unknown>;
      for (const [k, item] of Object.entries(record)) visit(record, k, item);
    }
  };
  if (Array.isArray(value)) value.forEach((item, i) => visit(value, i, item));
  else if (typeof value === "object" && value !== null) {
    const record = value as Record<string, unknown>;
    for (const [k, item] of Object.entries(record)) visit(record, k, item);
  }
  return out;
}

function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value), "utf8");
}
