// Test helpers for the files module: a fresh real temp directory per test (removed after it),
// and the decoded JSON body of an Answer. Used by the *.test.ts files beside it only.

import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach } from "vitest";
import type { Answer } from "../answer.ts";

/** Registers a temp directory for each test; call the result inside a test for its path. */
export function useTempDir(): () => string {
  let dir: string | undefined;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "tether-files-"));
  });
  afterEach(async () => {
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    dir = undefined;
  });
  return () => {
    if (dir === undefined) throw new Error("useTempDir: no test is running");
    return dir;
  };
}

/** The JSON body of `answer` as a plain record. */
export function bodyOf(answer: Answer): Record<string, unknown> {
  const value: unknown = JSON.parse(answer.body.toString("utf8"));
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new Error(`answer body is not a JSON object: ${answer.body.toString("utf8")}`);
  }
  return value as Record<string, unknown>;
}

/** The `message` of an error answer. */
export function messageOf(answer: Answer): string {
  return String(bodyOf(answer).message);
}

/** Whether file permissions bind this process (they do not for root). */
export const permissionsApply = process.getuid?.() !== 0;
