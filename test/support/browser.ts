// What the browser tests share: Debian's chromium (skipped with a clear message when missing),
// launched headless with the flags CI needs; pages at desktop or phone size that record page
// and console errors; screenshots into test-artifacts/web/ when TETHER_TEST_SHOTS=1 is set; and
// cleanups that all run after each test, even when one fails (a server left running outlives
// the test run).

import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { chromium, type Browser, type Locator, type Page } from "playwright-core";
import { afterEach } from "vitest";

export const CHROMIUM = [
  process.env.TETHER_TEST_CHROMIUM,
  "/usr/bin/chromium",
  "/usr/bin/chromium-browser",
]
  .filter((p): p is string => p !== undefined && p !== "")
  .find((p) => existsSync(p));
if (CHROMIUM === undefined)
  console.warn("test/web: skipped, no chromium found (apt-get install -y chromium)");

export const ARTIFACTS = path.resolve(import.meta.dirname, "../../test-artifacts/web");
export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };
export type Viewport = "desktop" | "phone";

/** Registers an afterEach that runs every cleanup pushed during the test, newest first. */
export function useCleanups(): (fn: () => Promise<void> | void) => void {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    const failed: unknown[] = [];
    for (const c of cleanups.splice(0).reverse())
      await Promise.resolve()
        .then(c)
        .catch((e: unknown) => failed.push(e));
    if (failed.length > 0) throw failed[0];
  }, 30_000);
  return (fn) => cleanups.push(fn);
}

export async function launchBrowser(cleanup: (fn: () => Promise<void>) => void): Promise<Browser> {
  await mkdir(ARTIFACTS, { recursive: true });
  const browser = await chromium.launch({
    executablePath: CHROMIUM!,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
  cleanup(() => browser.close());
  return browser;
}

/**
 * A page at desktop (1280×800) or phone (390×844, touch) size whose page errors and console
 * errors go to `errors`; a failed request is the page's to show, so it is not one.
 */
export async function openPage(browser: Browser, size: Viewport, errors: string[]): Promise<Page> {
  const page = await browser.newPage(
    size === "desktop"
      ? { viewport: DESKTOP }
      : { viewport: PHONE, isMobile: true, hasTouch: true },
  );
  page.setDefaultTimeout(20_000);
  page.on("pageerror", (e) => errors.push(e.stack ?? e.message));
  page.on("console", (m) => {
    if (m.type() === "error" && !m.text().startsWith("Failed to load resource"))
      errors.push(m.text());
  });
  return page;
}

/**
 * Whether shot() writes its screenshots. They are for a person to look at, not checks, and a
 * full-page PNG costs chromium up to a second on 2 cores: about a fifth of the browser files'
 * time, so a suite run takes them only when asked.
 */
const SHOTS = process.env.TETHER_TEST_SHOTS === "1";

/**
 * A screenshot at test-artifacts/web/<name>.png, when SHOTS: of a whole page (only what is in
 * view with `o.view`), or of one element.
 */
export async function shot(
  target: Page | Locator,
  name: string,
  o: { view?: boolean } = {},
): Promise<void> {
  if (!SHOTS) return;
  const file = path.join(ARTIFACTS, `${name}.png`);
  if ("goto" in target) await target.screenshot({ path: file, fullPage: !o.view });
  else await target.screenshot({ path: file });
}

/** The page's whole HTML (to check that no secret is in it). */
export const html = (page: Page) => page.evaluate<string>("document.documentElement.outerHTML");

/** Presses Tab until the focused element's text is `text` (keyboard reachability); throws if never. */
export async function tabTo(page: Page, text: string, maxTabs = 40): Promise<void> {
  for (let i = 0; i < maxTabs; i++) {
    await page.keyboard.press("Tab");
    const focused = await page.evaluate<string>("document.activeElement?.textContent ?? ''");
    if (focused.trim() === text) return;
  }
  throw new Error(`"${text}" is not reachable with Tab (${maxTabs} presses)`);
}
