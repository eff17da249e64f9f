import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { runTerraform, terraformEnv, terraformSteps, type TemplateVariables } from "./terraform.ts";

const vars: TemplateVariables = {
  tether_workspace_id: "w1",
  tether_workspace_name: "dev",
  tether_owner: "a@b.c",
  tether_start_count: 1,
  tether_server_url: "http://127.0.0.1:3000",
  tether_agent_token: "tok",
  tether_bin: "/opt/tether/bin/tether",
};

describe("terraformEnv", () => {
  it("a template's processes get the Tether variables and Terraform's settings, never the server's secrets", () => {
    const env = terraformEnv(vars, "/cache", {
      PATH: "/usr/bin",
      HOME: "/root",
      ANTHROPIC_API_KEY: "sk-secret",
      TETHER_POSTGRES_URL: "postgres://x",
      AWS_SECRET_ACCESS_KEY: "aws",
      TF_VAR_other: "from the server",
      DOCKER_HOST: "tcp://x",
    });
    expect(env).toEqual({
      PATH: "/usr/bin",
      HOME: "/root",
      TF_IN_AUTOMATION: "1",
      TF_INPUT: "0",
      CHECKPOINT_DISABLE: "1",
      TF_PLUGIN_CACHE_DIR: "/cache",
      TF_VAR_tether_workspace_id: "w1",
      TF_VAR_tether_workspace_name: "dev",
      TF_VAR_tether_owner: "a@b.c",
      TF_VAR_tether_start_count: "1",
      TF_VAR_tether_server_url: "http://127.0.0.1:3000",
      TF_VAR_tether_agent_token: "tok",
      TF_VAR_tether_bin: "/opt/tether/bin/tether",
    });
  });
});

describe("terraformSteps", () => {
  it("start and stop apply, delete destroys; never asking for input", () => {
    expect(terraformSteps("start")).toEqual([
      ["init", "-input=false", "-no-color"],
      ["apply", "-auto-approve", "-input=false", "-no-color"],
    ]);
    expect(terraformSteps("stop")[1]![0]).toBe("apply");
    expect(terraformSteps("delete")[1]).toEqual([
      "destroy",
      "-auto-approve",
      "-input=false",
      "-no-color",
    ]);
  });
});

describe("runTerraform", () => {
  it("a server without terraform fails the build saying so, and writes nothing", async () => {
    const cache = await mkdtemp(path.join(os.tmpdir(), "tether-tf-cache-"));
    const output: string[] = [];
    try {
      const result = await runTerraform({
        transition: "start",
        files: { "main.tf": 'resource "terraform_data" "x" {}\n' },
        variables: vars,
        terraformBin: path.join(cache, "no-such-terraform"),
        pluginCacheDir: cache,
        onOutput: (t) => output.push(t),
        signal: new AbortController().signal,
      });
      expect(result.status).toBe("failed");
      expect(result.status === "failed" && result.error).toMatch(
        /^Terraform was not found \(.*no-such-terraform\): install it on every server replica/,
      );
      expect(result.state).toBeUndefined();
    } finally {
      await rm(cache, { recursive: true, force: true });
    }
  });
});
