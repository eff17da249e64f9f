import { describe, expect, it } from "vitest";
import { Registry, escapeLabelValue, formatValue } from "./registry.ts";

describe("metrics registry", () => {
  it("a counter without labels reads 0 before its first increment and adds what it is given", async () => {
    const r = new Registry();
    const c = r.counter({ name: "jobs_total", help: "Jobs done." });
    expect(await r.render()).toBe(
      "# HELP jobs_total Jobs done.\n# TYPE jobs_total counter\njobs_total 0\n",
    );
    c.inc();
    c.inc(2.5);
    expect(c.value()).toBe(3.5);
    expect(await r.render()).toContain("\njobs_total 3.5\n");
  });

  it("a labelled counter has one series per label set, in the order they appeared", async () => {
    const r = new Registry();
    const c = r.counter({ name: "calls_total", help: "Calls.", labelNames: ["tool", "status"] });
    expect(await r.render()).toBe("# HELP calls_total Calls.\n# TYPE calls_total counter\n");
    c.inc({ tool: "execute", status: "completed" });
    c.inc({ status: "error", tool: "read_file" });
    c.inc({ tool: "execute", status: "completed" });
    expect(await r.render()).toBe(
      [
        "# HELP calls_total Calls.",
        "# TYPE calls_total counter",
        'calls_total{tool="execute",status="completed"} 2',
        'calls_total{tool="read_file",status="error"} 1',
        "",
      ].join("\n"),
    );
    expect(c.value({ tool: "execute", status: "completed" })).toBe(2);
    expect(c.value({ tool: "write_file", status: "applied" })).toBe(0);
    // Reading a series that does not exist does not create one.
    expect(await r.render()).not.toContain("write_file");
  });

  it("a counter refuses to go down and labels that are not exactly its names", () => {
    const r = new Registry();
    const c = r.counter({ name: "a_total", help: "A.", labelNames: ["x"] });
    expect(() => c.inc({ x: "1" }, -1)).toThrow(/cannot add -1/);
    expect(() => c.inc({ x: "1" }, NaN)).toThrow(/cannot add NaN/);
    expect(() => c.inc({} as { x: string })).toThrow(/labels must be exactly \{x\}/);
    expect(() => c.inc({ x: "1", y: "2" } as { x: string })).toThrow(/labels must be exactly/);
  });

  it("label values escape backslash, double quote and line feed; HELP escapes backslash and line feed", async () => {
    const r = new Registry();
    const g = r.gauge({ name: "g", help: 'Back\\slash "quoted"\nsecond line', labelNames: ["v"] });
    g.set({ v: 'a\\b"c\nd' }, -2);
    const text = await r.render();
    expect(text).toBe(
      [
        '# HELP g Back\\\\slash "quoted"\\nsecond line',
        "# TYPE g gauge",
        'g{v="a\\\\b\\"c\\nd"} -2',
        "",
      ].join("\n"),
    );
    expect(escapeLabelValue("plain")).toBe("plain");
  });

  it("special values are written as Go reads them", () => {
    expect(formatValue(Infinity)).toBe("+Inf");
    expect(formatValue(-Infinity)).toBe("-Inf");
    expect(formatValue(NaN)).toBe("NaN");
    expect(formatValue(0.25)).toBe("0.25");
    expect(formatValue(1e21)).toBe("1e+21");
  });

  it("a gauge's collect runs before each scrape, and reset drops label sets no longer there", async () => {
    const r = new Registry();
    let rows: [string, number][] = [
      ["running", 2],
      ["waiting", 5],
    ];
    r.gauge({
      name: "chats",
      help: "Chats by status.",
      labelNames: ["status"],
      collect: async (g) => {
        await Promise.resolve();
        g.reset();
        for (const [status, n] of rows) g.set({ status }, n);
      },
    });
    expect(await r.render()).toContain('chats{status="running"} 2\nchats{status="waiting"} 5\n');
    rows = [["error", 1]];
    const text = await r.render();
    expect(text).toContain('chats{status="error"} 1\n');
    expect(text).not.toContain("running");
  });

  it("a histogram writes cumulative buckets, +Inf, sum and count per label set", async () => {
    const r = new Registry();
    const h = r.histogram({
      name: "req_seconds",
      help: "Request time.",
      labelNames: ["route"],
      buckets: [0.1, 1, 10],
    });
    h.observe({ route: "GET /a" }, 0.05);
    h.observe({ route: "GET /a" }, 0.1); // on the bound: counts in le="0.1"
    h.observe({ route: "GET /a" }, 3);
    h.observe({ route: "GET /a" }, 42);
    h.observe({ route: "POST /b" }, 0.5);
    expect(await r.render()).toBe(
      [
        "# HELP req_seconds Request time.",
        "# TYPE req_seconds histogram",
        'req_seconds_bucket{route="GET /a",le="0.1"} 2',
        'req_seconds_bucket{route="GET /a",le="1"} 2',
        'req_seconds_bucket{route="GET /a",le="10"} 3',
        'req_seconds_bucket{route="GET /a",le="+Inf"} 4',
        'req_seconds_sum{route="GET /a"} 45.15',
        'req_seconds_count{route="GET /a"} 4',
        'req_seconds_bucket{route="POST /b",le="0.1"} 0',
        'req_seconds_bucket{route="POST /b",le="1"} 1',
        'req_seconds_bucket{route="POST /b",le="10"} 1',
        'req_seconds_bucket{route="POST /b",le="+Inf"} 1',
        'req_seconds_sum{route="POST /b"} 0.5',
        'req_seconds_count{route="POST /b"} 1',
        "",
      ].join("\n"),
    );
    expect(h.value({ route: "GET /a" })).toEqual({ count: 4, sum: 45.15 });
  });

  it("a histogram without labels starts with every bucket at 0", async () => {
    const r = new Registry();
    r.histogram({ name: "t_seconds", help: "T.", buckets: [1] });
    expect(await r.render()).toBe(
      [
        "# HELP t_seconds T.",
        "# TYPE t_seconds histogram",
        't_seconds_bucket{le="1"} 0',
        't_seconds_bucket{le="+Inf"} 0',
        "t_seconds_sum 0",
        "t_seconds_count 0",
        "",
      ].join("\n"),
    );
  });

  it("names are checked: invalid names, the reserved le label, clashes and bad buckets throw", () => {
    const r = new Registry();
    expect(() => r.counter({ name: "bad-name", help: "x" })).toThrow(/Invalid metric name/);
    expect(() => r.counter({ name: "ok", help: "x", labelNames: ["bad-label"] })).toThrow(
      /invalid label name/,
    );
    expect(() => r.counter({ name: "ok", help: "x", labelNames: ["__reserved"] })).toThrow(
      /invalid label name/,
    );
    expect(() => r.histogram({ name: "h", help: "x", labelNames: ["le"] })).toThrow(/reserved/);
    expect(() => r.histogram({ name: "h", help: "x", buckets: [1, 1] })).toThrow(/increasing/);
    r.histogram({ name: "lat", help: "x" });
    expect(() => r.counter({ name: "lat_count", help: "x" })).toThrow(/clashes/);
    expect(() => r.gauge({ name: "lat", help: "x" })).toThrow(/clashes/);
  });

  it("two registries share nothing", async () => {
    const a = new Registry();
    const b = new Registry();
    a.counter({ name: "n_total", help: "N." }).inc(5);
    b.counter({ name: "n_total", help: "N." });
    expect(await b.render()).toContain("\nn_total 0\n");
  });
});
