// The tools the model gets (CHATD.md 6): one table of names, descriptions and zod input
// schemas. Declarations carry no `execute`, so the AI SDK returns the calls and chatd runs
// them itself, under the contract, with exactly one result each.

import { tool, zodSchema, type Tool } from "ai";
import { z } from "zod";
import { assertNever } from "../../contract/index.ts";

const duration = (what: string, dflt: string) =>
  z
    .string()
    .describe(
      `${what} A duration such as "30s", "2m" or "1h30m" (units ms, s, m, h). Default "${dflt}".`,
    );

const filePath = (what: string) =>
  z.string().min(1).describe(`${what} Absolute, or relative to the workspace directory.`);

/** Input schemas, by tool name. Paths and durations are checked further when a call runs. */
export const TOOL_INPUTS = {
  execute: z.object({
    command: z.string().min(1).describe("The shell command, run with `sh -c`."),
    timeout: duration(
      "How long to wait for the command to finish; it keeps running after that.",
      "10s",
    ).optional(),
    workdir: z
      .string()
      .min(1)
      .describe("Working directory; relative paths start at the workspace directory.")
      .optional(),
    run_in_background: z
      .boolean()
      .describe("Start the command and return at once, without waiting for it.")
      .optional(),
  }),
  process_output: z.object({
    process_id: z.string().min(1).describe("The process ID an execute result gave."),
    wait_timeout: duration(
      'How long to wait for the process to exit before answering; "0s" reads at once.',
      "10s",
    ).optional(),
  }),
  process_list: z.object({}),
  process_signal: z.object({
    process_id: z.string().min(1).describe("The process ID an execute result gave."),
    signal: z
      .enum(["terminate", "kill"])
      .describe('"terminate" asks the process to stop (SIGTERM); "kill" forces it (SIGKILL).'),
  }),
  read_file: z.object({
    path: filePath("The file (or directory) to read."),
    offset: z.number().int().min(1).describe("First line to read, 1-based.").optional(),
    limit: z.number().int().min(1).describe("Most lines to read (at most 2000).").optional(),
  }),
  write_file: z.object({
    path: filePath("The file to write; parent directories are created."),
    content: z.string().describe("The whole new content of the file."),
  }),
  edit_files: z.object({
    files: z
      .array(
        z.object({
          path: filePath("The file to edit."),
          edits: z
            .array(
              z.object({
                old_text: z
                  .string()
                  .min(1)
                  .describe("Text to find; must match exactly one place unless replace_all."),
                new_text: z.string().describe("The replacement text."),
                replace_all: z
                  .boolean()
                  .describe("Replace every occurrence of old_text.")
                  .optional(),
              }),
            )
            .min(1),
        }),
      )
      .min(1),
  }),
} as const;

export type ToolName = keyof typeof TOOL_INPUTS;
export type ToolInput<N extends ToolName> = z.infer<(typeof TOOL_INPUTS)[N]>;

export const TOOL_NAMES = Object.keys(TOOL_INPUTS) as readonly ToolName[];

const DESCRIPTIONS: Record<ToolName, string> = {
  execute:
    "Run a shell command in the workspace and wait for it up to `timeout` (default 10s). " +
    "The result's `status` says what happened: `completed` (exit_code, output), `timed_out` " +
    "(still running: read it later with process_output, or stop it with process_signal), " +
    "`background` (started with run_in_background), or `unknown` (read the note before " +
    "running the command again). Each call runs at most once.",
  process_output:
    "Read the output of a process started by execute, waiting up to `wait_timeout` (default " +
    '10s; "0s" reads at once) for it to exit. `completed` gives the exit code; `timed_out` ' +
    "means it is still running.",
  process_list: "List this chat's processes, running ones first, newest first (at most 10).",
  process_signal:
    "Send a signal to a process started by execute: `terminate` (SIGTERM) or `kill` " +
    "(SIGKILL), to its whole process group. The only way to end a background process.",
  read_file:
    "Read a text file as numbered lines (`<n>\\t<line>`), from `offset` (1-based, default 1) " +
    "for up to `limit` lines (default and maximum 2000). A directory gives its listing. A " +
    "relative path starts at the workspace directory; the result gives the absolute path.",
  write_file:
    "Write a whole file (created with its parent directories, or replaced atomically). " +
    "Prefer edit_files to change part of an existing file. A relative path starts at the " +
    "workspace directory; the result gives the absolute path.",
  edit_files:
    "Edit files by search and replace. Each edit replaces `old_text`, which must match " +
    "exactly one place (or every place with replace_all), by `new_text`. Either every edit " +
    "of every file is applied or, if any fails, none is; the result shows a diff. Relative " +
    "paths start at the workspace directory; the result gives the absolute paths.",
};

function declare() {
  const d = DESCRIPTIONS;
  // Each input schema wrapped once: the AI SDK derives the JSON schema of a wrapped one the
  // first time it is sent and keeps it, where a bare zod schema is converted on every request.
  const i = TOOL_INPUTS;
  return {
    execute: tool({ description: d.execute, inputSchema: zodSchema(i.execute) }),
    process_output: tool({
      description: d.process_output,
      inputSchema: zodSchema(i.process_output),
    }),
    process_list: tool({ description: d.process_list, inputSchema: zodSchema(i.process_list) }),
    process_signal: tool({
      description: d.process_signal,
      inputSchema: zodSchema(i.process_signal),
    }),
    read_file: tool({ description: d.read_file, inputSchema: zodSchema(i.read_file) }),
    write_file: tool({ description: d.write_file, inputSchema: zodSchema(i.write_file) }),
    edit_files: tool({ description: d.edit_files, inputSchema: zodSchema(i.edit_files) }),
  } satisfies Record<ToolName, Tool>;
}

let declared: ReturnType<typeof declare> | undefined;

/** The AI SDK `tools` object: descriptions and input schemas only, no `execute`. */
export function toolDeclarations(): ReturnType<typeof declare> {
  return (declared ??= declare());
}

export function isToolName(name: string): name is ToolName {
  return Object.hasOwn(TOOL_INPUTS, name);
}

/**
 * Whether a tool has a side effect and so sends the tool call headers (CONTRACT.md 6); an
 * interrupt sends a cancel only for these. An unknown name never ran, so it is false.
 */
export function sendsToolCallHeaders(name: string): boolean {
  if (!isToolName(name)) return false;
  switch (name) {
    case "execute":
    case "write_file":
    case "edit_files":
      return true;
    case "process_output":
    case "process_list":
    case "process_signal":
    case "read_file":
      return false;
    default:
      return assertNever(name);
  }
}
