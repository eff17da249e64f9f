// The file tools: read_file (read-only: numbered lines, or a listing for a directory) and
// write_file / edit_files (through the contract: one application per tool call, and an answer
// the agent replays to every retry). A failed edit applies nothing (CONTRACT.md 7, Files).

import {
  assertNever,
  type EditFilesRequest,
  type ReadFileLinesResponse,
} from "../../contract/index.ts";
import { absolutePath, resending, toolCallOf, type Handled, type ToolContext } from "./context.ts";
import type { ToolInput } from "./declarations.ts";
import {
  billableRead,
  classifyAgentError,
  readFailureMessage,
  type AgentFailure,
} from "./failures.ts";
import {
  errorResult,
  failedResult,
  unknownFileResult,
  type EditFilesResult,
  type FailedResult,
  type ReadFileResult,
  type UnknownFileResult,
  type WriteFileResult,
} from "./results.ts";

export async function runReadFile(
  ctx: ToolContext,
  input: ToolInput<"read_file">,
): Promise<Handled<ReadFileResult>> {
  const resolved = absolutePath(ctx, input.path);
  if (!resolved.ok) return { result: errorResult(resolved.message), billable: false };
  const file = resolved.path;
  const window: { offset?: number; limit?: number } = {};
  if (input.offset !== undefined) window.offset = input.offset;
  if (input.limit !== undefined) window.limit = input.limit;
  let answer: ReadFileLinesResponse;
  try {
    answer = await resending(ctx, (bound) => ctx.client.readFileLines(file, window, bound));
  } catch (err) {
    const f = classifyAgentError(err, ctx.signal);
    return { result: errorResult(readFailureMessage(f)), billable: billableRead(f) };
  }
  if (answer.success) {
    const linesRead = answer.lines_read ?? 0;
    const totalLines = answer.total_lines ?? linesRead;
    const first = input.offset ?? 1;
    const last = first + linesRead - 1;
    const result: ReadFileResult = {
      status: "completed",
      kind: "file",
      path: file,
      content: answer.content ?? "",
      lines_read: linesRead,
      total_lines: totalLines,
    };
    if (linesRead > 0 && last < totalLines) {
      result.note =
        `Showing lines ${first}-${last} of ${totalLines}. ` +
        `Call read_file with offset ${last + 1} to read more.`;
    }
    return { result, billable: true };
  }
  // Not a readable file; a directory gives its listing instead.
  const listing = await listDirectory(ctx, file);
  if (listing) return { result: listing, billable: true };
  return {
    result: errorResult(answer.error ?? `${file} could not be read.`),
    billable: true,
  };
}

/** The listing of `path` when it is a directory the agent can list, else undefined. */
async function listDirectory(ctx: ToolContext, path: string): Promise<ReadFileResult | undefined> {
  if (!path.startsWith("/")) return undefined;
  try {
    const dir = await resending(ctx, (bound) =>
      ctx.client.listDirectory(
        { path: path.split("/").filter((part) => part !== ""), relativity: "root" },
        bound,
      ),
    );
    return {
      status: "completed",
      kind: "directory",
      path: dir.absolute_path_string,
      entries: dir.contents.map((e) => ({ name: e.name, is_dir: e.is_dir })),
    };
  } catch (err) {
    classifyAgentError(err, ctx.signal); // rethrows the task's abort
    return undefined;
  }
}

export async function runWriteFile(
  ctx: ToolContext,
  toolCallId: string,
  input: ToolInput<"write_file">,
): Promise<Handled<WriteFileResult>> {
  const resolved = absolutePath(ctx, input.path);
  if (!resolved.ok) return { result: errorResult(resolved.message), billable: false };
  const file = resolved.path;
  try {
    const { message } = await resending(ctx, (bound, laterMs) =>
      ctx.client.writeFile(
        file,
        input.content,
        { toolCall: toolCallOf(ctx, toolCallId, laterMs) },
        bound,
      ),
    );
    return { result: { status: "applied", message, path: file }, billable: true };
  } catch (err) {
    return fileFailure(classifyAgentError(err, ctx.signal), "write_file");
  }
}

export async function runEditFiles(
  ctx: ToolContext,
  toolCallId: string,
  input: ToolInput<"edit_files">,
): Promise<Handled<EditFilesResult>> {
  const paths: string[] = [];
  for (const f of input.files) {
    const resolved = absolutePath(ctx, f.path);
    if (!resolved.ok) return { result: errorResult(resolved.message), billable: false };
    paths.push(resolved.path);
  }
  // Built the same way on every attempt, so a retry's body is byte-identical (input hash).
  const request: EditFilesRequest = {
    files: input.files.map((f, i) => ({
      path: paths[i]!,
      edits: f.edits.map((e) =>
        e.replace_all === undefined
          ? { old_text: e.old_text, new_text: e.new_text }
          : { old_text: e.old_text, new_text: e.new_text, replace_all: e.replace_all },
      ),
    })),
    include_diff: true,
  };
  try {
    const answer = await resending(ctx, (bound, laterMs) =>
      ctx.client.editFiles(request, { toolCall: toolCallOf(ctx, toolCallId, laterMs) }, bound),
    );
    const result: EditFilesResult = { status: "applied", paths };
    if (answer.files) result.files = answer.files;
    return { result, billable: true };
  } catch (err) {
    return fileFailure(classifyAgentError(err, ctx.signal), "edit_files");
  }
}

function fileFailure(
  f: AgentFailure,
  tool: "write_file" | "edit_files",
): Handled<FailedResult | UnknownFileResult> {
  switch (f.kind) {
    case "unknown":
      return { result: unknownFileResult(f.reason, f.detail), billable: f.billable };
    case "http":
      // An error answer (recorded or not) means the agent applied nothing.
      return { result: failedResult(f.message, tool), billable: false };
    default:
      return assertNever(f);
  }
}
