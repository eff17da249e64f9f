// "No layout jumps while streaming", measured the way browsers measure it: the Layout
// Instability API's layout-shift entries (what Cumulative Layout Shift adds up), recorded by the
// page itself while a chat streams reasoning, text and a command's live output, at desktop and
// phone size. Nothing in the conversation may move: movement caused by scrolling is not a shift,
// and a shift within 500 ms of the user's own input is marked as such and left out. (The side
// panel and the header's counters change as state changes; they are not what is being read.)
// The page follows the stream while the reader is at its end, and a reader who scrolled up stays
// where they are.

import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import {
  CHROMIUM,
  launchBrowser,
  openPage,
  shot,
  useCleanups,
  type Viewport,
} from "../support/browser.ts";
import { startFakeProvider, type FakeStep } from "../support/fake-provider.ts";
import { startServerInHome } from "../support/server.ts";

const cleanup = useCleanups();
const EMAIL = "lead@example.com";
const PASSWORD = "correct horse battery";

/**
 * Records every layout shift on window.__shifts, from the first paint on, with where each moved
 * node is: in the conversation (`.messages`), elsewhere, or gone (null).
 */
const RECORD_SHIFTS = `
  window.__shifts = [];
  new PerformanceObserver((list) => {
    for (const e of list.getEntries())
      window.__shifts.push({
        value: e.value,
        input: e.hadRecentInput,
        moved: (e.sources ?? []).map((s) => {
          const el = s.node?.nodeType === 1 ? s.node : s.node?.parentElement;
          return {
            node: el ? el.nodeName + "." + el.className : null,
            text: (s.node?.textContent ?? "").slice(0, 40),
            inConversation: el ? el.closest(".messages") !== null : null,
            from: [s.previousRect.x, s.previousRect.y],
            to: [s.currentRect.x, s.currentRect.y],
          };
        }),
      });
  }).observe({ type: "layout-shift", buffered: true });
`;

interface Shift {
  value: number;
  input: boolean;
  moved: { inConversation: boolean | null }[];
}
/** The shifts since the last call that the user did not cause and that moved the conversation. */
const conversationShifts = async (page: Page): Promise<Shift[]> =>
  (await page.evaluate<Shift[]>("window.__shifts.splice(0)")).filter(
    (s) => !s.input && s.moved.some((m) => m.inConversation !== false),
  );

const words = (prefix: string, n: number) =>
  Array.from({ length: n }, (_, i) => `${prefix}${i}`).join(" ");

/** A turn that streams reasoning, text and a command printing a line every 30 ms, then an answer. */
const turn = (tag: string): FakeStep[] => [
  {
    reasoning: words(`${tag}-thought`, 40),
    text: words(`${tag}-word`, 60),
    delayMs: 10,
    toolCalls: [
      {
        name: "execute",
        args: {
          command: `for i in $(seq 1 40); do echo ${tag}-line $i; sleep 0.03; done`,
          timeout: "60s",
        },
      },
    ],
  },
  { text: `${words(`${tag}-answer`, 80)} ${tag}-done`, delayMs: 10 },
];

describe.skipIf(CHROMIUM === undefined)("web UI layout while streaming", () => {
  it("streaming text, reasoning and live output shifts nothing already on screen, at desktop and phone size", async () => {
    const fake = await startFakeProvider();
    cleanup(() => fake.close());
    const { server } = await startServerInHome("tether-web-layout-", cleanup, {
      modelUrl: fake.url,
    });
    const first = await fetch(`${server.url}/api/v1/users/first`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: EMAIL, password: PASSWORD }),
    });
    expect(first.status).toBe(201);

    const browser = await launchBrowser(cleanup);
    const errors: string[] = [];
    const run = async (size: Viewport) => {
      const page = await openPage(browser, size, errors);
      cleanup(() => shot(page, `layout-last-${size}`).catch(() => undefined));
      await page.addInitScript(RECORD_SHIFTS);
      await page.goto(server.url);
      await page.getByLabel("Email").fill(EMAIL);
      await page.getByLabel("Password").fill(PASSWORD);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.getByRole("button", { name: "New chat" }).click();

      fake.script(...turn(size));
      await page.getByLabel("Message").fill(`stream something at ${size} size`);
      await page.getByLabel("Message").press("Enter");
      // From the first streamed words on, nothing the user did not do may move the page.
      await page.getByText(`${size}-thought0`).waitFor();
      await conversationShifts(page);
      const card = page.getByTestId("tool-card");
      // Line 20 or later (the card shows the last 15 lines, and a poll may skip a few).
      await card
        .locator(".output")
        .filter({ hasText: new RegExp(`${size}-line (2\\d|3\\d|40)$`) })
        .waitFor();
      // Streaming went on at the end of the page: it followed (the reader was at the end). The
      // page follows from a ResizeObserver, after the layout the new line made: on a busy
      // machine that is a moment after the line is in the DOM.
      const end = () =>
        page.evaluate<number>("document.documentElement.scrollHeight - (scrollY + innerHeight)");
      await expect.poll(end, { timeout: 2_000 }).toBeLessThan(120);
      await page.getByText(`${size}-done`).waitFor();
      await page.locator(".chat-head .badge.waiting").waitFor();
      await expect(card.getAttribute("data-state")).resolves.toBe("completed");
      await shot(page, `layout-streamed-${size}`);
      const streamed = await conversationShifts(page);
      expect(streamed, JSON.stringify(streamed)).toEqual([]);

      // A reader who scrolled up to read is not moved while the next answer streams.
      fake.script(...turn(`${size}-again`));
      await page.getByLabel("Message").fill("once more");
      await page.getByLabel("Message").press("Enter");
      await page.getByText(`${size}-again-thought0`).waitFor();
      await expect(page.evaluate<number>("scrollY")).resolves.toBeGreaterThan(400); // far down
      await page.evaluate("scrollTo(0, 0)");
      await conversationShifts(page);
      await page.getByText(`${size}-again-done`).waitFor();
      await page.locator(".chat-head .badge.waiting").waitFor();
      await expect(page.evaluate<number>("scrollY")).resolves.toBe(0);
      const again = await conversationShifts(page);
      expect(again, JSON.stringify(again)).toEqual([]);
    };
    await run("desktop");
    await run("phone");
    expect(errors).toEqual([]);
  }, 120_000);
});
