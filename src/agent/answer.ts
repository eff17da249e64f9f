// An HTTP answer as a value: what a route handler produces and what the tool call
// middleware records and replays byte for byte (status, Content-Type, body; nothing else).

import { MALFORMED_REQUEST_CODES } from "../contract/malformed-request.ts";

export interface Answer {
  status: number;
  /** Empty when the handler set none. */
  contentType: string;
  body: Buffer;
}

export const JSON_CONTENT_TYPE = "application/json";

export function jsonAnswer(status: number, value: unknown): Answer {
  return { status, contentType: JSON_CONTENT_TYPE, body: Buffer.from(JSON.stringify(value)) };
}

/** The error body of every agent route: `{message, detail?}`. */
export function errorAnswer(status: number, message: string, detail?: string): Answer {
  return jsonAnswer(status, detail === undefined ? { message } : { message, detail });
}

/**
 * The agent's own refusal codes (docs/contract.md, "Agent error codes"): an error answer
 * with a stable `code` beside `message`. Never a 409, so a client never mistakes one for a
 * contract refusal (CONTRACT.md 4).
 */
export const AGENT_ERRORS = {
  unsupported_media_type: 415,
  origin_refused: 403,
  repeated_query_parameter: 400,
  nul_in_input: 400,
  file_unreadable: 400,
  // A request Node's parser refused (contract/malformed-request.ts), answered before any route.
  ...MALFORMED_REQUEST_CODES,
} as const;

export type AgentErrorCode = keyof typeof AGENT_ERRORS;

/** An error answer carrying one of the agent's codes, at the code's status. */
export function codedAnswer(code: AgentErrorCode, message: string, detail?: string): Answer {
  return jsonAnswer(
    AGENT_ERRORS[code],
    detail === undefined ? { message, code } : { message, detail, code },
  );
}

/** An error a handler throws to answer with a given status and message. */
export class AnswerError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly detail?: string,
    readonly code?: AgentErrorCode,
  ) {
    super(message);
  }

  toAnswer(): Answer {
    return this.code === undefined
      ? errorAnswer(this.status, this.message, this.detail)
      : codedAnswer(this.code, this.message, this.detail);
  }
}
