// The prompt in the web UI (docs/prompt.md), in Debian's chromium against a real server and the
// fake model: the chat's context snapshot under its title (AGENTS.md and its size) with Refresh,
// and `/compact` typed in the composer folding the conversation behind a "compacted" rule.

import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { CHROMIUM, launchBrowser, openPage, shot, useCleanups } from "../support/browser.ts";
import { startFakeProvider } from "../support/fake-provider.ts";
import { api, startServerProcess, workspaceIn } from "../support/server.ts";

const cleanup = useCleanups();

describe.skipIf(CHROMIUM === undefined)("web UI: the prompt", () => {
  it("shows the chat's context snapshot, refreshes it, and /compact folds the conversation", async () => {
    const fake = await startFakeProvider();
    cleanup(() => fake.close());
    const home = await mkdtemp(path.join(os.tmpdir(), "tether-web-prompt-"));
    cleanup(() => rm(home, { recursive: true, force: true }));
    const ws = await workspaceIn(home);
    await writeFile(path.join(ws, "AGENTS.md"), "Be brief.\n");
    const server = await startServerProcess(
      [
        "--data-dir",
        path.join(home, "data"),
        "--workspace-dir",
        ws,
        "--model",
        "openai-compatible:fake-model",
        "--model-base-url",
        fake.url,
      ],
      home,
      cleanup,
    );
    const { token } = await api<{ token: string }>(
      server.url,
      undefined,
      "POST",
      "/api/v1/users/first",
      { email: "p@example.com", password: "correct horse battery" },
    );
    fake.script({ text: "Brief answer." });
    const chat = await api<{ id: string }>(server.url, token, "POST", "/api/v1/chats", {
      message: "hello",
    });
    await expect
      .poll(
        async () =>
          (await api<{ status: string }>(server.url, token, "GET", `/api/v1/chats/${chat.id}`))
            .status,
        { timeout: 20_000 },
      )
      .toBe("waiting");

    const browser = await launchBrowser(cleanup);
    const errors: string[] = [];
    const page = await openPage(browser, "desktop", errors);
    cleanup(() => shot(page, "prompt-last-desktop").catch(() => undefined));
    await page.goto(server.url);
    await page.getByLabel("Email").fill("p@example.com");
    await page.getByLabel("Password").fill("correct horse battery");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "Chats", exact: true }).waitFor();
    await page.goto(`${server.url}/chats/${chat.id}`);
    const context = page.getByTestId("chat-context");
    await expect
      .poll(() => context.textContent(), { timeout: 10_000 })
      .toContain("AGENTS.md (10 B)");

    await writeFile(path.join(ws, "AGENTS.md"), "Be brief, and polite.\n");
    await context.getByRole("button", { name: "Refresh" }).click();
    await expect.poll(() => context.textContent()).toContain("AGENTS.md (22 B)");

    fake.script({ text: "SUMMARY: the user said hello." });
    await page.getByLabel("Message").fill("/compact");
    await page.getByRole("button", { name: "Send" }).click();
    const boundary = page.getByTestId("compaction");
    await boundary.waitFor({ timeout: 20_000 });
    await expect(boundary.textContent()).resolves.toContain("Conversation compacted (2 messages)");
    await boundary.locator("summary").click();
    await page.getByText("SUMMARY: the user said hello.").waitFor();
    await shot(page, "prompt-compacted-desktop");
    expect(errors).toEqual([]);
  }, 90_000);
});
