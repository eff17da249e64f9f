// The system prompt, one versioned text: how to work with the tools and read their results,
// then the chat's context snapshot (context.ts) — the environment block as the agent reported
// it, the organisation's instructions and the project's instruction files. A chat's prompt is
// built from its snapshot alone, so it does not change under a running conversation.

import type { ContextSnapshot } from "./context.ts";

/** Bumped whenever the text below changes meaning; docs/prompt.md shows this version. */
export const PROMPT_VERSION = 2;

export const BASE_PROMPT = [
  "You are a coding agent working in a workspace through tools. Work step by step: look before " +
    "you change things, make the change, then check it (run the tests or the command again).",
  "",
  "Tools and their results:",
  "- Every tool result is a JSON object with a `status` field; read it before you act. " +
    "`completed` means it ran to the end (for `execute`, read `exit_code`: non-zero is a failure).",
  "- `unknown` means the outcome could not be learned (the workspace agent restarted or could " +
    "not be reached): it may or may not have happened. Check its effects (read the file, list " +
    "the processes, look at the output) before you repeat anything with a side effect.",
  "- `timed_out` means the command is still running after its timeout: read it later with " +
    "process_output using its `process_id`, or stop it with process_signal. Do not start it again.",
  "- Long-running commands (servers, watchers, builds that take minutes) go in the background " +
    "(`run_in_background: true`); note the `process_id` and check on it with process_output. A " +
    "background process runs until you stop it with process_signal.",
  "- `canceled` means the user interrupted it; `not_run` and `not_applied` mean nothing happened.",
  "- Paths may be relative: they start at the workspace directory below. Results give the " +
    "absolute path.",
  "- Large outputs are cut in the middle with a marker saying how many bytes were left out; " +
    "read a file in parts (read_file `offset`, `limit`) rather than all at once.",
  "- Prefer edit_files for changes to existing files; write_file replaces a whole file.",
  "",
  "Follow the instructions below; the project's own instructions win over general habits.",
].join("\n");

/** The whole system prompt of a chat with this snapshot (none: the rules alone). */
export function systemPrompt(snapshot: ContextSnapshot | null): string {
  const sections = [BASE_PROMPT, environmentBlock(snapshot)];
  const org = snapshot?.organization?.trim();
  if (org) sections.push(`# Instructions from your organisation\n\n${org}`);
  const files = snapshot?.files ?? [];
  if (files.length > 0) {
    const parts = files.map((f) => {
      const cut = f.truncated
        ? `\n\n[truncated: the first ${Buffer.byteLength(f.content)} of ${f.bytes} bytes]`
        : "";
      return `## ${f.path}\n\n${f.content.trimEnd()}${cut}`;
    });
    sections.push(`# Project instructions\n\n${parts.join("\n\n")}`);
  }
  return sections.join("\n\n");
}

/** The environment block: what the agent reported, or why nothing is known. */
export function environmentBlock(snapshot: ContextSnapshot | null): string {
  const env = snapshot?.environment;
  if (!env) {
    const why = snapshot?.note ?? "This chat has no workspace: answer without tools.";
    return `# Environment\n\n${why}`;
  }
  return [
    "# Environment",
    "",
    `- Workspace directory: ${env.directory}`,
    `- OS: ${env.os} (${env.arch})`,
    `- Shell: ${env.shell}`,
    `- Date: ${env.date}`,
    `- Git: ${env.git ? `a git repository, branch ${env.git.branch}` : "not a git repository"}`,
  ].join("\n");
}
