// Values crossing the driver boundary, in one table both drivers use: Postgres text → the
// JavaScript types of types.ts, and parameters → text. Both drivers read and write through these
// functions only, so the same SQL gives the same values on PGlite and on node-postgres.

/** Turns one non-NULL column value, as Postgres sends it in text format, into JavaScript. */
export type TextParser = (text: string) => unknown;

/** Session settings both drivers apply to every connection: the parsers below rely on them. */
export const SESSION_SETTINGS: Readonly<Record<string, string>> = {
  TimeZone: "UTC",
  DateStyle: "ISO,MDY",
  IntervalStyle: "postgres",
  bytea_output: "hex",
  // Both drivers prepare their statements once per connection (prepared.ts, pglite-prepared.ts);
  // by default Postgres plans each of the first five executions again, and keeps doing so for a
  // statement whose generic plan looks costlier. Planning a transition's CTE at bind took
  // 0.52 ms against 0.40 ms of execution; its generic plan executes as fast, and bind takes
  // 0.08 ms (bench:turn's log).
  plan_cache_mode: "force_generic_plan",
};

/** `infinity` / `-infinity` timestamps: the largest and smallest Date JavaScript can hold. */
const MAX_DATE_MS = 8.64e15;

const TIMESTAMP_RE =
  /^(\d{4,})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))?(?:([+-])(\d\d)(?::?(\d\d))?(?::?(\d\d))?)?( BC)?$/;

/** timestamptz and timestamp (read as UTC) → Date, to the millisecond (microseconds dropped). */
export function parseTimestamp(text: string): Date {
  if (text === "infinity") return new Date(MAX_DATE_MS);
  if (text === "-infinity") return new Date(-MAX_DATE_MS);
  const m = TIMESTAMP_RE.exec(text);
  if (!m) {
    throw new Error(
      `Postgres sent the timestamp "${text}" in an unknown format; DateStyle must be ISO.`,
    );
  }
  const n = (i: number): number => Number(m[i] ?? "0");
  const year = m[12] ? 1 - n(1) : n(1);
  const ms = Number((m[7] ?? "").padEnd(3, "0").slice(0, 3));
  const date = new Date(0);
  date.setUTCFullYear(year, n(2) - 1, n(3)); // not Date.UTC: it maps years 0-99 to 1900-1999
  date.setUTCHours(n(4), n(5), n(6), ms);
  const offsetSeconds = (n(9) * 3600 + n(10) * 60 + n(11)) * (m[8] === "-" ? -1 : 1);
  return new Date(date.getTime() - offsetSeconds * 1000);
}

function parseBytea(text: string): Buffer {
  if (!text.startsWith("\\x")) {
    throw new Error("Postgres sent bytea in escape format; bytea_output must be hex.");
  }
  return Buffer.from(text.slice(2), "hex");
}

/** Parses a Postgres array literal (`{1,NULL,"a \"b\""}`, nested too) element by element. */
export function parseArray(text: string, parseElement: TextParser): unknown[] {
  let i = text.startsWith("[") ? text.indexOf("=") + 1 : 0; // `[0:1]={...}` bounds prefix
  const at = (): string => {
    const c = text[i];
    if (c === undefined) throw new Error(`Postgres sent a malformed array literal: ${text}`);
    return c;
  };
  const level = (): unknown[] => {
    if (at() !== "{") throw new Error(`Postgres sent a malformed array literal: ${text}`);
    i++;
    const out: unknown[] = [];
    if (at() === "}") {
      i++;
      return out;
    }
    for (;;) {
      if (at() === "{") {
        out.push(level());
      } else if (at() === '"') {
        let s = "";
        i++;
        while (at() !== '"') {
          if (at() === "\\") i++;
          s += at();
          i++;
        }
        i++;
        out.push(parseElement(s));
      } else {
        const start = i;
        while (at() !== "," && at() !== "}") i++;
        const s = text.slice(start, i);
        out.push(s === "NULL" ? null : parseElement(s));
      }
      if (at() === "}") {
        i++;
        return out;
      }
      i++; // ","
    }
  };
  return level();
}

const asText: TextParser = (s) => s;
const asNumber: TextParser = (s) => Number(s);
const asBoolean: TextParser = (s) => s === "t";
const asJson: TextParser = (s) => JSON.parse(s) as unknown;

/** Scalar type OID → [parser, array type OID]. Text-like types need no entry for the scalar. */
const SCALARS: ReadonlyArray<[oid: number, parse: TextParser, arrayOid: number]> = [
  [16, asBoolean, 1000], // bool
  [17, parseBytea, 1001], // bytea → Buffer
  [20, asText, 1016], // int8: exact, as a string
  [21, asNumber, 1005], // int2
  [23, asNumber, 1007], // int4
  [26, asNumber, 1028], // oid
  [700, asNumber, 1021], // float4
  [701, asNumber, 1022], // float8
  [1700, asText, 1231], // numeric: exact, as a string
  [114, asJson, 199], // json
  [3802, asJson, 3807], // jsonb
  [1114, parseTimestamp, 1115], // timestamp (read as UTC)
  [1184, parseTimestamp, 1185], // timestamptz
  [1082, asText, 1182], // date: "YYYY-MM-DD", no time zone to guess
  [25, asText, 1009], // text
  [1043, asText, 1015], // varchar
  [1042, asText, 1014], // bpchar
  [2950, asText, 2951], // uuid
];

