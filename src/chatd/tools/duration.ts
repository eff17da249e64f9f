// Duration strings the model writes for timeouts ("30s", "2m", "1h30m", "250ms"): a sequence
// of decimal numbers with units ms, s, m or h, largest first, like Go's time.ParseDuration
// without signs. A parse failure says what a valid duration looks like, for the model.

const UNIT_MS = { h: 3_600_000, m: 60_000, s: 1_000, ms: 1 } as const;
type Unit = keyof typeof UNIT_MS;
const UNIT_ORDER: readonly Unit[] = ["h", "m", "s", "ms"];

/** The longest duration accepted: one day (and well inside a timer's 2^31−1 ms range). */
export const MAX_DURATION_MS = 24 * 3_600_000;

export type ParsedDuration = { ok: true; ms: number } | { ok: false; message: string };

const PART = /(\d+(?:\.\d+)?)(ms|h|m|s)/y;

/** Milliseconds of `text` (rounded down), or a message saying why it is not a duration. */
export function parseDuration(text: string): ParsedDuration {
  const s = text.trim();
  const bad = (why: string): ParsedDuration => ({
    ok: false,
    message: `"${text}" is not a duration: ${why}. Write a number with a unit, for example "30s", "2m" or "1h30m".`,
  });
  if (s === "") return bad("it is empty");
  let total = 0;
  let last = -1;
  PART.lastIndex = 0;
  while (PART.lastIndex < s.length) {
    const at = PART.lastIndex;
    const m = PART.exec(s);
    if (!m) {
      return /^\d+(\.\d+)?$/.test(s.slice(at))
        ? bad("the number has no unit (ms, s, m or h)")
        : bad(`unexpected "${s.slice(at)}"`);
    }
    const unit = m[2] as Unit;
    const rank = UNIT_ORDER.indexOf(unit);
    if (rank <= last) return bad("units must go from largest to smallest, each once");
    last = rank;
    total += Number(m[1]) * UNIT_MS[unit];
  }
  if (total > MAX_DURATION_MS) return bad("it is longer than the maximum of 24h");
  return { ok: true, ms: Math.floor(total) };
}

/** A short human form of `ms` for notes: "10s", "1m30s", "250ms", "1s500ms". */
export function formatDuration(ms: number): string {
  let rest = Math.max(0, Math.round(ms));
  if (rest < 1_000) return `${rest}ms`;
  let out = "";
  for (const unit of ["h", "m", "s"] as const) {
    const n = Math.floor(rest / UNIT_MS[unit]);
    rest -= n * UNIT_MS[unit];
    if (n > 0) out += `${n}${unit}`;
  }
  return rest > 0 ? `${out}${rest}ms` : out;
}
