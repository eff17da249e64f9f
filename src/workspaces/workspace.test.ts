import { describe, expect, it } from "vitest";
import { AGENT_CONNECT_GRACE_MS, deadlineOf } from "./workspace.ts";

const now = new Date("2026-01-01T12:00:00Z");
const at = (ms: number) => new Date(now.getTime() + ms);
const running = {
  status: "running" as const,
  ttlMs: 60_000,
  busy: false,
  lastActiveAt: at(-10_000),
  connected: true,
  runningSince: at(-20_000),
  now,
};

describe("deadlineOf", () => {
  it("is the last activity plus the TTL", () => {
    expect(deadlineOf(running)).toEqual(at(50_000));
  });

  it("a busy workspace (a chat runs on it) counts as active now", () => {
    expect(deadlineOf({ ...running, busy: true })).toEqual(at(60_000));
  });

  it("none when the TTL is 0 or the workspace is not running", () => {
    expect(deadlineOf({ ...running, ttlMs: 0 })).toBeUndefined();
    for (const status of ["starting", "stopping", "stopped", "deleting", "failed"] as const)
      expect(deadlineOf({ ...running, status })).toBeUndefined();
  });

  it("an agent that has not connected yet gets the connect grace, even with a shorter TTL", () => {
    const fresh = { ...running, ttlMs: 3_000, connected: false, lastActiveAt: at(-1_000) };
    expect(deadlineOf({ ...fresh, runningSince: at(-1_000) })).toEqual(
      at(AGENT_CONNECT_GRACE_MS - 1_000),
    );
    // A long TTL is longer than the grace: the TTL decides.
    const long = { ...fresh, ttlMs: AGENT_CONNECT_GRACE_MS * 2 };
    expect(deadlineOf({ ...long, runningSince: at(-1_000) })).toEqual(
      at(AGENT_CONNECT_GRACE_MS * 2 - 1_000),
    );
  });
});
