// Request and response bodies of every agent route (CONTRACT.md section 7), shared by the
// agent, which serves them, and the client chatd uses. Wire names are exactly these.

import { z } from "zod";

// ---- processes -------------------------------------------------------------------------

export const StartProcessRequest = z.strictObject({
  command: z.string(),
  workdir: z.string().optional(),
  env: z.record(z.string(), z.string()).optional(),
  background: z.boolean().optional(),
});
export type StartProcessRequest = z.infer<typeof StartProcessRequest>;

export interface StartProcessResponse {
  id: string;
  started: true;
}

/** How the output buffer cut the output (CONTRACT.md 7, output buffer). */
export interface ProcessTruncation {
  original_bytes: number;
  retained_bytes: number;
  omitted_bytes: number;
  strategy: "head_tail";
}

export interface ProcessOutputResponse {
  output: string;
  truncated?: ProcessTruncation;
  running: boolean;
  exit_code?: number;
  command?: string;
}

export interface ProcessInfo {
  id: string;
  command: string;
  workdir?: string;
  background: boolean;
  running: boolean;
  exit_code?: number;
  started_at_unix: number;
  exited_at_unix?: number;
}

export interface ListProcessesResponse {
  processes: ProcessInfo[];
}

export const SignalProcessRequest = z.strictObject({
  signal: z.enum(["kill", "terminate"]),
});
export type SignalProcessRequest = z.infer<typeof SignalProcessRequest>;

export interface MessageResponse {
  message: string;
}

// ---- cancel ----------------------------------------------------------------------------

export interface CancelToolCallRequest {
  /** Stop a running process only if its run age is below this; 0 (or negative) never stops. */
  stop_if_run_age_below_ms: number;
}

/** The state of the process a tool call started, as a cancel reports it. */
export interface ToolCallProcess {
  running: boolean;
  /** True only when a cancel's kill ended the process; stays true on later cancels. */
  canceled: boolean;
  output: string;
  truncated?: ProcessTruncation;
  exit_code?: number;
  run_age_ms: number;
}

export type CancelToolCallResponse =
  | { started: false }
  | {
      started: true;
      status_code: number;
      content_type: string;
      /** Base64 of the recorded body bytes. */
      body: string;
      process?: ToolCallProcess;
    };

// ---- files -----------------------------------------------------------------------------

export const EditFilesRequest = z.strictObject({
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
export type EditFilesRequest = z.infer<typeof EditFilesRequest>;

export interface EditFilesResponse {
  files?: { path: string; diff: string }[];
}

export interface ReadFileLinesResponse {
  success: boolean;
  file_size?: number;
  total_lines?: number;
  lines_read?: number;
  content?: string;
  error?: string;
}

export const ListDirectoryRequest = z.strictObject({
  path: z.array(z.string()),
  relativity: z.enum(["root", "home"]),
});
export type ListDirectoryRequest = z.infer<typeof ListDirectoryRequest>;

export interface ListDirectoryResponse {
  absolute_path: string[];
  absolute_path_string: string;
  contents: { name: string; absolute_path_string: string; is_dir: boolean }[];
}

// ---- info ------------------------------------------------------------------------------

export interface InfoResponse {
  version: string;
  api_version: string;
  started_at: string;
  tool_calls: true;
  /**
   * How many processes run now, across every chat (the idle check's question; lists are per
   * chat). Absent from agents older than this field.
   */
  processes_running?: number;
}

// ---- context (an extension: GET /api/v0/context) ----------------------------------------

/** One instruction file the agent found, cut to the per-file cap. */
export interface ContextFile {
  /** Absolute path on the workspace's machine. */
  path: string;
  /** The file's size on disk. */
  bytes: number;
  /** True when `content` holds less than the whole file (a cap cut it). */
  truncated: boolean;
  content: string;
}

/** The workspace as the agent sees it: what a model needs to know before it acts. */
export interface ContextResponse {
  /** The workspace directory (absolute): where relative paths start. */
  directory: string;
  /** `process.platform` and `process.arch` of the agent (`linux`, `x64`). */
  os: string;
  arch: string;
  /** The shell commands run in (`sh -c`), and the user's login shell when known. */
  shell: string;
  /** The agent's local date, `YYYY-MM-DD` (informational, never a decision: A6). */
  date: string;
  /** Set when the workspace directory is inside a git work tree. */
  git: { branch: string } | null;
  /** AGENTS.md, CLAUDE.md, .cursorrules in the directory, then ~/.tether/AGENTS.md. */
  files: ContextFile[];
  /** The caps applied: per file and for all files together, in bytes. */
  limits: { file_bytes: number; total_bytes: number };
}

/** The error body of every route. Contract refusals add `code` (see errors.ts). */
export interface ErrorResponse {
  message: string;
  detail?: string;
}
