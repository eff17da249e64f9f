// A small metrics registry in the Prometheus text exposition format 0.0.4: counters, gauges
// and histograms with labels. A registry is a plain object owned by whoever creates it (one
// per server), never a module global, so in-process servers and tests never share values.

/** The Content-Type of {@link Registry.render}'s text. */
export const EXPOSITION_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** Seconds: from 5 ms to 60 s, for request and task durations. */
export const DEFAULT_SECONDS_BUCKETS: readonly number[] = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
];

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** One value per label name; a metric without labels takes none. */
export type Labels<L extends string> = Readonly<Record<L, string>>;

interface Family {
  readonly name: string;
  readonly help: string;
  readonly type: "counter" | "gauge" | "histogram";
  /** Brings the values up to date just before a scrape (gauges computed at scrape time). */
  collect?(): void | Promise<void>;
  /** The sample lines, without HELP and TYPE. */
  samples(): string[];
}

/** A set of series, one per distinct label set, in the order they first appeared. */
class Series<L extends string, V> {
  readonly #labelNames: readonly L[];
  readonly #series = new Map<string, { labels: string[]; value: V }>();

  constructor(
    readonly metric: string,
    labelNames: readonly L[],
    private readonly initial: () => V,
  ) {
    for (const l of labelNames) {
      if (!LABEL_NAME.test(l) || l.startsWith("__")) {
        throw new Error(`Metric ${metric}: invalid label name "${l}".`);
      }
    }
    if (new Set(labelNames).size !== labelNames.length) {
      throw new Error(`Metric ${metric}: a label name is repeated.`);
    }
    this.#labelNames = labelNames;
    // A metric without labels has its one series from the start (a counter reads 0).
    if (labelNames.length === 0) this.get(undefined);
  }

  get labelNames(): readonly L[] {
    return this.#labelNames;
  }

  /** The series of `labels`, created when new; the label set must be exactly the names. */
  get(labels: Labels<L> | undefined): { labels: string[]; value: V } {
    const values = this.#values(labels);
    const key = JSON.stringify(values);
    let s = this.#series.get(key);
    if (!s) {
      s = { labels: values, value: this.initial() };
      this.#series.set(key, s);
    }
    return s;
  }

  /** The series of `labels` if it exists; reading never creates one. */
  find(labels: Labels<L> | undefined): V | undefined {
    return this.#series.get(JSON.stringify(this.#values(labels)))?.value;
  }

