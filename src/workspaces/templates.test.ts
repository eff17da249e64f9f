import { describe, expect, it } from "vitest";
import { TemplateFiles } from "./templates.ts";

const ok = (files: Record<string, string>) => TemplateFiles.safeParse(files).success;

describe("TemplateFiles", () => {
  it("takes relative paths with a top-level .tf file", () => {
    expect(ok({ "main.tf": "", "scripts/start.sh": "echo" })).toBe(true);
  });

  it("refuses paths that leave the folder or are Terraform's own", () => {
    for (const bad of ["../x.tf", "/etc/x", "a/../b", "./main2.tf", "a//b", "a\\b"])
      expect([bad, ok({ "main.tf": "", [bad]: "" })]).toEqual([bad, false]);
    expect(ok({ "main.tf": "", ".terraform/x": "" })).toBe(false);
    expect(ok({ "main.tf": "", "terraform.tfstate": "" })).toBe(false);
    expect(ok({ "main.tf": "", "terraform.tfstate.backup": "" })).toBe(false);
  });

  it("refuses a file where another file needs a folder", () => {
    expect(ok({ "main.tf": "", scripts: "", "scripts/start.sh": "" })).toBe(false);
    expect(ok({ "main.tf": "", "main.tf/x": "" })).toBe(false);
    expect(ok({ "main.tf": "", "a/b": "", "a/b/c": "" })).toBe(false);
    expect(ok({ "main.tf": "", a: "", "a/b/c": "" })).toBe(false);
    expect(ok({ "main.tf": "", "a/b": "", "a/bc": "", ab: "", "main.tff": "" })).toBe(true);
  });

  it("needs a .tf file at the top level", () => {
    expect(ok({})).toBe(false);
    expect(ok({ "modules/a.tf": "" })).toBe(false);
    expect(ok({ "README.md": "" })).toBe(false);
  });
});
