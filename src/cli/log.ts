// The server's log: pino JSON lines on stderr, info by default. Every path where a secret
// could sit — an agent token, a model API key, a password, an Authorization header or session
// cookie, the replica secret, a secret key, a database URL — is censored before a line is
// written, whoever logged the object. (Database errors carry no parameter: src/chatd/db/errors.ts.)

import pino, { type DestinationStream, type Logger } from "pino";

export const DEFAULT_LOG_LEVEL = "info";
export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** What a censored value reads as. */
export const REDACTED = "[Redacted]";

/** Keys that hold a secret: censored at the top of a line's object and two levels down. */
const SECRET_KEYS = [
  "token",
  "agent_token",
  "agentToken",
  "api_key",
  "apiKey",
  "password",
  "authorization",
  "Authorization",
  "x-api-key",
  "x-goog-api-key",
  "cookie",
  "set-cookie",
  "secret",
  "secretKey",
  "x-tether-replica-secret",
  "postgresUrl",
  "connectionString",
];

/** pino `redact` paths for each secret key at depth 0, 1 and 2 (`k`, `*.k`, `*.*.k`). */
export const REDACT_PATHS: string[] = SECRET_KEYS.flatMap((k) => {
  const plain = /^[A-Za-z_$][\w$]*$/.test(k);
  const top = plain ? k : `["${k}"]`;
  const below = plain ? `.${k}` : `["${k}"]`;
  return [top, `*${below}`, `*.*${below}`];
});

export function createLogger(
  o: { level?: LogLevel; destination?: DestinationStream } = {},
): Logger {
  return pino(
    { level: o.level ?? DEFAULT_LOG_LEVEL, redact: { paths: REDACT_PATHS, censor: REDACTED } },
    o.destination ?? pino.destination(2),
  );
}