  #values(labels: Labels<L> | undefined): string[] {
    const given = labels ? Object.keys(labels) : [];
    if (given.length !== this.#labelNames.length || given.some((k) => !this.#has(k))) {
      throw new Error(
        `Metric ${this.metric}: labels must be exactly {${this.#labelNames.join(", ")}}, got {${given.join(", ")}}.`,
      );
    }
    return this.#labelNames.map((l) => {
      const v = (labels as Record<string, unknown>)[l];
      if (typeof v !== "string")
        throw new Error(`Metric ${this.metric}: label ${l} is not a string.`);
      return v;
    });
  }

  entries(): { labels: string[]; value: V }[] {
    return [...this.#series.values()];
  }

  clear(): void {
    this.#series.clear();
    if (this.#labelNames.length === 0) this.get(undefined);
  }

  /** `{a="x",b="y"}` for a series' label values, with `extra` pairs after them. */
  labelText(values: string[], extra: [string, string][] = []): string {
    const pairs: [string, string][] = this.#labelNames.map((l, i) => [l, values[i]!]);
    pairs.push(...extra);
    if (pairs.length === 0) return "";
    return `{${pairs.map(([k, v]) => `${k}="${escapeLabelValue(v)}"`).join(",")}}`;
  }

  #has(k: string): boolean {
    return (this.#labelNames as readonly string[]).includes(k);
  }
}

/** Only goes up; reset only by a restart of the process (Prometheus handles that). */
export class Counter<L extends string = never> implements Family {
  readonly type = "counter";
  readonly #s: Series<L, { v: number }>;

  constructor(
    readonly name: string,
    readonly help: string,
    labelNames: readonly L[],
  ) {
    this.#s = new Series(name, labelNames, () => ({ v: 0 }));
  }

  inc(...args: [L] extends [never] ? [value?: number] : [labels: Labels<L>, value?: number]): void {
    const [labels, value] = this.#args(args);
    if (!(value >= 0)) throw new Error(`Counter ${this.name}: cannot add ${value}.`);
    this.#s.get(labels).value.v += value;
  }

  /** The current value of a series (0 when it has none yet). */
  value(...args: [L] extends [never] ? [] : [labels: Labels<L>]): number {
    return this.#s.find(args[0])?.v ?? 0;
  }

  samples(): string[] {
    return this.#s
      .entries()
      .map((e) => `${this.name}${this.#s.labelText(e.labels)} ${formatValue(e.value.v)}`);
  }

  #args(args: unknown[]): [Labels<L> | undefined, number] {
    if (this.#s.labelNames.length === 0) return [undefined, (args[0] as number | undefined) ?? 1];
    return [args[0] as Labels<L>, (args[1] as number | undefined) ?? 1];
  }
}

/** A value that goes up and down, set by its owner or by `collect` at scrape time. */
export class Gauge<L extends string = never> implements Family {
  readonly type = "gauge";
  readonly #s: Series<L, { v: number }>;
  readonly #collect: ((g: Gauge<L>) => void | Promise<void>) | undefined;

  constructor(
    readonly name: string,
    readonly help: string,
    labelNames: readonly L[],
    collect?: (g: Gauge<L>) => void | Promise<void>,
  ) {
    this.#s = new Series(name, labelNames, () => ({ v: 0 }));
    this.#collect = collect;
  }

  set(...args: [L] extends [never] ? [value: number] : [labels: Labels<L>, value: number]): void {
    if (this.#s.labelNames.length === 0) this.#s.get(undefined).value.v = args[0] as number;
    else this.#s.get(args[0] as Labels<L>).value.v = args[1] as number;
  }

  value(...args: [L] extends [never] ? [] : [labels: Labels<L>]): number {
    return this.#s.find(args[0])?.v ?? 0;
  }

  /** Drops every series (a collect that sets the full set of label values afresh). */
  reset(): void {
    this.#s.clear();
  }

  collect(): void | Promise<void> {
    return this.#collect?.(this);
  }

  samples(): string[] {
    return this.#s
      .entries()
      .map((e) => `${this.name}${this.#s.labelText(e.labels)} ${formatValue(e.value.v)}`);
  }
}

/** Counts observations into cumulative buckets, with their sum and count. */
export class Histogram<L extends string = never> implements Family {
  readonly type = "histogram";
  readonly #s: Series<L, { buckets: number[]; sum: number; count: number }>;
  readonly #bounds: readonly number[];

  constructor(
    readonly name: string,
    readonly help: string,
    labelNames: readonly L[],
    buckets: readonly number[] = DEFAULT_SECONDS_BUCKETS,
  ) {
    if ((labelNames as readonly string[]).includes("le")) {
      throw new Error(`Histogram ${name}: "le" is reserved for the buckets.`);
    }
    const bounds = buckets.filter((b) => b !== Infinity);
    if (
      bounds.length === 0 ||
      bounds.some((b, i) => !Number.isFinite(b) || (i > 0 && b <= bounds[i - 1]!))
    ) {
      throw new Error(`Histogram ${name}: buckets must be finite and increasing.`);
    }
    this.#bounds = bounds;
    this.#s = new Series(name, labelNames, () => ({
      buckets: bounds.map(() => 0),
      sum: 0,
      count: 0,
    }));
  }

  observe(
    ...args: [L] extends [never] ? [value: number] : [labels: Labels<L>, value: number]
  ): void {
    const [labels, value] =
      this.#s.labelNames.length === 0
        ? [undefined, args[0] as number]
        : [args[0] as Labels<L>, args[1] as number];
    if (Number.isNaN(value)) return; // an observation of nothing: leave the series as it is
    const h = this.#s.get(labels).value;
    // Non-cumulative counts here; render() accumulates them.
    const i = this.#bounds.findIndex((b) => value <= b);
    if (i >= 0) h.buckets[i]! += 1;
    h.sum += value;
    h.count += 1;
  }

  /** The count and sum of a series. */
  value(...args: [L] extends [never] ? [] : [labels: Labels<L>]): { count: number; sum: number } {
    const h = this.#s.find(args[0]);
    return { count: h?.count ?? 0, sum: h?.sum ?? 0 };
  }

  samples(): string[] {
    const out: string[] = [];
    for (const e of this.#s.entries()) {
      let cumulative = 0;
      this.#bounds.forEach((b, i) => {
        cumulative += e.value.buckets[i]!;
        const labels = this.#s.labelText(e.labels, [["le", formatValue(b)]]);
        out.push(`${this.name}_bucket${labels} ${cumulative}`);
      });
      out.push(
        `${this.name}_bucket${this.#s.labelText(e.labels, [["le", "+Inf"]])} ${e.value.count}`,
      );
      out.push(`${this.name}_sum${this.#s.labelText(e.labels)} ${formatValue(e.value.sum)}`);
      out.push(`${this.name}_count${this.#s.labelText(e.labels)} ${e.value.count}`);
    }
    return out;
  }
}

