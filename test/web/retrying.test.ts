// A model that does not answer is never a blank pane: with the provider's base URL at a closed
// port, the chat shows that it is retrying and why ("Retrying: … — attempt N", from the chat's
// pinned `retrying` field), live, at desktop and phone size, and after the bounded time the turn
// ends in `error` with the last error shown.

import { mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { CHROMIUM, launchBrowser, openPage, shot, useCleanups } from "../support/browser.ts";
import { api, seedEmbeddedDatabase, startServerProcess, workspaceIn } from "../support/server.ts";

const cleanup = useCleanups();
const EMAIL = "retry@example.com";
const PASSWORD = "correct horse battery";

/**
 * The bound on a failing turn, short for the test.
 */
const RETRY_BOUND_ARGS = ["--retry-limit-ms", "10000"];

async function closedPort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", () => r()));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return port;
}

interface ChatView {
  status: string;
  retrying?: { attempt: number; last_error: string; next_attempt_at: string } | null;
  last_error?: { message: string };
}

describe.skipIf(CHROMIUM === undefined)("web UI with a failing model", () => {
  it("a provider at a closed port: the chat shows it retrying and why, then the turn ends in error", async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), "tether-web-retry-"));
    cleanup(() => rm(home, { recursive: true, force: true }));
    await seedEmbeddedDatabase(path.join(home, "data"));
    const server = await startServerProcess(
      [
        "--data-dir",
        path.join(home, "data"),
        "--workspace-dir",
        await workspaceIn(home),
        "--model",
        "openai-compatible:nobody-home",
        "--model-base-url",
        `http://127.0.0.1:${await closedPort()}/v1`,
        ...RETRY_BOUND_ARGS,
      ],
      home,
      cleanup,
    );
    const { token } = await api<{ token: string }>(
      server.url,
      undefined,
      "POST",
      "/api/v1/users/first",
      { email: EMAIL, password: PASSWORD },
    );
    const browser = await launchBrowser(cleanup);
    const errors: string[] = [];
    const pages = [];
    for (const size of ["desktop", "phone"] as const) {
      const page = await openPage(browser, size, errors);
      cleanup(() => shot(page, `retry-last-${size}`).catch(() => undefined));
      await page.goto(server.url);
      await page.getByLabel("Email").fill(EMAIL);
      await page.getByLabel("Password").fill(PASSWORD);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.getByRole("heading", { name: "Chats", exact: true }).waitFor();
      pages.push({ page, size });
    }
    // The chat starts once both pages are signed in, so its bounded retrying is not spent on
    // the browser's start on a loaded machine.
    const chat = await api<{ id: string }>(server.url, token, "POST", "/api/v1/chats", {
      message: "hello?",
    });
    for (const { page } of pages) await page.goto(`${server.url}/chats/${chat.id}`);
    // While it fails: the API says so, and so does every page, live.
    const view = await api<ChatView>(server.url, token, "GET", `/api/v1/chats/${chat.id}`);
    expect(view.status).toBe("running");
    for (const { page, size } of pages) {
      await page
        .getByTestId("retrying")
        .filter({ hasText: /^Retrying: .+ — attempt \d+/ })
        .waitFor();
      await shot(page, `chat-retrying-${size}`);
    }
    const retrying = await api<ChatView>(server.url, token, "GET", `/api/v1/chats/${chat.id}`);
    expect(retrying.retrying).toMatchObject({
      attempt: expect.any(Number),
      last_error: expect.any(String),
    });
    // Then the bound: the turn ends in error, and the error is shown.
    for (const { page, size } of pages) {
      await page.getByTestId("chat-error").waitFor({ timeout: 30_000 });
      await page.locator(".chat-head .badge.error").waitFor();
      await expect(page.getByTestId("retrying").count()).resolves.toBe(0);
      await shot(page, `chat-model-error-${size}`);
    }
    const ended = await api<ChatView>(server.url, token, "GET", `/api/v1/chats/${chat.id}`);
    expect(ended).toMatchObject({ status: "error", retrying: null });
    expect(ended.last_error?.message).toBeTruthy();
    expect(errors).toEqual([]);
  }, 120_000);
});
