// `tether chat`'s failures in words: one line saying what went wrong and what to do next, and a
// non-zero exit — never a stack trace (TETHER_DEBUG=1 adds it, for a bug report).

/** A failure already put in words for the person at the terminal. */
export class CliError extends Error {
  override readonly name = "CliError";
}

/** The network error behind a failed fetch (`TypeError: fetch failed` says nothing). */
export function networkCause(err: unknown): string {
  const cause = err instanceof Error ? err.cause : undefined;
  const code =
    cause instanceof Error && "code" in cause && typeof cause.code === "string"
      ? cause.code
      : undefined;
  switch (code) {
    case "ECONNREFUSED":
      return "connection refused";
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return "unknown host";
    case "ECONNRESET":
      return "connection reset";
    case "UND_ERR_SOCKET":
      return "connection closed";
    case "ETIMEDOUT":
    case "UND_ERR_CONNECT_TIMEOUT":
      return "timed out";
    default:
      return (
        code ??
        (cause instanceof Error ? cause.message : err instanceof Error ? err.message : String(err))
      );
  }
}

/** A request that never got an answer: the server is down, or not at that address. */
export function unreachable(server: string, err: unknown): CliError {
  return new CliError(
    `Cannot reach the server at ${server} (${networkCause(err)}). ` +
      "Is `tether server` running? Pass --server URL for another address.",
  );
}

/** The server did not take the token (revoked, from another server, mistyped). */
export function tokenRefused(): CliError {
  return new CliError(
    "The server refused the token (401): pass a valid --token TOKEN or set TETHER_TOKEN " +
      "(make one under Tokens in the web UI).",
  );
}

/** A failure as the one line printed for it. */
export function describeFailure(err: unknown): string {
  const line = err instanceof Error ? err.message : String(err);
  if (process.env.TETHER_DEBUG === "1" && err instanceof Error && !(err instanceof CliError))
    return `${line}\n${err.stack ?? ""}`;
  return line.split("\n")[0]!;
}
