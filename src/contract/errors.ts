// The contract's refusals (CONTRACT.md 4): one table of codes and messages. Only a 409 with
// a JSON body carrying one of these codes is a contract error; anything else is generic.

export const TOOL_CALL_ERRORS = {
  stale_tool_call: "The tool call is in an older message than the chat's latest message.",
  agent_started_after_tool_call: "The workspace agent started after the tool call was committed.",
  input_mismatch: "The request differs from the recorded request for this tool call.",
  tool_call_canceled: "The tool call was canceled.",
} as const;

export type ToolCallErrorCode = keyof typeof TOOL_CALL_ERRORS;

export function isToolCallErrorCode(code: unknown): code is ToolCallErrorCode {
  return typeof code === "string" && Object.hasOwn(TOOL_CALL_ERRORS, code);
}

/** The body of a contract refusal. */
export interface ToolCallErrorBody {
  message: string;
  detail?: string;
  code: ToolCallErrorCode;
}

export function toolCallErrorBody(code: ToolCallErrorCode, detail?: string): ToolCallErrorBody {
  const body: ToolCallErrorBody = { message: TOOL_CALL_ERRORS[code], code };
  if (detail !== undefined) body.detail = detail;
  return body;
}

/** A coded 409 from the agent. */
export class ToolCallError extends Error {
  override readonly name = "ToolCallError";
  constructor(
    readonly code: ToolCallErrorCode,
    message: string = TOOL_CALL_ERRORS[code],
    readonly detail?: string,
  ) {
    super(message);
  }
}

/** Any other non-2xx answer (or a refused redirect) from the agent. */
export class AgentHttpError extends Error {
  override readonly name = "AgentHttpError";
  constructor(
    readonly status: number,
    message: string,
    readonly detail?: string,
    readonly body?: Buffer,
  ) {
    super(message);
  }
}

/**
 * Decodes an answer into the typed contract error when, and only when, it is a 409 with a JSON
 * body whose `code` is one of the four codes.
 */
export function decodeToolCallError(
  status: number,
  contentType: string | undefined,
  body: Buffer,
): ToolCallError | undefined {
  if (status !== 409 || !contentType?.toLowerCase().includes("json")) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString("utf8"));
  } catch {
    return undefined;
  }
  if (typeof parsed !== "object" || parsed === null) return undefined;
  const { code, message, detail } = parsed as Record<string, unknown>;
  if (!isToolCallErrorCode(code)) return undefined;
  return new ToolCallError(
    code,
    typeof message === "string" && message !== "" ? message : TOOL_CALL_ERRORS[code],
    typeof detail === "string" ? detail : undefined,
  );
}