interface MetricOptions<L extends string> {
  /** `[a-zA-Z_:][a-zA-Z0-9_:]*`; a counter's ends in `_total` by convention. */
  name: string;
  help: string;
  labelNames?: readonly L[];
}

export class Registry {
  readonly #families: Family[] = [];

  counter<L extends string = never>(o: MetricOptions<L>): Counter<L> {
    return this.#add(new Counter<L>(o.name, o.help, o.labelNames ?? []));
  }

  gauge<L extends string = never>(
    o: MetricOptions<L> & {
      /** Sets the gauge's values just before each scrape. */
      collect?: (g: Gauge<L>) => void | Promise<void>;
    },
  ): Gauge<L> {
    return this.#add(new Gauge<L>(o.name, o.help, o.labelNames ?? [], o.collect));
  }

  histogram<L extends string = never>(
    o: MetricOptions<L> & { buckets?: readonly number[] },
  ): Histogram<L> {
    return this.#add(new Histogram<L>(o.name, o.help, o.labelNames ?? [], o.buckets));
  }

  /** The exposition text: every family's HELP, TYPE and samples, in registration order. */
  async render(): Promise<string> {
    for (const f of this.#families) await f.collect?.();
    const lines: string[] = [];
    for (const f of this.#families) {
      lines.push(`# HELP ${f.name} ${escapeHelp(f.help)}`, `# TYPE ${f.name} ${f.type}`);
      lines.push(...f.samples());
    }
    return lines.join("\n") + "\n";
  }

  #add<F extends Family>(f: F): F {
    if (!METRIC_NAME.test(f.name)) throw new Error(`Invalid metric name "${f.name}".`);
    const taken = new Set(this.#families.flatMap((g) => names(g)));
    if (names(f).some((n) => taken.has(n))) {
      throw new Error(`Metric ${f.name} clashes with a metric already registered.`);
    }
    this.#families.push(f);
    return f;
  }
}

/** The sample names a family writes (a histogram's three suffixes clash like names). */
function names(f: Family): string[] {
  return f.type === "histogram"
    ? [f.name, `${f.name}_bucket`, `${f.name}_sum`, `${f.name}_count`]
    : [f.name];
}

/** A label value: backslash, double quote and line feed escaped. */
export function escapeLabelValue(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

/** HELP text: backslash and line feed escaped. */
export function escapeHelp(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
}

/** A sample value as Go's ParseFloat reads it: `+Inf`, `-Inf`, `NaN`, else the number. */
export function formatValue(v: number): string {
  if (v === Infinity) return "+Inf";
  if (v === -Infinity) return "-Inf";
  if (Number.isNaN(v)) return "NaN";
  return String(v);
}
