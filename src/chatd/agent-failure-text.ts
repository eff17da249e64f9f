// What a failed connection to a workspace agent may say, to a person (the API's answers) or to
// the model (tool results): never the socket's own error. "connect ECONNREFUSED 10.0.0.5:5432"
// or "socket hang up" would make an agent URL a member registered a probe of the server's
// network (which ports are open, what answers); the cause stays on the error for the log.

import {
  AgentAddressRefusedError,
  AgentAnswerTooLargeError,
  type AgentConnectionError,
} from "../contract/index.ts";

/** One sentence about a connection failure, with no address, port or socket error in it. */
export function connectionFailureText(err: AgentConnectionError): string {
  if (err instanceof AgentAddressRefusedError) {
    return "The workspace agent's address is not a public one, and only an agent an admin registers may be on a private address.";
  }
  return err.phase === "connect"
    ? "The workspace agent could not be reached."
    : "The connection to the workspace agent was lost before it answered.";
}

/** The sentence of an answer over the size cap (the cap is documented; it says nothing else). */
export function answerTooLargeText(err: AgentAnswerTooLargeError): string {
  return `The workspace agent's answer was larger than ${err.limitBytes} bytes, so it was not read.`;
}
