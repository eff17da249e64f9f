// The one error a failed statement rejects with, on both drivers. The drivers' own errors carry
// what must never reach a log: PGlite's the query text and every parameter, Postgres's a detail
// with the failing row ("Failing row contains (…)", "Key (…)=(…)") and a context with parameter
// values, and a message that may quote the value it refused. DatabaseError keeps the SQLSTATE
// and the names (table, column, constraint) and drops every value, so whoever logs it leaks
// nothing: the parameters of a statement may hold an API key, a token or a command's output.

/** A statement failed on the server; no parameter, row value or query text is kept. */
export class DatabaseError extends Error {
  override readonly name = "DatabaseError";
  /** SQLSTATE (`23505` unique violation, ...). */
  readonly code: string;
  readonly severity: string | undefined;
  readonly schema: string | undefined;
  readonly table: string | undefined;
  readonly column: string | undefined;
  readonly constraint: string | undefined;
  readonly dataType: string | undefined;

  constructor(source: DriverError) {
    super(withoutValues(source.message));
    this.code = source.code;
    this.severity = source.severity;
    this.schema = source.schema;
    this.table = source.table;
    this.column = source.column;
    this.constraint = source.constraint;
    this.dataType = source.dataType;
  }
}

interface DriverError {
  message: string;
  code: string;
  severity?: string;
  schema?: string;
  table?: string;
  column?: string;
  constraint?: string;
  dataType?: string;
}

const SQLSTATE_RE = /^[0-9A-Z]{5}$/;

/** An error the server sent (pg's and PGlite's DatabaseError alike): a SQLSTATE and a severity. */
function isDriverError(err: unknown): err is DriverError {
  if (!(err instanceof Error) || err instanceof DatabaseError) return false;
  const e = err as Error & { code?: unknown; severity?: unknown };
  return typeof e.code === "string" && SQLSTATE_RE.test(e.code) && typeof e.severity === "string";
}

/**
 * Postgres quotes the value it refused at the end of some messages (`invalid input syntax for
 * type integer: "…"`, `malformed array literal: "…"`); names it quotes elsewhere in a message
 * (`constraint "x"`) stay.
 */
function withoutValues(message: string): string {
  return message.replace(/: ".*"$/s, ': "…"');
}

/** `err` as a DatabaseError when the server sent it; any other error as it is. */
export function toDatabaseError(err: unknown): unknown {
  return isDriverError(err) ? new DatabaseError(err) : err;
}

/** Runs a statement; a server error becomes a DatabaseError. */
export async function statement<T>(run: Promise<T>): Promise<T> {
  try {
    return await run;
  } catch (err) {
    throw toDatabaseError(err);
  }
}
