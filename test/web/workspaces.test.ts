// Template workspaces in a real browser (Debian's chromium through playwright-core) against a
// real `bin/tether server` running examples/templates/local with Terraform: the admin's
// templates, the workspaces page (create from a template, status, start/stop, build logs live),
// a chat on a stopped workspace that shows it starting and then runs its command, and a new
// chat that makes its workspace from a template. Screenshots go to test-artifacts/web/.

import path from "node:path";
import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import {
  CHROMIUM,
  launchBrowser,
  openPage,
  PHONE,
  shot as saveShot,
  useCleanups,
} from "../support/browser.ts";
import {
  commandModel,
  EXAMPLES,
  startWorkspaceServer,
  terraformAvailable,
  waitFor,
} from "../support/workspaces.ts";

const cleanup = useCleanups();
const shot = (page: Page, name: string) => saveShot(page, `workspaces-${name}`);
const HAS_TERRAFORM = terraformAvailable();
if (!HAS_TERRAFORM)
  console.warn("terraform is not on PATH: the workspaces browser test is skipped.");

describe.skipIf(CHROMIUM === undefined || !HAS_TERRAFORM)("web UI: template workspaces", () => {
  it("templates, workspaces with status, start/stop and live build logs; chats that start their workspace", async () => {
    const s = await startWorkspaceServer();
    cleanup(() => s.close());
    commandModel(s.fake);
    await s.push(path.join(EXAMPLES, "local"), "local", ["--description", "On this machine"]);

    const browser = await launchBrowser(cleanup);
    const errors: string[] = [];
    const page = await openPage(browser, "desktop", errors);
    cleanup(() => shot(page, "last-desktop").catch(() => undefined));
    await page.goto(s.url);
    await page.getByLabel("Email").fill("owner@example.com");
    await page.getByLabel("Password").fill("correct horse battery");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "Chats" }).waitFor();

    // Admin: the pushed template, its version and idle time.
    await page.getByRole("link", { name: "Admin" }).click();
    await page.getByRole("link", { name: "Templates" }).click();
    const row = page.getByTestId("template-row").filter({ hasText: "local" });
    await row.waitFor();
    await expect(row.textContent()).resolves.toMatch(/On this machine.*1.*1 h/);
    await shot(page, "admin-templates-desktop");

    // The workspaces page: create one, watch it start, read its build's log.
    await page.getByRole("link", { name: "Workspaces" }).first().click();
    await page.getByRole("heading", { name: "Workspaces", level: 1 }).waitFor();
    const form = page.locator("form", { hasText: "New workspace" });
    await form.getByLabel("Name").fill("web-box");
    await form.getByRole("button", { name: "Create workspace" }).click();
    const ws = page.locator('[data-testid="workspace"][data-name="web-box"]');
    await ws
      .getByTestId("workspace-status")
      .filter({ hasText: /^running$/ })
      .waitFor({ timeout: 60_000 });
    await page.getByTestId("build-log").filter({ hasText: "Apply complete!" }).waitFor();
    await expect(ws.getByTestId("deadline").textContent()).resolves.toMatch(/if idle/);
    await shot(page, "running-desktop");

    await ws.getByRole("button", { name: "Stop web-box" }).click();
    await ws
      .getByTestId("workspace-status")
      .filter({ hasText: /^stopped$/ })
      .waitFor({ timeout: 60_000 });
    await page.getByTestId("build-log").filter({ hasText: "Apply complete!" }).waitFor();

    // A chat on the stopped workspace says it is starting, then runs its command there.
    await page.getByRole("link", { name: "Chats" }).click();
    await page.getByRole("button", { name: "New chat" }).click();
    const workspaceSelect = page.locator("label", { hasText: /^Workspace/ }).locator("select");
    await workspaceSelect.selectOption({ label: "web-box (stopped)" });
    await page.getByLabel("Message").fill("$ echo from-the-web > web.txt && cat web.txt");
    await page.getByRole("button", { name: "Start chat" }).click();
    await page
      .getByTestId("workspace-banner")
      .filter({ hasText: /starting|connect/ })
      .waitFor();
    await shot(page, "chat-starting-desktop");
    const card = page.locator('[data-testid="tool-card"][data-state="completed"]');
    await card.locator("pre.output", { hasText: "from-the-web" }).waitFor({ timeout: 60_000 });
    await expect(page.getByTestId("workspace-banner").count()).resolves.toBe(0);
    await shot(page, "chat-ran-desktop");

    // Its buttons on the workspaces page: stop it, start it again, delete it (confirmed).
    await waitFor("the chat's turn to end", async () => {
      const { chats } = await s.api<{ chats: { status: string }[] }>("GET", "/api/v1/chats");
      return chats.every((c) => c.status !== "running");
    });
    await page.getByRole("link", { name: "Workspaces" }).first().click();
    const status = (re: RegExp) =>
      ws.getByTestId("workspace-status").filter({ hasText: re }).waitFor({ timeout: 60_000 });
    await ws.getByRole("button", { name: "Stop web-box" }).click();
    await status(/^stopped$/);
    await ws.getByRole("button", { name: "Start web-box" }).click();
    await status(/^running$/);
    await ws.getByRole("button", { name: "Delete web-box" }).click();
    await ws.getByRole("button", { name: "Delete workspace" }).click();
    await ws.waitFor({ state: "detached", timeout: 60_000 });
    expect(
      (await s.api<{ workspaces: { name: string }[] }>("GET", "/api/v1/workspaces")).workspaces.map(
        (w) => w.name,
      ),
    ).not.toContain("web-box");

    // A new chat that makes its own workspace from the template.
    await page.getByRole("link", { name: "Chats" }).click();
    await page.getByRole("button", { name: "New chat" }).click();
    await workspaceSelect.selectOption({ label: "New workspace from a template…" });
    await page
      .locator("label", { hasText: /^Template/ })
      .locator("select")
      .selectOption({ label: "local — On this machine" });
    await page.getByLabel("Workspace name").fill("fresh-box");
    await page.getByLabel("Message").fill("$ pwd");
    await page.getByRole("button", { name: "Start chat" }).click();
    await card
      .locator("pre.output", { hasText: ".tether-workspaces/" })
      .waitFor({ timeout: 60_000 });
    const { workspaces } = await s.api<{ workspaces: { name: string; status?: string }[] }>(
      "GET",
      "/api/v1/workspaces",
    );
    expect(workspaces.find((w) => w.name === "fresh-box")?.status).toBe("running");

    // Usage: how long the workspaces ran.
    await page.getByRole("link", { name: "Usage" }).click();
    await page.getByTestId("workspace-usage").getByText("workspaces ran").first().waitFor();
    await shot(page, "usage-desktop");
    // The builds' runs are what it reports: the owner's running time, per user and per day.
    type UsageRows = { rows: { email?: string; day?: string; workspace_runtime_ms: number }[] };
    const byUser = await s.api<UsageRows>("GET", "/api/v1/usage?group_by=user");
    expect(byUser.rows.find((r) => r.email === "owner@example.com")).toMatchObject({
      workspace_runtime_ms: expect.any(Number),
    });
    expect(
      byUser.rows.find((r) => r.email === "owner@example.com")!.workspace_runtime_ms,
    ).toBeGreaterThan(0);
    const byDay = await s.api<UsageRows>("GET", "/api/v1/usage?group_by=day");
    expect(byDay.rows.some((r) => r.day !== undefined && r.workspace_runtime_ms > 0)).toBe(true);

    // The workspaces page at phone size.
    await page.setViewportSize(PHONE);
    await page.goto(new URL("/workspaces", s.url).toString());
    await page.getByRole("heading", { name: "Workspaces", level: 1 }).waitFor();
    await page.locator('[data-testid="workspace"][data-name="fresh-box"]').waitFor();
    await shot(page, "list-phone");
    expect(errors).toEqual([]);
  }, 240_000);
});
