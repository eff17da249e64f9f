// Tool cards and assistant text as people read them, in Debian's chromium at desktop and phone
// size against a real server and the fake model: Markdown (sanitised, code highlighted), a
// command that fails, ANSI colours (rendered in the UI, never in what the model reads), 20,000
// lines of a process's output (collapsed, then all of them rendered only as far as they are on
// screen, and copied whole), read_file's lines with their numbers, and the diffs of write_file and
// edit_files. Screenshots of each card at both sizes go to test-artifacts/web/.

import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import type { Locator, Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { CHROMIUM, launchBrowser, openPage, shot, useCleanups } from "../support/browser.ts";
import { startFakeProvider, type FakeStep } from "../support/fake-provider.ts";
import { startServerInHome } from "../support/server.ts";

const cleanup = useCleanups();
const EMAIL = "cards@example.com";
const PASSWORD = "correct horse battery";

const MARKDOWN = [
  "## Plan",
  "",
  "- **bold** item with `inline code`",
  "- *second* item",
  "",
  "```ts",
  "const answer: number = 42;",
  "```",
  "",
  "| tool | state |",
  "|------|-------|",
  "| lint | ok |",
  "",
  '<script>window.__pwned = 1</script> <img src="x" onerror="window.__pwned = 2">',
  "[a link](javascript:window.__pwned=3) and [a real one](https://example.com/docs).",
].join("\n");

/** One message's turn: the step that calls the tools, then the answer after their results. */
const turn = (step: FakeStep, answer = "Done."): FakeStep[] => [step, { text: answer }];

/** The little of the DOM cardShot uses in the page (the tests are typed without the DOM). */
interface CardElement {
  scrollIntoView(o: { block: "center" }): void;
  getBoundingClientRect(): { left: number; top: number; right: number; bottom: number };
  contains(other: unknown): boolean;
  ownerDocument: { elementFromPoint(x: number, y: number): { className: string } | null };
}

/**
 * A card's screenshot as the card looks: centred on the screen first, and checked that nothing
 * (the sticky composer, the header) is drawn over it near its corners.
 */
async function cardShot(card: Locator, name: string): Promise<void> {
  const covered = await card.evaluate((node) => {
    const e = node as unknown as CardElement;
    e.scrollIntoView({ block: "center" });
    const r = e.getBoundingClientRect();
    // Inside the corners by more than their rounding.
    const points: [number, number][] = [
      [r.left + 12, r.top + 12],
      [r.right - 12, r.top + 12],
      [r.left + 12, r.bottom - 12],
      [r.right - 12, r.bottom - 12],
    ];
    return points
      .map(([x, y]) => e.ownerDocument.elementFromPoint(x, y))
      .filter((hit) => hit === null || !e.contains(hit))
      .map((hit) => hit?.className ?? "nothing");
  });
  expect(covered, `${name}: drawn over the card`).toEqual([]);
  await shot(card, name);
}

/** Whether the box's label shows all of its text (not cut off by an ellipsis or a clamp). */
function wholeLabel(box: Locator): Promise<boolean> {
  type Box = {
    scrollWidth: number;
    clientWidth: number;
    scrollHeight: number;
    clientHeight: number;
  };
  return box
    .locator(".lines-label")
    .evaluate(
      (el: Box) => el.scrollWidth <= el.clientWidth + 1 && el.scrollHeight <= el.clientHeight + 1,
    );
}

describe.skipIf(CHROMIUM === undefined)("web UI tool cards and Markdown", () => {
  it("Markdown, a failed command, ANSI output, 20,000 lines, read_file lines and diffs, at desktop and phone size", async () => {
    const fake = await startFakeProvider();
    cleanup(() => fake.close());
    const { server, ws } = await startServerInHome("tether-web-cards-", cleanup, {
      modelUrl: fake.url,
    });
    const first = await fetch(`${server.url}/api/v1/users/first`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: EMAIL, password: PASSWORD }),
    });
    expect(first.status).toBe(201);
    const notes = path.join(ws, "notes.txt");
    await writeFile(notes, "alpha\nbeta\ngamma\n");
    const made = path.join(ws, "made.txt");

    const browser = await launchBrowser(cleanup);
    const errors: string[] = [];
    const page = await openPage(browser, "desktop", errors);
    await page.context().grantPermissions(["clipboard-read", "clipboard-write"]);
    cleanup(() => shot(page, "cards-last-desktop").catch(() => undefined));
    await page.goto(server.url);
    await page.getByLabel("Email").fill(EMAIL);
    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("button", { name: "New chat" }).click();

    const send = async (text: string, steps: FakeStep[]) => {
      fake.script(...steps);
      await page.getByLabel("Message").fill(text);
      await page.getByLabel("Message").press("Enter");
    };
    const idle = () => page.locator(".chat-head .badge.waiting").waitFor();
    const cards = page.getByTestId("tool-card");

    // Markdown, sanitised: the script, the image and the javascript: link are gone.
    await send("markdown please", [{ text: MARKDOWN }]);
    const md = page.locator(".msg.assistant .md").first();
    await md.locator("h2", { hasText: "Plan" }).waitFor();
    await idle();
    await expect(md.locator("li").count()).resolves.toBe(2);
    await expect(md.locator("strong").textContent()).resolves.toBe("bold");
    await expect(md.locator("li code").textContent()).resolves.toBe("inline code");
    await expect(md.locator("pre code.hljs .hljs-keyword").first().textContent()).resolves.toBe(
      "const",
    );
    await expect(md.locator("td").last().textContent()).resolves.toBe("ok");
    await expect(md.locator("script, img, [onerror]").count()).resolves.toBe(0);
    const hrefs: (string | null)[] = [];
    for (const a of await md.locator("a").all()) hrefs.push(await a.getAttribute("href"));
    expect(hrefs).toEqual([null, "https://example.com/docs"]); // the script URL is dropped
    await expect(page.evaluate("window.__pwned")).resolves.toBeUndefined();
    await cardShot(page.locator(".msg.assistant").first(), "markdown-desktop");

    // A command that exits non-zero failed: the word and the error style.
    await send(
      "fail",
      turn({ toolCalls: [{ name: "execute", args: { command: "echo oops; exit 3" } }] }),
    );
    const failed = cards.nth(0);
    await failed.and(page.locator('[data-state="failed"]')).waitFor();
    await expect(failed.locator(".tool-state").textContent()).resolves.toMatch(
      /^failed, exit code 3/,
    );
    await expect(failed.getAttribute("class")).resolves.toBe("tool failed");
    await idle();
    await cardShot(failed, "tool-failed-desktop");

    // ANSI colours: rendered while the command runs; plain in its result and for the model.
    await send(
      "colours",
      turn({
        toolCalls: [
          {
            name: "execute",
            args: {
              command: `printf 'ok \\033[31mred\\033[0m plain\\n'; sleep 3; echo done`,
              timeout: "30s",
            },
          },
        ],
      }),
    );
    const ansi = cards.nth(1);
    await ansi.locator(".output .ansi-red-fg", { hasText: "red" }).waitFor();
    await cardShot(ansi, "tool-ansi-desktop");
    await ansi.and(page.locator('[data-state="completed"]')).waitFor();
    await expect(ansi.locator(".output").textContent()).resolves.toBe("ok red plain\ndone");
    await idle();
    const toolMessages = fake.requests.flatMap((r) => r.messages.filter((m) => m.role === "tool"));
    const colours = JSON.stringify(toolMessages.at(-1)!.content);
    expect(colours).toContain("ok red plain");
    expect(colours).not.toContain("\\u001b"); // JSON's escape of ESC
    expect(colours).not.toContain("[31m");

    // 20,000 lines (short ones: the agent keeps 32 KiB of a command's output), read from the
    // workspace panel: a background command's output as the agent has it.
    await send(
      "many lines",
      turn({
        toolCalls: [
          {
            name: "execute",
            args: {
              command:
                "echo first; i=2; while [ $i -lt 20000 ]; do echo; i=$((i+1)); done; echo last",
              run_in_background: true,
            },
          },
        ],
      }),
    );
    await cards.nth(2).and(page.locator('[data-state="background"]')).waitFor();
    await idle();
    const proc = page.getByTestId("process").filter({ hasText: "echo first" });
    await proc.and(page.locator('[data-running="false"]')).waitFor();
    await proc.getByRole("button", { name: "Output" }).click();
    const long = proc.getByTestId("process-output");
    await long
      .locator(".lines-label", { hasText: "Output · 20,000 lines, last 15 shown" })
      .waitFor();
    // The whole label is on screen (the processes panel is narrow): nothing cut off.
    expect(await wholeLabel(long)).toBe(true);
    const tail = (await long.locator("pre.output").textContent())!;
    expect(tail.split("\n")).toHaveLength(15);
    expect(tail.endsWith("last")).toBe(true);
    await cardShot(long, "tool-20000-lines-collapsed-desktop");
    await long.getByRole("button", { name: "Show all" }).click();
    const all = long.getByTestId("virtual-lines");
    await all.waitFor();
    // Only the rows on screen are in the page.
    expect(await all.locator(".row").count()).toBeLessThan(100);
    await all.locator(".row", { hasText: "first" }).waitFor();
    await all.evaluate("document.querySelector('[data-testid=virtual-lines]').scrollTo(0, 1e9)");
    await all.locator(".row", { hasText: "last" }).waitFor();
    expect(await all.locator(".row").count()).toBeLessThan(100);
    await cardShot(long, "tool-20000-lines-all-desktop");
    await long.getByRole("button", { name: "Copy" }).click();
    await long.getByRole("button", { name: "Copied" }).waitFor();
    const copied = await page.evaluate<string>("navigator.clipboard.readText()");
    expect(copied.split("\n")).toHaveLength(20_000);
    expect(copied.startsWith("first\n\n")).toBe(true);
    await long.getByRole("button", { name: "Collapse" }).click();

    // read_file: the lines it read, numbered.
    await send("read", turn({ toolCalls: [{ name: "read_file", args: { path: notes } }] }));
    const read = cards.nth(3);
    await read.and(page.locator('[data-state="completed"]')).waitFor();
    await expect(read.locator(".file .gutter").allTextContents()).resolves.toEqual(["1", "2", "3"]);
    await expect(read.locator(".file").textContent()).resolves.toContain("alpha");
    await idle();
    await cardShot(read, "tool-read-file-desktop");

    // write_file: applied is a success, and its content shows as added lines.
    await send(
      "write",
      turn({
        toolCalls: [{ name: "write_file", args: { path: made, content: "one\ntwo\nthree\n" } }],
      }),
    );
    const wrote = cards.nth(4);
    await wrote.and(page.locator('[data-state="completed"]')).waitFor();
    await expect(wrote.locator(".tool-state").textContent()).resolves.toMatch(/^applied/);
    await expect(wrote.locator(".diff .d-add").allTextContents()).resolves.toEqual([
      "1+one\n",
      "2+two\n",
      "3+three\n",
    ]);
    await idle();
    await cardShot(wrote, "tool-write-file-desktop");

    // edit_files: the agent's diff of the change.
    await send(
      "edit",
      turn({
        toolCalls: [
          {
            name: "edit_files",
            args: { files: [{ path: made, edits: [{ old_text: "two", new_text: "TWO" }] }] },
          },
        ],
      }),
    );
    const edited = cards.nth(5);
    await edited.and(page.locator('[data-state="completed"]')).waitFor();
    await expect(edited.locator(".diff .d-del").textContent()).resolves.toContain("-two");
    await expect(edited.locator(".diff .d-add").textContent()).resolves.toContain("+TWO");
    await expect(readFile(made, "utf8")).resolves.toBe("one\nTWO\nthree\n");
    await idle();
    await cardShot(edited, "tool-edit-files-desktop");
    await page.evaluate("scrollTo(0, 0)");
    await shot(page, "cards-desktop");
    // The screen as a person sees it: the Markdown answer and the failed command under it.
    await page.evaluate("scrollTo(0, 0)");
    await shot(page, "cards-view-desktop", { view: true });

    // The same chat on a phone: every card fits the screen's width.
    const phone: Page = await openPage(browser, "phone", errors);
    cleanup(() => shot(phone, "cards-last-phone").catch(() => undefined));
    await phone.goto(server.url);
    await phone.getByLabel("Email").fill(EMAIL);
    await phone.getByLabel("Password").fill(PASSWORD);
    await phone.getByRole("button", { name: "Sign in" }).click();
    await phone.getByRole("link", { name: "markdown please" }).click();
    const phoneCards = phone.getByTestId("tool-card");
    await phoneCards.nth(5).waitFor();
    await phone.locator(".msg.assistant .md h2").waitFor();
    expect(
      await phone.evaluate<number>("document.documentElement.scrollWidth"),
    ).toBeLessThanOrEqual(390);
    await cardShot(phone.locator(".msg.assistant").first(), "markdown-phone");
    const names = ["failed", "ansi", "background", "read-file", "write-file", "edit-files"];
    for (const [i, name] of names.entries())
      await cardShot(phoneCards.nth(i), `tool-${name}-phone`);
    await shot(phone, "cards-phone");
    // The 20,000 lines on a phone: the Processes tab, collapsed to the last lines, then all.
    await phone.getByRole("button", { name: /^Processes/ }).click();
    const phoneProc = phone.getByTestId("process").filter({ hasText: "echo first" });
    await phoneProc.getByRole("button", { name: "Output" }).click();
    const phoneLong = phoneProc.getByTestId("process-output");
    await phoneLong
      .locator(".lines-label", { hasText: "Output · 20,000 lines, last 15 shown" })
      .waitFor();
    expect(await wholeLabel(phoneLong)).toBe(true);
    expect((await phoneLong.locator("pre.output").textContent())!.split("\n")).toHaveLength(15);
    await cardShot(phoneLong, "tool-20000-lines-collapsed-phone");
    await phoneLong.getByRole("button", { name: "Show all" }).click();
    const phoneAll = phoneLong.getByTestId("virtual-lines");
    await phoneAll.locator(".row", { hasText: "first" }).waitFor();
    expect(await phoneAll.locator(".row").count()).toBeLessThan(100);
    await cardShot(phoneLong, "tool-20000-lines-all-phone");
    expect(
      await phone.evaluate<number>("document.documentElement.scrollWidth"),
    ).toBeLessThanOrEqual(390);
    expect(errors).toEqual([]);
  }, 180_000);
});
