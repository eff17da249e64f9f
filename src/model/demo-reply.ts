// What the demo model says: one pure decision from the prompt's last message and the declared
// tools. It only ever calls a tool the request declares, so its calls parse like a real model's.

import type {
  LanguageModelV3CallOptions,
  LanguageModelV3Prompt,
  LanguageModelV3ToolResultPart,
} from "@ai-sdk/provider";

/** The demo model's answer: text, optionally followed by one tool call. */
export type DemoReply =
  | { kind: "text"; text: string }
  | { kind: "tool-call"; text: string; toolName: string; input: Record<string, unknown> };

/** Output lines no longer than this are quoted in a tool result summary. */
const SHORT_LINE_MAX_CHARS = 100;

export const DEMO_HELP_TEXT = [
  "This is Tether's offline demo model: it makes no network calls and understands four forms.",
  "  $ COMMAND        runs COMMAND with the execute tool",
  "  $& COMMAND       runs COMMAND in the background",
  "  read PATH        reads a file with read_file",
  "  write PATH       followed by the content on the next lines, writes a file with write_file",
  "To talk to a real model, start the server with --model, for example:",
  "  --model anthropic:claude-sonnet-4-5   with ANTHROPIC_API_KEY set",
  "  --model openai:gpt-5                  with OPENAI_API_KEY set",
  "  --model google:gemini-2.5-pro         with GOOGLE_GENERATIVE_AI_API_KEY set",
  "  --model bedrock:<model>               with AWS credentials (the usual AWS chain)",
  "  --model openai-compatible:<model> --model-base-url URL   for Ollama, vLLM or llama.cpp",
  "TETHER_MODEL_API_KEY overrides the provider's own key variable.",
].join("\n");

/** Decides the reply to a request, following the rules in the order the docs list them. */
export function decideDemoReply(options: LanguageModelV3CallOptions): DemoReply {
  const first = options.prompt[0];
  if (first?.role === "system" && first.content.startsWith(COMPACTION_REQUEST_HEAD)) {
    return { kind: "text", text: demoSummary(options.prompt) };
  }
  const last = options.prompt.at(-1);
  if (last?.role === "tool") {
    const results = last.content.filter(
      (p): p is LanguageModelV3ToolResultPart => p.type === "tool-result",
    );
    if (results.length > 0) return { kind: "text", text: results.map(summarizeResult).join("\n") };
  }
  if (last?.role !== "user") return { kind: "text", text: DEMO_HELP_TEXT };
  const text = last.content
    .flatMap((p) => (p.type === "text" ? [p.text] : []))
    .join("\n")
    .trimStart();

  const background = /^\$&[ \t]+(\S[\s\S]*)$/.exec(text);
  if (background?.[1] !== undefined) {
    const command = background[1].trim();
    return callIfDeclared(options, "execute", { command, run_in_background: true }, [
      `Starting \`${command}\` in the background.`,
      `run \`${command}\``,
    ]);
  }
  const foreground = /^\$[ \t]+(\S[\s\S]*)$/.exec(text);
  if (foreground?.[1] !== undefined) {
    const command = foreground[1].trim();
    return callIfDeclared(options, "execute", { command }, [
      `Running \`${command}\`.`,
      `run \`${command}\``,
    ]);
  }
  const read = /^read[ \t]+([^\n]*\S)[ \t]*$/.exec(text);
  if (read?.[1] !== undefined) {
    const path = read[1].trim();
    return callIfDeclared(options, "read_file", { path }, [`Reading ${path}.`, `read ${path}`]);
  }
  const write = /^write[ \t]+([^\n]*\S)[ \t]*\n([\s\S]*)$/.exec(text);
  if (write?.[1] !== undefined && write[2] !== undefined) {
    const path = write[1].trim();
    return callIfDeclared(options, "write_file", { path, content: write[2] }, [
      `Writing ${byteLength(write[2])} bytes to ${path}.`,
      `write ${path}`,
    ]);
  }
  return { kind: "text", text: DEMO_HELP_TEXT };
}

/**
 * How chatd's compaction request opens (src/chatd/prompt/compaction.ts, COMPACTION_PROMPT_HEAD):
 * the demo model answers it with a summary instead of a tool call.
 */
export const COMPACTION_REQUEST_HEAD = "You are compacting a conversation";

