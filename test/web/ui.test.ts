// The web UI in a real browser (Debian's chromium driven by playwright-core) against a real
// `bin/tether server` (which builds the UI itself when web/dist is stale) and the fake model:
// setup, the model configured in the admin page, a chat whose tool call streams its output and
// is interrupted from the UI, a message queued while busy, an edit, the workspace panel's stop
// button, the usage page. Screenshots of every screen at desktop and phone size go to
// test-artifacts/web/ (the admin pages' are admin.test.ts's).

import { spawnSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  CHROMIUM,
  launchBrowser,
  openPage,
  PHONE,
  shot,
  tabTo,
  useCleanups,
} from "../support/browser.ts";
import { startFakeProvider } from "../support/fake-provider.ts";
import { seedEmbeddedDatabase, startServerProcess, workspaceIn } from "../support/server.ts";

const cleanup = useCleanups();

describe.skipIf(CHROMIUM === undefined)("web UI", () => {
  it("setup, a tool call that runs and is interrupted from the UI, and the usage page", async () => {
    const fake = await startFakeProvider();
    cleanup(() => fake.close());
    const home = await mkdtemp(path.join(os.tmpdir(), "tether-web-"));
    cleanup(() => rm(home, { recursive: true, force: true }));
    fake.script({
      reasoning: "The user wants the slow command run.",
      text: "Running it.",
      toolCalls: [
        {
          id: "call_ui",
          name: "execute",
          args: { command: "echo early; sleep 30", timeout: "60s" },
        },
      ],
    });
    await seedEmbeddedDatabase(path.join(home, "data"));
    const server = await startServerProcess(
      ["--data-dir", path.join(home, "data"), "--workspace-dir", await workspaceIn(home)],
      home,
      cleanup,
    );

    const browser = await launchBrowser(cleanup);
    const pageErrors: string[] = [];
    const desktop = await openPage(browser, "desktop", pageErrors);
    // A failure's screenshot shows what the page showed instead.
    cleanup(() => shot(desktop, "last-desktop").catch(() => undefined));

    // Setup: no user exists yet.
    await desktop.goto(server.url);
    await desktop.getByRole("heading", { name: "Set up Tether" }).waitFor();
    await shot(desktop, "setup-desktop");
    await desktop.getByLabel("Email").fill("admin@example.com");
    await desktop.getByLabel("Password").fill("correct horse battery");
    await desktop.getByRole("button", { name: "Create owner" }).click();

    await desktop.getByRole("heading", { name: "Chats" }).waitFor();
    // Signed in by an HttpOnly, SameSite=Strict cookie: no script of the page can read a token.
    const session = (await desktop.context().cookies()).find((c) => c.name === "tether_session");
    expect(session).toMatchObject({ httpOnly: true, sameSite: "Strict" });
    await expect(
      desktop.evaluate<string>(
        "JSON.stringify([document.cookie, sessionStorage.length, localStorage.length])",
      ),
    ).resolves.toBe(JSON.stringify(["", 0, 0]));

    // Point it at the model: the fake OpenAI-compatible server, made the default.
    await desktop.getByRole("link", { name: "Admin" }).click();
    const addModel = desktop.locator("form", { hasText: "Add a model" });
    await addModel.getByLabel("Provider").selectOption("openai-compatible");
    await addModel.getByLabel("Model").fill("fake-model");
    await addModel.getByLabel("Base URL").fill(fake.url);
    await addModel.getByLabel("Input price").fill("3");
    await addModel.getByLabel("Output price").fill("15");
    await addModel.getByLabel("Make it the default").check();
    await addModel.getByRole("button", { name: "Add model" }).click();
    await desktop
      .getByTestId("model-row")
      .filter({ hasText: "fake-model" })
      .getByText("default", { exact: true })
      .waitFor();

    await desktop.getByRole("link", { name: "Chats" }).click();
    await desktop.getByRole("button", { name: "New chat" }).click();
    await desktop.getByLabel("Message").fill("run the slow command");
    await shot(desktop, "new-chat-desktop");
    await desktop.getByLabel("Message").press("Enter");

    const card = desktop.getByTestId("tool-card");
    await card.and(desktop.locator('[data-state="running"]')).waitFor();
    await expect(card.locator(".tool-subject").textContent()).resolves.toBe("echo early; sleep 30");
    // The command's output shows while it runs.
    await card.locator(".output").filter({ hasText: "early" }).waitFor();
    await expect(desktop.locator(".reasoning").textContent()).resolves.toContain(
      "The user wants the slow command run.",
    );
    await expect(card.locator(".lines-label").textContent()).resolves.toContain("(live)");
    // The workspace panel lists it as running as soon as it starts.
    await desktop
      .getByTestId("process")
      .filter({ hasText: "echo early; sleep 30" })
      .and(desktop.locator('[data-running="true"]'))
      .waitFor();

    // A message sent while the chat is busy is queued, and runs once the turn ends.
    fake.script({ text: "The queued message ran." });
    await desktop.getByLabel("Message").fill("after the interrupt");
    await expect(desktop.getByRole("button", { name: "Queue" }).isEnabled()).resolves.toBe(true);
    await desktop.getByLabel("Message").press("Enter");
    await desktop
      .getByTestId("queued-message")
      .filter({ hasText: "after the interrupt" })
      .waitFor();
    // A second one, taken back before it runs.
    await desktop.getByLabel("Message").fill("never mind");
    await desktop.getByLabel("Message").press("Enter");
    const unwanted = desktop.getByTestId("queued-message").filter({ hasText: "never mind" });
    await unwanted.getByRole("button", { name: "Remove" }).click();
    await unwanted.waitFor({ state: "detached" });
    await expect(desktop.getByTestId("queued-message").count()).resolves.toBe(1);
    await shot(desktop, "chat-running-desktop");

    await desktop.getByRole("button", { name: "Interrupt" }).click();
    await card.and(desktop.locator('[data-state="canceled"]')).waitFor();
    await expect(card.locator(".tool-state").textContent()).resolves.toMatch(
      /^canceled by the user · ran [1-9][\d.]* (ms|s)$/, // billed until the interrupt
    );
    await expect(card.locator(".output").textContent()).resolves.toContain("early");
    await desktop.getByText("The queued message ran.").waitFor();
    // Out of the queue as soon as it is in the history, never shown twice.
    await expect(desktop.getByTestId("queued-message").count()).resolves.toBe(0);
    await expect(desktop.getByText("never mind").count()).resolves.toBe(0);
    await expect(desktop.locator(".msg.user").last().textContent()).resolves.toContain(
      "after the interrupt",
    );
    await desktop.locator(".chat-head .badge.waiting").waitFor();
    await desktop
      .getByTestId("chat-usage")
      .filter({ hasText: /tools [1-9]/ })
      .waitFor();
    // The panel shows the killed command as ended (by the cancel's SIGKILL).
    await desktop
      .getByTestId("process")
      .filter({ hasText: "echo early; sleep 30" })
      .and(desktop.locator('[data-running="false"]'))
      .getByText("ended by a signal")
      .waitFor();
    await shot(desktop, "chat-canceled-desktop");

    await desktop.getByRole("link", { name: "Usage" }).click();
    const total = desktop.getByTestId("usage-total");
    await total.waitFor();
    const billed = /Billed time ([\d.]+) (ms|s)/.exec((await total.textContent()) ?? "");
    expect(billed).not.toBeNull();
    expect(Number(billed![1])).toBeGreaterThan(0);
    await shot(desktop, "usage-desktop");

    // Edit the first message: the later history (the canceled call) goes, the chat reruns.
    await desktop.getByRole("link", { name: "Chats" }).click();
    await desktop.getByRole("link", { name: "run the slow command" }).click();
    await desktop.getByTestId("tool-card").waitFor();
    fake.script({ text: "The edited message ran." });
    await desktop.getByRole("button", { name: "Edit" }).first().click();
    await desktop.getByLabel("Edit message").fill("just say OK");
    await desktop.getByRole("button", { name: "Save and rerun" }).click();
    await desktop.getByText("The edited message ran.").waitFor();
    await expect(desktop.getByTestId("tool-card").count()).resolves.toBe(0);
    await expect(desktop.getByText("The queued message ran.").count()).resolves.toBe(0);
    await expect(desktop.locator(".msg.user").textContent()).resolves.toContain("just say OK");

    // The workspace panel: a background process, its output, and the stop button.
    fake.script({
      toolCalls: [
        {
          id: "call_bg",
          name: "execute",
          args: { command: "echo bg-started; sleep 301", run_in_background: true },
        },
      ],
    });
    await desktop.getByRole("link", { name: "Chats" }).click();
    await desktop.getByRole("button", { name: "New chat" }).click();
    await desktop.getByLabel("Message").fill("start a server");
    await desktop.getByLabel("Message").press("Enter");
    await card.and(desktop.locator('[data-state="background"]')).waitFor();
    const proc = desktop.getByTestId("process").filter({ hasText: "sleep 301" });
    await proc.and(desktop.locator('[data-running="true"]')).waitFor();
    await proc.getByRole("button", { name: "Output" }).click();
    await proc.getByTestId("process-output").filter({ hasText: "bg-started" }).waitFor();
    await shot(desktop, "chat-processes-desktop");
    await proc.getByRole("button", { name: "Stop" }).click();
    await proc.and(desktop.locator('[data-running="false"]')).waitFor();
    expect(spawnSync("pgrep", ["-f", "sleep 301"]).status).toBe(1); // no such process left

    // Esc interrupts too, wherever the focus is.
    fake.script({
      toolCalls: [
        {
          id: "call_esc",
          name: "execute",
          args: { command: "echo esc; sleep 31", timeout: "60s" },
        },
      ],
    });
    // This chat by keyboard alone: Tab to "New chat", type (the message box has the focus),
    // Enter sends, Esc interrupts.
    await desktop.getByRole("link", { name: "Chats" }).click();
    await desktop.getByRole("heading", { name: "Chats" }).waitFor();
    await desktop.locator(".chats .badge.waiting").nth(1).waitFor(); // both chats so far
    await shot(desktop, "chats-desktop");
    await tabTo(desktop, "New chat");
    await desktop.keyboard.press("Enter");
    await desktop.getByRole("heading", { name: "New chat" }).waitFor();
    await desktop.keyboard.type("again");
    await desktop.keyboard.press("Enter");
    await card.and(desktop.locator('[data-state="running"]')).waitFor();
    await desktop.keyboard.press("Escape");
    await card.and(desktop.locator('[data-state="canceled"]')).waitFor();
    await expect(card.locator(".output").textContent()).resolves.toContain("esc");

    // A phone: sign in (the user exists now), then every screen again.
    const phone = await openPage(browser, "phone", pageErrors);
    await phone.goto(server.url);
    await phone.getByRole("heading", { name: "Sign in to Tether" }).waitFor();
    await shot(phone, "signin-phone");
    await phone.getByLabel("Email").fill("admin@example.com");
    await phone.getByLabel("Password").fill("correct horse battery");
    await phone.getByRole("button", { name: "Sign in" }).click();
    await phone.getByRole("heading", { name: "Chats" }).waitFor();
    await phone.locator(".chats .badge.waiting").nth(2).waitFor(); // every chat is idle
    await shot(phone, "chats-phone");
    await phone.getByRole("link", { name: "again" }).click();
    await phone.getByTestId("tool-card").and(phone.locator('[data-state="canceled"]')).waitFor();
    await shot(phone, "chat-phone");
    // Nothing is wider than the phone's screen.
    expect(
      await phone.evaluate<number>("document.documentElement.scrollWidth"),
    ).toBeLessThanOrEqual(PHONE.width);
    await phone.getByRole("link", { name: "Usage" }).click();
    await phone.getByTestId("usage-total").waitFor();
    await shot(phone, "usage-phone");

    // Signing out ends the session on the server: the old cookie opens nothing.
    const cookie = (await phone.context().cookies()).find((c) => c.name === "tether_session")!;
    await phone.getByRole("button", { name: "Sign out" }).click();
    await phone.getByRole("heading", { name: "Sign in to Tether" }).waitFor();
    const me = await fetch(`${server.url}/api/v1/me`, {
      headers: { cookie: `tether_session=${cookie.value}` },
    });
    expect(me.status).toBe(401);
    expect(pageErrors).toEqual([]);
  }, 120_000);
});
