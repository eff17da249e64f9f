import { describe, expect, it } from "vitest";
import { terraformEnv, terraformSteps, type TemplateVariables } from "./terraform.ts";

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
