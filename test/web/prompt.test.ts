// The prompt in the web UI (docs/prompt.md), in Debian's chromium against a real server and the
// fake model: the chat's context snapshot under its title (AGENTS.md and its size) with Refresh,
// and `/compact` typed in the composer folding the conversation behind a "compacted" rule.

import { writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { CHROMIUM, launchBrowser, openPage, shot, useCleanups } from "../support/browser.ts";
import { startFakeProvider } from "../support/fake-provider.ts";
import { api, chatReaches, startServerInHome } from "../support/server.ts";

const cleanup = useCleanups();

describe.skipIf(CHROMIUM === undefined)("web UI: the prompt", () => {
  it("shows the chat's context snapshot, refreshes it, and /compact folds the conversation", async () => {
    const fake = await startFakeProvider();
    cleanup(() => fake.close());
    const { server, ws } = await startServerInHome("tether-web-prompt-", cleanup, {
      modelUrl: fake.url,
      prepare: (dir) => writeFile(path.join(dir, "AGENTS.md"), "Be brief.\n"),
    });
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
    await chatReaches(server.url, token, chat.id, "waiting");

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
