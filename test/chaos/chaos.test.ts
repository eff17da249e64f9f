// A short fault campaign with a fixed seed: real replicas on a fresh Postgres database, real
// agents behind fault proxies and dial-out agents through TCP fronts, the fake model. It must
// find no violation, and it must have exercised what it claims to test (faults, committed tool
// calls, a failover, an interrupt, tool calls on dial-out agents and their connections cut),
// so it cannot pass by doing nothing.

import { afterAll, describe, expect, it } from "vitest";
import { testDatabaseUrl, TEST_DATABASE_URL_ENV } from "../support/db.ts";
import { DEFAULTS, runCampaign } from "./campaign.ts";
import { formatViolation } from "./checker.ts";
import { killAll } from "./procs.ts";

const url = testDatabaseUrl();
if (!url) {
  console.warn(
    `${TEST_DATABASE_URL_ENV} is not set: the chaos campaign needs a Postgres server where it may ` +
      `create a database, e.g. ${TEST_DATABASE_URL_ENV}=postgres://postgres@127.0.0.1:5432/test`,
  );
}

afterAll(killAll);

describe.skipIf(!url)("chaos campaign (Postgres)", () => {
  it("keeps every promise under injected faults, and really injects them", async () => {
    const result = await runCampaign({
      ...DEFAULTS,
      // Short (about a minute on a loaded 2-core machine): `npm run chaos` runs long ones.
      seed: 1,
      scenarios: 2,
      faultWindowMs: 6_000,
      postgresUrl: url!,
      log: (line) => console.log(line),
    });
    const s = result.stats;
    console.log(JSON.stringify(s));
    expect(result.violations.map(formatViolation)).toEqual([]);
    expect(s.scenarios).toBe(2);
    expect(s.faults).toBeGreaterThan(0);
    expect(s.toolCalls).toBeGreaterThan(0);
    expect(Object.values(s.results).reduce((a, b) => a + b, 0)).toBe(s.toolCalls);
    expect(s.failovers).toBeGreaterThanOrEqual(1);
    expect(s.interrupts).toBeGreaterThanOrEqual(1);
    expect(s.dialoutAgents).toBe(2);
    expect(s.dialoutToolCalls).toBeGreaterThan(0);
    const cuts = ["cut_agent", "cut_agent_answer", "freeze_agent"].map(
      (k) => s.faultsByKind[k] ?? 0,
    );
    expect(cuts.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(2);
    // Each cut makes its agent dial again: more connections than agents.
    expect(s.dialoutConnects).toBeGreaterThan(s.dialoutAgents);
  }, 240_000);
});
