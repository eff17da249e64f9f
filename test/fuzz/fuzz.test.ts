// A short fuzz campaign in `npm test` (the full one: `npm run fuzz`, README "Fuzz campaign"):
// a real agent and server, 1,500 seeded hostile requests and 15 hostile chats, no violation.

import { describe, expect, it } from "vitest";
import { DEFAULTS, formatViolation, runCampaign } from "./campaign.ts";

describe("fuzz campaign", () => {
  it("1,500 requests and 15 hostile chats: no violation", async () => {
    const seed = Number(process.env.TETHER_FUZZ_SEED ?? 20261201);
    const r = await runCampaign({ ...DEFAULTS, seed, requests: 1_500, chats: 15 });
    expect(r.violations.map((v) => formatViolation(v, seed))).toEqual([]);
    expect(r.requests).toBe(1_500);
    expect(r.chats).toBe(15);
    // It did reach the parts it checks: runs, refusals, records probed, repeats, both targets.
    for (const k of [
      "agent 2xx",
      "agent 4xx",
      "server 2xx",
      "server 4xx",
      "effects seen",
      "refused with an effect marker",
      "record probes",
      "replays",
    ]) {
      expect(r.stats[k] ?? 0, k).toBeGreaterThan(0);
    }
    expect((r.stats["chat waiting"] ?? 0) + (r.stats["chat error"] ?? 0)).toBe(15);
  }, 240_000);
});