/** A summary of the transcript chatd sends: what the user asked and which tools ran. */
function demoSummary(prompt: LanguageModelV3Prompt): string {
  const text = promptText(prompt.slice(1));
  const asked = [...text.matchAll(/^\[user\]\n(.+)$/gm)].map((m) => m[1]!.trim());
  const calls = [...text.matchAll(/^\[tool call [^\]]*\] (\S+) (.*)$/gm)].map(
    (m) => `${m[1]} ${oneLine(m[2]!)}`,
  );
  return [
    "Summary (demo model).",
    `- Goal: ${asked.length > 0 ? asked.map(oneLine).join("; ") : "none stated"}`,
    `- Commands and tools: ${calls.length > 0 ? calls.join("; ") : "none"}`,
    "- Background processes: see the tool calls above.",
    "- Open tasks: none known.",
  ].join("\n");
}

/** A tool call when the request declares the tool (and allows tools), else a text refusal. */
function callIfDeclared(
  options: LanguageModelV3CallOptions,
  toolName: string,
  input: Record<string, unknown>,
  [lead, action]: [lead: string, action: string],
): DemoReply {
  const declared = (options.tools ?? []).some((t) => t.type === "function" && t.name === toolName);
  const forbidden =
    options.toolChoice?.type === "none" ||
    (options.toolChoice?.type === "tool" && options.toolChoice.toolName !== toolName);
  if (!declared || forbidden) {
    return {
      kind: "text",
      text:
        `The ${toolName} tool is not available in this request, so the demo model cannot ` +
        `${action}.`,
    };
  }
  return { kind: "tool-call", text: lead, toolName, input };
}

/** One line about one tool result. */
export function summarizeResult(part: LanguageModelV3ToolResultPart): string {
  const { toolName, output } = part;
  switch (output.type) {
    case "json":
    case "error-json":
      return summarizeValue(toolName, output.value);
    case "text":
    case "error-text":
      return summarizeValue(toolName, parseJsonOr(output.value));
    case "execution-denied":
      return `${toolName} was not run: ${output.reason ?? "the call was denied"}.`;
    case "content":
      return `${toolName} returned ${output.value.length} content part(s).`;
    default: {
      const unreachable: never = output;
      return `${toolName} returned ${JSON.stringify(unreachable)}.`;
    }
  }
}

function summarizeValue(toolName: string, value: unknown): string {
  if (typeof value === "string") {
    return `${toolName} returned ${byteLength(value)} bytes of text.${quoteFirstLine(value)}`;
  }
  if (!isRecord(value)) return `${toolName} returned ${oneLine(JSON.stringify(value) ?? "")}.`;
  const { exit_code: exitCode, output, status } = value;
  if (status === "completed" && value.kind === "file" && typeof value.path === "string") {
    const content = typeof value.content === "string" ? value.content : "";
    return (
      `Read ${value.path}: ${String(value.lines_read)} of ${String(value.total_lines)} lines.` +
      quoteFirstLine(content.replace(/^\s*\d+\t/, ""))
    );
  }
  if (status === "completed" && value.kind === "directory" && typeof value.path === "string") {
    const n = Array.isArray(value.entries) ? value.entries.length : 0;
    return `${value.path} is a directory with ${n} entries.`;
  }
  if (status === "applied" && typeof value.path === "string") return `Wrote ${value.path}.`;
  if (typeof exitCode === "number" && typeof output === "string") {
    return `Exit code ${exitCode}, ${byteLength(output)} bytes of output.${quoteFirstLine(output)}`;
  }
  if (typeof status === "string") {
    const detail = [value.note, value.reason, value.message].find(
      (d): d is string => typeof d === "string" && d.trim() !== "",
    );
    return `${toolName} ended with status "${status}".${detail ? ` ${oneLine(detail)}` : ""}`;
  }
  return `${toolName} returned a result without a status: ${oneLine(JSON.stringify(value))}.`;
}

/** " First line: ..." when the text's first line is short enough to quote, else "". */
function quoteFirstLine(text: string): string {
  const first = text.split("\n", 1)[0]?.trimEnd() ?? "";
  if (first.trim() === "" || first.length > SHORT_LINE_MAX_CHARS) return "";
  return ` First line: ${first}`;
}

function oneLine(text: string): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > SHORT_LINE_MAX_CHARS ? `${line.slice(0, SHORT_LINE_MAX_CHARS)}...` : line;
}

function parseJsonOr(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function byteLength(text: string): number {
  return Buffer.byteLength(text, "utf8");
}

/** A rough token count (4 characters a token), so usage is never zero or absent. */
export function estimateTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}

/** All the prompt's text, for the input token estimate. */
export function promptText(prompt: LanguageModelV3Prompt): string {
  return prompt
    .map((m) =>
      typeof m.content === "string"
        ? m.content
        : m.content.map((p) => ("text" in p ? p.text : JSON.stringify(p))).join("\n"),
    )
    .join("\n");
}
