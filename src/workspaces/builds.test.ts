import { describe, expect, it } from "vitest";
import { workspaceStatus, type BuildStatus, type BuildTransition } from "./builds.ts";

describe("workspaceStatus", () => {
  it("follows the latest build: in progress, done, or failed", () => {
    const table: [BuildTransition, BuildStatus, string][] = [
      ["start", "pending", "starting"],
      ["start", "running", "starting"],
      ["start", "succeeded", "running"],
      ["start", "failed", "failed"],
      ["stop", "pending", "stopping"],
      ["stop", "running", "stopping"],
      ["stop", "succeeded", "stopped"],
      ["stop", "failed", "failed"],
      ["delete", "pending", "deleting"],
      ["delete", "running", "deleting"],
      ["delete", "succeeded", "deleting"],
      ["delete", "failed", "failed"],
    ];
    for (const [transition, status, expected] of table)
      expect([transition, status, workspaceStatus({ transition, status })]).toEqual([
        transition,
        status,
        expected,
      ]);
  });
});