/**
 * Type OID → parser, for both drivers. A type without an entry comes back as Postgres's text
 * (PGlite's own parsers are replaced by this table, node-postgres's are never consulted).
 */
export const TEXT_PARSERS: Readonly<Record<number, TextParser>> = Object.fromEntries(
  SCALARS.flatMap(([oid, parse, arrayOid]) => [
    [oid, parse],
    [arrayOid, (s: string) => parseArray(s, parse)],
  ]),
);

export function parserFor(oid: number): TextParser {
  return TEXT_PARSERS[oid] ?? asText;
}

/** A parameter as both drivers send it: text, bytes (bytea only) or NULL. */
export type Param = string | Uint8Array | null;

function jsonText(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === "bigint" ? v.toString() : v));
}

function arrayLiteral(values: readonly unknown[]): string {
  const items = values.map((v): string => {
    if (v === null || v === undefined) return "NULL";
    if (Array.isArray(v)) return arrayLiteral(v);
    const text = v instanceof Uint8Array ? `\\x${Buffer.from(v).toString("hex")}` : toParam(v);
    return `"${String(text).replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
  });
  return `{${items.join(",")}}`;
}

/**
 * One parameter, converted the same way for both drivers (the server then casts the text to
 * the parameter's type): Date → ISO 8601 UTC; array → a Postgres array; plain object → JSON;
 * Uint8Array → bytea. For a json/jsonb parameter whose value is an array, pass
 * `JSON.stringify(value)`: a JavaScript array is always a Postgres array.
 */
export function toParam(value: unknown): Param {
  switch (typeof value) {
    case "undefined":
      return null;
    case "string":
      return value;
    case "number":
    case "bigint":
      return String(value);
    case "boolean":
      return value ? "true" : "false";
    case "object":
      if (value === null) return null;
      if (value instanceof Date) {
        if (Number.isNaN(value.getTime()))
          throw new TypeError("Query parameter is an invalid Date.");
        return value.toISOString();
      }
      if (value instanceof Uint8Array) return value;
      if (Array.isArray(value)) return arrayLiteral(value);
      return jsonText(value);
    default:
      throw new TypeError(
        `A ${typeof value} cannot be a query parameter; pass a string, number, boolean, Date, array or object.`,
      );
  }
}

export function toParams(params: readonly unknown[] | undefined): Param[] {
  return params ? params.map(toParam) : [];
}

/** Commands whose row count is "affected rows"; a SELECT counts 0 on both drivers. */
const AFFECTING_COMMANDS = new Set(["INSERT", "UPDATE", "DELETE", "MERGE", "COPY"]);

export function affectedRows(
  command: string | undefined,
  rowCount: number | null | undefined,
): number {
  return command !== undefined && AFFECTING_COMMANDS.has(command) ? (rowCount ?? 0) : 0;
}

const IDENTIFIER_RE = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * Channel and schema names are plain lower-case identifiers, so both drivers spell them alike
 * and they can be written into SQL without quoting.
 */
export function assertIdentifier(what: "notification channel" | "schema", name: string): void {
  if (!IDENTIFIER_RE.test(name)) {
    throw new Error(
      `Invalid ${what} "${name}": use 1-63 lower-case letters, digits and underscores, not starting with a digit.`,
    );
  }
}

/** The SET statements of SESSION_SETTINGS, plus search_path when a schema is given. */
export function sessionSql(schema: string | undefined): string {
  const sets = Object.entries(SESSION_SETTINGS).map(([k, v]) => `SET ${k} = '${v}';`);
  if (schema !== undefined) sets.push(`SET search_path = ${schema};`);
  return sets.join("\n");
}

/** SQLSTATE of a database error from either driver (`23505` unique violation, ...). */
export function sqlState(err: unknown): string | undefined {
  if (typeof err !== "object" || err === null || !("code" in err)) return undefined;
  return typeof err.code === "string" ? err.code : undefined;
}

/** COMMIT answered ROLLBACK: a statement in the transaction failed and its error was caught. */
export class TransactionAbortedError extends Error {
  readonly code = "25P02";
  constructor() {
    super(
      "Transaction was rolled back instead of committed: a statement in it failed and the error was caught; let the error propagate or use a savepoint.",
    );
    this.name = "TransactionAbortedError";
  }
}

/** `tx` used after its transaction ended. */
export function closedTransactionError(): Error {
  return new Error(
    "Transaction is closed: use tx only inside the transaction callback, and await every query.",
  );
}
