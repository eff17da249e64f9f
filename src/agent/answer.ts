// An HTTP answer as a value: what a route handler produces and what the tool call
// middleware records and replays byte for byte (status, Content-Type, body; nothing else).

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

/** An error a handler throws to answer with a given status and message. */
export class AnswerError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly detail?: string,
  ) {
    super(message);
  }

  toAnswer(): Answer {
    return errorAnswer(this.status, this.message, this.detail);
  }
}
