// Runtime billing (CHATD.md 9): a tool batch bills the union of its billable calls'
// execution intervals, so overlapping calls count once and gaps are free.

export interface Interval {
  start: number;
  end: number;
}

/** Total length of the union of `intervals` (ms); empty or inverted intervals count 0. */
export function unionMs(intervals: readonly Interval[]): number {
  const sorted = intervals.filter((i) => i.end > i.start).sort((a, b) => a.start - b.start);
  let total = 0;
  let curStart = -Infinity;
  let curEnd = -Infinity;
  for (const i of sorted) {
    if (i.start > curEnd) {
      if (curEnd > curStart) total += curEnd - curStart;
      curStart = i.start;
      curEnd = i.end;
    } else if (i.end > curEnd) {
      curEnd = i.end;
    }
  }
  if (curEnd > curStart) total += curEnd - curStart;
  return total;
}

/** A model's prices: integer micro-dollars per million input and output tokens. */
export interface ModelPrices {
  inputPerMtokMicros: number;
  outputPerMtokMicros: number;
}

export const FREE: ModelPrices = { inputPerMtokMicros: 0, outputPerMtokMicros: 0 };

/** A `model_configs` row's prices (bigint columns: the drivers may answer decimal strings). */
export function pricesOf(row: {
  input_price_per_mtok_micros: string | number;
  output_price_per_mtok_micros: string | number;
}): ModelPrices {
  return {
    inputPerMtokMicros: Number(row.input_price_per_mtok_micros),
    outputPerMtokMicros: Number(row.output_price_per_mtok_micros),
  };
}

/** What a model call cost in micro-dollars, rounded to the nearest one. */
export function costMicros(
  usage: { inputTokens: number; outputTokens: number },
  p: ModelPrices,
): number {
  return Math.round(
    (usage.inputTokens * p.inputPerMtokMicros + usage.outputTokens * p.outputPerMtokMicros) /
      1_000_000,
  );
}
