// The chat pages in Debian's chromium at desktop and phone size against a real server and the
// fake model: the server's detail in a form, the chat list's search, rename and archive, the
// chat's title in the browser tab, "thinking…" and billed time that ticks while the model works,
// an interrupted turn said so, a composer that grows and keeps the focus, a missing chat and an
// unknown address (each said so, with no stream retried), the processes as a tab on a phone,
// readable usage labels there, dark mode, and a throttled sign-in's Retry-After.

import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { CHROMIUM, launchBrowser, openPage, PHONE, shot, useCleanups } from "../support/browser.ts";
import { startFakeProvider } from "../support/fake-provider.ts";
import { api, chatReaches, startServerInHome } from "../support/server.ts";

const cleanup = useCleanups();
const EMAIL = "lists@example.com";
const PASSWORD = "correct horse battery";
const MISSING = "00000000-0000-4000-8000-000000000000";

async function signIn(page: Page, url: string): Promise<void> {
  await page.goto(url);
  await page.getByLabel("Email").fill(EMAIL);
  await page.getByLabel("Password").fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Chats", exact: true }).waitFor();
}

describe.skipIf(CHROMIUM === undefined)("web UI chat pages", () => {
  it("forms, the chat list, a chat's live state, missing pages, phone tabs, dark mode and throttling", async () => {
    const fake = await startFakeProvider();
    cleanup(() => fake.close());
    const { server } = await startServerInHome("tether-web-chats-", cleanup, {
      modelUrl: fake.url,
    });
    const browser = await launchBrowser(cleanup);
    const errors: string[] = [];
    const page = await openPage(browser, "desktop", errors);
    cleanup(() => shot(page, "chats-last-desktop").catch(() => undefined));

    // The server's detail in the form: which field, and what is wrong with it.
    await page.goto(server.url);
    await page.getByRole("heading", { name: "Set up Tether" }).waitFor();
    await expect(page.title()).resolves.toBe("Set up · Tether");
    await page.getByLabel("Email").fill(EMAIL);
    await page.getByLabel("Password").fill("short");
    await page.getByRole("button", { name: "Create owner" }).click();
    await expect(page.getByRole("alert").textContent()).resolves.toMatch(
      /^Invalid request body\. password: must be at least 8 characters/,
    );
    await shot(page, "setup-error-desktop");
    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByRole("button", { name: "Create owner" }).click();
    await page.getByRole("heading", { name: "Chats", exact: true }).waitFor();

    // Three chats, titled by their first messages.
    const token = (
      await api<{ token: string }>(server.url, undefined, "POST", "/api/v1/auth/login", {
        email: EMAIL,
        password: PASSWORD,
      })
    ).token;
    // A first command, so the workspace agent is in use before the list (it is archived, so
    // the list has only the three below).
    fake.script({ toolCalls: [{ name: "execute", args: { command: "true" } }] }, { text: "ok" });
    const warm = await api<{ id: string }>(server.url, token, "POST", "/api/v1/chats", {
      message: "warm up",
    });
    await chatReaches(server.url, token, warm.id, "waiting");
    await api(server.url, token, "PATCH", `/api/v1/chats/${warm.id}`, { archived: true });
    for (const message of ["deploy the app", "fix the flaky test", "write the docs"])
      await api(server.url, token, "POST", "/api/v1/chats", { message });
    const rows = page.getByTestId("chat-row");
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(3);
    await page.locator(".chats .badge.waiting").nth(2).waitFor();
    await expect(page.title()).resolves.toBe("Chats · Tether");

    // Search by title.
    await page.getByLabel("Search chats").fill("flaky");
    await expect.poll(() => rows.count()).toBe(1);
    await page.getByLabel("Search chats").fill("nothing like it");
    await page.getByText("No chat's title has “nothing like it”.").waitFor();
    await page.getByLabel("Search chats").fill("");
    // Rename in place.
    await page.getByRole("button", { name: "Rename fix the flaky test" }).click();
    await page.getByLabel("Chat title").fill("Flaky test hunt");
    await page.getByLabel("Chat title").press("Enter");
    await page.getByRole("link", { name: "Flaky test hunt" }).waitFor();
    // Archive: it leaves the list, and comes back from the archived ones.
    await page.getByRole("button", { name: "Archive write the docs" }).click();
    await expect.poll(() => rows.count()).toBe(2);
    await page.getByRole("button", { name: "Archived chats" }).click();
    await page.getByRole("heading", { name: "Archived chats" }).waitFor();
    await page.getByRole("link", { name: "write the docs" }).waitFor();
    await page.getByRole("link", { name: "warm up" }).waitFor();
    await shot(page, "chats-archived-desktop");
    await page.getByRole("button", { name: "Unarchive write the docs" }).click();
    await expect.poll(() => rows.count()).toBe(1);
    await page.getByRole("button", { name: "Back to the chats" }).click();
    await expect.poll(() => rows.count()).toBe(3);
    await shot(page, "chats-list-desktop");

    // A chat: its title in the tab; "Thinking…" while the model has not answered, and the
    // billed time moving meanwhile.
    await page.getByRole("link", { name: "Flaky test hunt" }).click();
    await page.getByRole("heading", { name: "Flaky test hunt" }).waitFor();
    await expect(page.title()).resolves.toBe("Flaky test hunt · Tether");
    // The composer has the focus, and grows with its text.
    await expect(page.evaluate("document.activeElement?.getAttribute('aria-label')")).resolves.toBe(
      "Message",
    );
    const box = page.getByLabel("Message");
    const height = async () => (await box.boundingBox())!.height;
    const small = await height();
    await box.fill("one\ntwo\nthree\nfour\nfive\nsix");
    expect(await height()).toBeGreaterThan(small + 40);
    fake.script({ hangAfterChunks: 0 });
    await page.getByRole("button", { name: "Send" }).click();
    await page.getByTestId("chat-activity").getByText("Thinking…").waitFor();
    // Sent with the button, the focus is still in the box, which is small again.
    await expect(page.evaluate("document.activeElement?.getAttribute('aria-label')")).resolves.toBe(
      "Message",
    );
    expect(await height()).toBeLessThan(small + 10);
    const usage = page.getByTestId("chat-usage");
    await usage.filter({ hasText: /so far/ }).waitFor();
    const before = await usage.textContent();
    await expect.poll(() => usage.textContent(), { timeout: 10_000 }).not.toBe(before);
    await shot(page, "chat-thinking-desktop");
    // An interrupted turn says so.
    await page.getByRole("button", { name: "Interrupt" }).click();
    await page.getByText("Interrupted: the turn stopped. Send a message to go on.").waitFor();
    await page.locator(".chat-head .badge.waiting").waitFor();
    await shot(page, "chat-interrupted-desktop");

    // A missing chat: said so, with no composer and no stream asked for, once or again.
    const streams: string[] = [];
    page.on("request", (r) => {
      if (r.url().includes("/stream")) streams.push(r.url());
    });
    await page.goto(`${server.url}/chats/${MISSING}`);
    await page.getByRole("heading", { name: "Chat not found" }).waitFor();
    await expect(page.title()).resolves.toBe("Chat not found · Tether");
    await expect(page.getByLabel("Message").count()).resolves.toBe(0);
    await page.waitForTimeout(2_500); // the old UI asked again every second
    expect(streams).toEqual([]);
    await shot(page, "chat-not-found-desktop");
    // An unknown address: a page that says so, not the chat list.
    await page.goto(`${server.url}/no/such/page`);
    await page.getByRole("heading", { name: "Page not found" }).waitFor();
    await expect(page.title()).resolves.toBe("Page not found · Tether");
    await shot(page, "not-found-desktop");

    // A phone: the processes are a tab of the chat.
    fake.script(
      {
        toolCalls: [
          {
            name: "execute",
            args: { command: "echo serving; sleep 120", run_in_background: true },
          },
        ],
      },
      { text: "Started." },
    );
    const chat = await api<{ id: string }>(server.url, token, "POST", "/api/v1/chats", {
      message: "start the server",
    });
    const phone = await openPage(browser, "phone", errors);
    cleanup(() => shot(phone, "chats-last-phone").catch(() => undefined));
    await signIn(phone, server.url);
    await shot(phone, "chats-list-phone");
    // The missing chat and the unknown address on a phone too.
    const phoneStreams: string[] = [];
    phone.on("request", (r) => {
      if (r.url().includes("/stream")) phoneStreams.push(r.url());
    });
    await phone.goto(`${server.url}/chats/${MISSING}`);
    await phone.getByRole("heading", { name: "Chat not found" }).waitFor();
    await expect(phone.getByLabel("Message").count()).resolves.toBe(0);
    await phone.waitForTimeout(2_500);
    expect(phoneStreams).toEqual([]);
    await shot(phone, "chat-not-found-phone");
    await phone.goto(`${server.url}/no/such/page`);
    await phone.getByRole("heading", { name: "Page not found" }).waitFor();
    await expect(phone.title()).resolves.toBe("Page not found · Tether");
    await shot(phone, "not-found-phone");
    await phone.goto(`${server.url}/chats/${chat.id}`);
    await phone.getByTestId("tool-card").and(phone.locator('[data-state="background"]')).waitFor();
    await phone.getByText("Started.").waitFor();
    await expect(phone.getByTestId("process").isVisible()).resolves.toBe(false);
    await phone.getByRole("button", { name: /^Processes/ }).click();
    const proc = phone.getByTestId("process").filter({ hasText: "sleep 120" });
    await proc.and(phone.locator('[data-running="true"]')).waitFor();
    await expect(phone.getByTestId("tool-card").isVisible()).resolves.toBe(false);
    await shot(phone, "chat-processes-phone");
    await proc.getByRole("button", { name: "Stop" }).click();
    await proc.and(phone.locator('[data-running="false"]')).waitFor();
    await phone.getByRole("button", { name: "Conversation" }).click();
    await phone.getByTestId("tool-card").waitFor();
    expect(
      await phone.evaluate<number>("document.documentElement.scrollWidth"),
    ).toBeLessThanOrEqual(PHONE.width);
    // Usage: the chart's labels at the page's text size.
    await phone.getByRole("link", { name: "Usage" }).click();
    await phone.locator(".bar-label").first().waitFor();
    const labelPx = await phone.evaluate<number>(
      "parseFloat(getComputedStyle(document.querySelector('.bar-label')).fontSize)",
    );
    expect(labelPx).toBeGreaterThanOrEqual(12);
    await shot(phone, "usage-bars-phone");

    // Dark mode follows the system's setting.
    await phone.emulateMedia({ colorScheme: "dark" });
    const dark = () =>
      phone.evaluate<number>(
        "getComputedStyle(document.documentElement).backgroundColor.match(/\\d+/g).slice(0, 3).reduce((a, b) => a + Number(b), 0)",
      );
    expect(await dark()).toBeLessThan(150);
    await shot(phone, "usage-dark-phone");
    await phone.goto(`${server.url}/chats/${chat.id}`);
    await phone.getByTestId("tool-card").waitFor();
    await shot(phone, "chat-dark-phone");
    await page.emulateMedia({ colorScheme: "dark" });
    await page.goto(`${server.url}/chats/${chat.id}`);
    await page.getByTestId("tool-card").waitFor();
    await shot(page, "chat-dark-desktop");
    await page.emulateMedia({ colorScheme: "light" });

    // A throttled sign-in: the server's Retry-After, counted down, and the button waits.
    const guest = await openPage(browser, "phone", errors);
    await guest.goto(server.url);
    for (let i = 0; i < 6; i++) {
      await guest.getByLabel("Email").fill(EMAIL);
      await guest.getByLabel("Password").fill(`wrong password ${i}`);
      await guest.getByRole("button", { name: "Sign in" }).click();
      await guest.getByRole("alert").waitFor();
      const text = (await guest.getByRole("alert").textContent()) ?? "";
      if (text.includes("Too many")) break;
      await guest.getByRole("button", { name: "Sign in" }).and(guest.locator(":enabled")).waitFor();
    }
    await expect(guest.getByRole("alert").textContent()).resolves.toMatch(
      /^Too many failed logins; try again later\. Retry after \d+ s\./,
    );
    await guest.getByTestId("retry-after").waitFor();
    await expect(guest.getByRole("button", { name: "Sign in" }).isDisabled()).resolves.toBe(true);
    await shot(guest, "signin-throttled-phone");
    await guest.getByTestId("retry-after").waitFor({ state: "detached", timeout: 20_000 });
    await expect(guest.getByRole("button", { name: "Sign in" }).isEnabled()).resolves.toBe(true);
    expect(errors).toEqual([]);
  }, 180_000);
});
