// The admin pages and the tokens page in a real browser (Debian's chromium driven by
// playwright-core) against a real `bin/tether server` with the demo model: models (the API
// key never reaches the page), users and roles, an API token shown once and dead right after
// its revocation, workspaces with their health, and the audit log of all that. Screenshots of
// every section at desktop and phone size go to test-artifacts/web/admin-*.png (with
// TETHER_TEST_SHOTS=1).

import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import {
  CHROMIUM,
  html,
  launchBrowser,
  openPage,
  PHONE,
  shot as saveShot,
  useCleanups,
} from "../support/browser.ts";
import { seedEmbeddedDatabase, startServerProcess, workspaceIn } from "../support/server.ts";

const PASSWORD = "correct horse battery";
const NEW_PASSWORD = "a battery staple horse";
const cleanup = useCleanups();
const shot = (page: Page, name: string) => saveShot(page, `admin-${name}`);

describe.skipIf(CHROMIUM === undefined)("web UI: admin and tokens", () => {
  it("models, users, tokens, workspaces and the audit log, at desktop and phone size", async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), "tether-web-admin-"));
    cleanup(() => rm(home, { recursive: true, force: true }));
    await seedEmbeddedDatabase(path.join(home, "data"));
    const server = await startServerProcess(
      [
        "--data-dir",
        path.join(home, "data"),
        "--workspace-dir",
        await workspaceIn(home),
        "--model",
        "demo",
      ],
      home,
      cleanup,
    );

    const browser = await launchBrowser(cleanup);
    const errors: string[] = [];
    const page = await openPage(browser, "desktop", errors);
    cleanup(() => shot(page, "last-desktop").catch(() => undefined));
    // Every JSON answer of the API the page received, to search for the key afterwards.
    const bodies: Promise<string>[] = [];
    page.on("response", (r) => {
      if (
        new URL(r.url()).pathname.startsWith("/api/") &&
        (r.headers()["content-type"] ?? "").includes("application/json")
      )
        bodies.push(r.text().catch(() => ""));
    });

    // Setup: the first user, the owner.
    await page.goto(server.url);
    await page.getByRole("heading", { name: "Set up Tether" }).waitFor();
    await page.getByLabel("Name").fill("Ada Admin");
    await page.getByLabel("Email").fill("owner@example.com");
    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByRole("button", { name: "Create owner" }).click();
    await page.getByRole("heading", { name: "Chats" }).waitFor();

    // Models: the demo model is there; a bad one is refused with the field named.
    await page.getByRole("link", { name: "Admin" }).click();
    await page.getByRole("heading", { name: "Models", level: 2 }).waitFor();
    await page.getByTestId("model-row").filter({ hasText: "demo" }).waitFor();
    const KEY = `sk-test-${Math.random().toString(36).slice(2)}${Date.now()}`;
    const form = page.locator("form", { hasText: "Add a model" });
    await form.getByLabel("Provider").selectOption("openai-compatible");
    await form.getByLabel("Model").fill("   "); // required is met; the server trims it
    await form.getByLabel("Base URL").fill("http://127.0.0.1:9/v1");
    await form.getByRole("button", { name: "Add model" }).click();
    await expect(form.getByRole("alert").textContent()).resolves.toMatch(
      /Invalid request body.*model: must not be empty/,
    );
    await shot(page, "models-error-desktop");
    await form.getByLabel("Model").fill("test-model-x");
    await form.getByLabel("API key").fill(KEY);
    await form.getByLabel("Context limit").fill("128000");
    await form.getByLabel("Input price").fill("3");
    await form.getByLabel("Output price").fill("15.5");
    expect(await html(page)).not.toContain(KEY); // typed, not yet sent: no value attribute
    await form.getByRole("button", { name: "Add model" }).click();
    const row = page.getByTestId("model-row").filter({ hasText: "test-model-x" });
    await row.waitFor();
    await expect(form.getByRole("alert").count()).resolves.toBe(0);
    const cells = await row.locator("td, th").allTextContents();
    expect(cells).toEqual(
      expect.arrayContaining([
        "OpenAI-compatible",
        "test-model-x",
        "http://127.0.0.1:9/v1",
        "128,000",
        "$3.00",
        "$15.50",
        "yes",
      ]),
    );
    await expect(form.getByLabel("API key").inputValue()).resolves.toBe(""); // form cleared

    await row.getByRole("button", { name: "Make test-model-x the default" }).click();
    await row.getByText("default", { exact: true }).waitFor();
    // The default stays enabled; the old default (the demo model) may be made the default again.
    await expect(
      row.getByRole("button", { name: "Disable test-model-x" }).isDisabled(),
    ).resolves.toBe(true);
    await page.getByRole("button", { name: "Make demo the default" }).click();
    await page
      .getByTestId("model-row")
      .filter({ hasText: "demo" })
      .getByText("default", { exact: true })
      .waitFor();
    await row.getByRole("button", { name: "Disable test-model-x" }).click();
    await row.getByText("disabled", { exact: true }).waitFor();
    await shot(page, "models-desktop");
    await row.getByRole("button", { name: "Enable test-model-x" }).click();
    await row.getByText("enabled", { exact: true }).waitFor();

    // Users: a member, then made an admin (which survives a reload).
    const usersTab = page
      .getByRole("navigation", { name: "Admin sections" })
      .getByRole("link", { name: "Users" });
    await usersTab.focus(); // keyboard: the tabs are links
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "Users", level: 2 }).waitFor();
    const userForm = page.locator("form", { hasText: "Add a user" });
    await userForm.getByLabel("Email").fill("member@example.com");
    await userForm.getByLabel("Name").fill("Mo Member");
    await userForm.getByLabel("Password").fill("another good password");
    await expect(userForm.getByLabel("Role").inputValue()).resolves.toBe("member");
    await userForm.getByRole("button", { name: "Add user" }).click();
    const role = page.getByLabel("Role of member@example.com");
    await role.waitFor();
    await expect(role.inputValue()).resolves.toBe("member");
    const patched = page.waitForResponse(
      (r) => r.request().method() === "PATCH" && r.url().includes("/api/v1/users/"),
    );
    await role.selectOption("admin");
    expect((await patched).status()).toBe(200);
    await page.reload();
    await expect(page.getByLabel("Role of member@example.com").inputValue()).resolves.toBe("admin");
    // Offboarding: disabled, the user cannot sign in; enabled, they can again.
    const signIn = (email: string, password: string) =>
      fetch(new URL("/api/v1/auth/login", server.url), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email, password }),
      });
    const memberRow = page.getByTestId("user-row").filter({ hasText: "member@example.com" });
    await memberRow.getByRole("button", { name: "Disable member@example.com" }).click();
    await memberRow.getByRole("button", { name: "Yes, disable" }).click();
    await memberRow.getByText("disabled", { exact: true }).waitFor();
    expect((await signIn("member@example.com", "another good password")).status).toBe(403);
    await expect(
      page
        .getByTestId("user-row")
        .filter({ hasText: "owner@example.com" })
        .getByRole("button", { name: "Disable owner@example.com" })
        .isDisabled(),
    ).resolves.toBe(true);
    await memberRow.getByRole("button", { name: "Enable member@example.com" }).click();
    await memberRow.getByRole("button", { name: "Disable member@example.com" }).waitFor();
    expect((await signIn("member@example.com", "another good password")).status).toBe(200);
    await shot(page, "users-desktop");

    // Tokens (everyone's page): created, shown once, works, revoked, fails at once.
    await page.getByRole("link", { name: "Tokens" }).click();
    await page.getByRole("heading", { name: "API tokens", level: 2 }).waitFor();
    await page.getByLabel("Name").fill("ci token");
    await page.getByRole("button", { name: "Create token" }).click();
    const secret = (await page.getByTestId("new-token").locator("code").textContent()) ?? "";
    expect(secret.length).toBeGreaterThan(20);
    await expect(page.getByText("it will not be shown again").count()).resolves.toBe(1);
    const me = (token: string) =>
      fetch(new URL("/api/v1/me", server.url), { headers: { authorization: `Bearer ${token}` } });
    expect((await me(secret)).status).toBe(200);
    await shot(page, "tokens-desktop");
    const tokenRow = page.getByTestId("token-row").filter({ hasText: "ci token" });
    await tokenRow.getByRole("button", { name: "Revoke ci token" }).click();
    await tokenRow.getByRole("button", { name: "Yes, revoke" }).click();
    await tokenRow.waitFor({ state: "detached" });
    expect((await me(secret)).status).toBe(401);
    await page.getByTestId("new-token").waitFor({ state: "detached" });
    await page.reload();
    await page.getByRole("heading", { name: "Sessions", level: 2 }).waitFor();
    expect(await html(page)).not.toContain(secret);
    // The password: the current one first; this browser stays signed in.
    await page.getByLabel("Current password").fill(PASSWORD);
    await page.getByLabel("New password").fill(NEW_PASSWORD);
    await page.getByRole("button", { name: "Change password" }).click();
    await page.getByText("Password changed").waitFor();
    expect((await signIn("owner@example.com", PASSWORD)).status).toBe(401);

    // Workspaces: a dead one is unreachable, the local one answers with its version.
    await page.getByRole("link", { name: "Admin" }).click();
    await page
      .getByRole("navigation", { name: "Admin sections" })
      .getByRole("link", { name: "Workspaces" })
      .click();
    await page.getByRole("heading", { name: "Workspaces", level: 2 }).waitFor();
    const wsForm = page.locator("form", { hasText: "Add a workspace" });
    await wsForm.getByLabel("Name").fill("dead box");
    await wsForm.getByLabel("Agent URL").fill("http://127.0.0.1:9");
    await wsForm.getByLabel("Agent token").fill("agent-secret-123");
    await wsForm.getByRole("button", { name: "Add workspace" }).click();
    const dead = page.getByTestId("workspace-row").filter({ hasText: "dead box" });
    await dead.getByText("unreachable").waitFor();
    const local = page.getByTestId("workspace-row").filter({ hasText: "local" });
    await expect(local.textContent()).resolves.toMatch(/reachable · v\S+ · up \d+ (s|min)/);
    await expect(dead.textContent()).resolves.toContain("owner@example.com");
    await dead.getByRole("button", { name: "Share dead box" }).click();
    await dead.getByRole("button", { name: "Unshare dead box" }).waitFor();
    await expect(dead.textContent()).resolves.toContain("everyone (shared)");
    expect(await html(page)).not.toContain("agent-secret-123");
    await shot(page, "workspaces-desktop");
    await dead.getByRole("button", { name: "Delete dead box" }).click();
    await dead.getByRole("button", { name: "Delete workspace" }).click();
    await dead.waitFor({ state: "detached" });
    await local.waitFor();

    // Delete the model (asked first), then the audit log has all of it.
    await page.getByRole("link", { name: "Models" }).click();
    await row.getByRole("button", { name: "Delete test-model-x" }).click();
    await row.getByRole("button", { name: "Delete model" }).click();
    await row.waitFor({ state: "detached" });
    await page.getByRole("link", { name: "Audit log" }).click();
    await page.getByRole("heading", { name: "Audit log", level: 2 }).waitFor();
    await page.getByTestId("audit-row").first().waitFor();
    const actions = await page.getByTestId("audit-row").locator("code").allTextContents();
    for (const a of [
      "user.create",
      "auth.login",
      "model.create",
      "model.update",
      "model.delete",
      "user.role",
      "token.create",
      "token.revoke",
      "workspace.create",
      "workspace.update",
      "workspace.delete",
    ])
      expect(actions).toContain(a);
    const roleRow = page.getByTestId("audit-row").filter({ hasText: "user.role" });
    await expect(roleRow.textContent()).resolves.toMatch(
      /user\.role.*owner@example\.com.*member@example\.com.*(from: member, to: admin|to: admin, from: member)/,
    );
    const created = page.getByTestId("audit-row").filter({ hasText: "model.create" });
    await expect(created.textContent()).resolves.toContain("api_key: set");
    await shot(page, "audit-desktop");

    // The key never reached the page: not in its HTML, not in any answer it got.
    expect(await html(page)).not.toContain(KEY);
    const answers = await Promise.all(bodies);
    expect(answers.length).toBeGreaterThan(10);
    for (const a of answers) expect(a).not.toContain(KEY);

    // A phone: sign in, then every section again, never wider than the screen.
    const phone = await openPage(browser, "phone", errors);
    cleanup(() => shot(phone, "last-phone").catch(() => undefined));
    await phone.goto(server.url);
    await phone.getByLabel("Email").fill("owner@example.com");
    await phone.getByLabel("Password").fill(NEW_PASSWORD);
    await phone.getByRole("button", { name: "Sign in" }).click();
    await phone.getByRole("heading", { name: "Chats" }).waitFor();
    const fits = async () =>
      expect(
        await phone.evaluate<number>("document.documentElement.scrollWidth"),
      ).toBeLessThanOrEqual(PHONE.width);
    for (const [url, heading, ready, name] of [
      ["/admin", "Models", "model-row", "models"],
      ["/admin/workspaces", "Workspaces", "workspace-row", "workspaces"],
      ["/admin/users", "Users", "user-row", "users"],
      ["/admin/audit", "Audit log", "audit-row", "audit"],
      ["/tokens", "Sessions", "token-row", "tokens"],
    ] as const) {
      await phone.goto(new URL(url, server.url).href);
      await phone.getByRole("heading", { name: heading, level: 2 }).waitFor();
      await phone.getByTestId(ready).first().waitFor();
      await fits();
      await shot(phone, `${name}-phone`);
    }
    expect(errors).toEqual([]);
  }, 90_000);
});
