import { describe, expect, it } from "vitest";
import type { Build } from "./builds.ts";
import { nextStep } from "./readiness.ts";
import type { WorkspaceState } from "./workspace.ts";

const now = new Date("2026-01-01T12:00:00Z");
const at = (ms: number) => new Date(now.getTime() + ms);
const turn = at(-5_000);
const limits = { warmUpMs: 2_500, connectTimeoutMs: 60_000 };

function build(b: Partial<Build>): Build {
  return {
    id: "b1",
    workspaceId: "w1",
    transition: "start",
    reason: "user",
    status: "succeeded",
    templateVersion: 1,
    createdBy: null,
    workerId: null,
    error: null,
    createdAt: at(-10_000),
    startedAt: at(-10_000),
    finishedAt: at(-9_000),
    ...b,
  };
}

function ws(w: Partial<WorkspaceState>): WorkspaceState {
  return {
    id: "w1",
    name: "dev",
    ownerId: null,
    shared: false,
    templateId: "t1",
    templateVersion: 1,
    status: "running",
    latestBuild: build({}),
    ttlMs: 0,
    connected: true,
    connectedForMs: 10_000,
    busy: true,
    lastActiveAt: undefined,
    deadline: undefined,
    now,
    ...w,
  };
}

describe("nextStep (the turn's wait for its workspace)", () => {
  it("a running workspace whose agent is connected and past the age margin is ready", () => {
    expect(nextStep(ws({}), turn, 5_000, limits)).toEqual({ status: "ready" });
  });

  it("an agent younger than the margin is waited for, by its reported uptime", () => {
    expect(nextStep(ws({ connectedForMs: 500 }), turn, 1_000, limits)).toEqual({
      status: "wait",
      ms: 1_500,
    });
  });

  it("the time since it connected is a lower bound of its uptime when none is reported", () => {
    expect(nextStep(ws({ connectedForMs: 3_000 }), turn, undefined, limits)).toEqual({
      status: "ready",
    });
    expect(nextStep(ws({ connectedForMs: 1_000 }), turn, undefined, limits)).toMatchObject({
      status: "wait",
    });
  });

  it("a running workspace without its agent is waited for, up to the connect timeout", () => {
    const w = ws({ connected: false, connectedForMs: undefined });
    expect(nextStep(w, turn, undefined, limits)).toEqual({ status: "wait" });
    const late = { ...w, latestBuild: build({ finishedAt: at(-61_000) }) };
    expect(nextStep(late, turn, undefined, limits)).toMatchObject({ status: "fail" });
  });

  it("a stopped workspace is started; one starting or stopping is waited for", () => {
    expect(nextStep(ws({ status: "stopped" }), turn, undefined, limits)).toEqual({
      status: "start",
    });
    for (const status of ["starting", "stopping"] as const)
      expect(nextStep(ws({ status }), turn, undefined, limits)).toEqual({ status: "wait" });
  });

  it("a start that failed during the turn ends it, naming the build; an older failure is started again", () => {
    const during = ws({
      status: "failed",
      latestBuild: build({ id: "b9", status: "failed", error: "boom", finishedAt: at(-1_000) }),
    });
    const step = nextStep(during, turn, undefined, limits);
    expect(step).toMatchObject({ status: "fail" });
    expect(step.status === "fail" && step.message).toContain("build b9 failed: boom");
    const before = ws({
      status: "failed",
      latestBuild: build({ status: "failed", finishedAt: at(-6_000) }),
    });
    expect(nextStep(before, turn, undefined, limits)).toEqual({ status: "start" });
    const stopFailed = ws({
      status: "failed",
      latestBuild: build({ transition: "stop", status: "failed", finishedAt: at(-1_000) }),
    });
    expect(nextStep(stopFailed, turn, undefined, limits)).toEqual({ status: "start" });
  });

  it("a workspace being deleted ends the turn", () => {
    expect(nextStep(ws({ status: "deleting" }), turn, undefined, limits)).toMatchObject({
      status: "fail",
    });
  });
});
