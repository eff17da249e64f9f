import { describe, expect, it } from "vitest";
import { runningTime, type RunInterval } from "./runs.ts";

const H = 3_600_000;
const t = (iso: string) => new Date(iso);
const run = (owner: string, from: string, to: string | null): RunInterval => ({
  workspaceId: `w-${owner}`,
  workspaceName: "w",
  ownerId: owner,
  startedAt: t(from),
  stoppedAt: to === null ? null : t(to),
});

describe("runningTime", () => {
  const now = t("2026-01-03T06:00:00Z");

  it("sums runs per owner, an open run counting until now", () => {
    const m = runningTime(
      [
        run("a", "2026-01-01T10:00:00Z", "2026-01-01T12:00:00Z"),
        run("a", "2026-01-03T05:00:00Z", null),
        run("b", "2026-01-02T00:00:00Z", "2026-01-02T00:30:00Z"),
      ],
      { now },
    );
    expect([...m.values()]).toEqual([
      { ownerId: "a", bucket: null, ms: 3 * H },
      { ownerId: "b", bucket: null, ms: H / 2 },
    ]);
  });

  it("splits a run at day boundaries (UTC) and clips it to the range", () => {
    const m = runningTime([run("a", "2026-01-01T22:00:00Z", "2026-01-02T03:00:00Z")], {
      now,
      bucket: "day",
      from: t("2026-01-01T23:00:00Z"),
    });
    expect([...m.values()]).toEqual([
      { ownerId: "a", bucket: "2026-01-01", ms: H },
      { ownerId: "a", bucket: "2026-01-02", ms: 3 * H },
    ]);
  });

  it("hours are named like the report's hour rows", () => {
    const m = runningTime([run("a", "2026-01-01T10:30:00Z", "2026-01-01T11:15:00Z")], {
      now,
      bucket: "hour",
    });
    expect([...m.values()].map((e) => [e.bucket, e.ms])).toEqual([
      ["2026-01-01T10:00:00Z", H / 2],
      ["2026-01-01T11:00:00Z", H / 4],
    ]);
  });
});
