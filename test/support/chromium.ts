import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { describe, expect, it } from "vitest";

/**
 * What every browser test shares (DESIGN §9): Debian's Chromium driven by playwright-core, the
 * screenshots a reviewer looks at, and the checks every page must pass.
 */
export const CHROMIUM = "/usr/bin/chromium";
const CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];
export const SCREENSHOTS = fileURLToPath(new URL("../../test-output/screenshots/", import.meta.url));
/**
 * `CORE_BROWSER_TESTS=off` skips them on purpose: CI runs them once, on Node 20, and its second
 * runtime's pass runs the other tests of their files only (.ci/run).
 */
const browserTestsOff = process.env.CORE_BROWSER_TESTS === "off";
export const hasChromium = !browserTestsOff && existsSync(CHROMIUM);

/** Without Chromium the browser tests are skipped loudly; with REQUIRE_BROWSER=1 (CI) that is a failure. */
export function requireBrowserOrSkip(): void {
  if (hasChromium || browserTestsOff) return;
  const banner = `\n${"!".repeat(100)}\n!! BROWSER TESTS SKIPPED: no Chromium at ${CHROMIUM}. Install it (apt-get install -y chromium);\n!! REQUIRE_BROWSER=1 (CI) turns this into a failure.\n${"!".repeat(100)}\n`;
  console.warn(banner);
  if (process.env.REQUIRE_BROWSER === "1") {
    describe("browser tests (REQUIRE_BROWSER=1)", () => {
      it(`need Chromium at ${CHROMIUM}`, () => {
        expect.fail(`REQUIRE_BROWSER=1 but ${CHROMIUM} does not exist: the browser tests cannot run`);
      });
    });
  }
}

/** Text whose contrast with what is behind it is below WCAG AA (4.5:1), as "TAG 'text' ratio". */
export const LOW_CONTRAST = `(() => {
  const parse = (c) => { const m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return null; const [r, g, b, a = 1] = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number); return { r, g, b, a }; };
  const channel = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
  const luminance = ({ r, g, b }) => 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
  const background = (el) => { for (let e = el; e; e = e.parentElement) { const c = parse(getComputedStyle(e).backgroundColor); if (c && c.a > 0) return c; } return { r: 255, g: 255, b: 255, a: 1 }; };
  const low = [];
  for (const el of document.querySelectorAll("body *")) {
    if (![...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
    const style = getComputedStyle(el);
    const box = el.getBoundingClientRect();
    if (style.visibility === "hidden" || box.width === 0 || box.right < 0) continue;
    const [hi, lo] = [luminance(parse(style.color)), luminance(background(el))].sort((x, y) => y - x);
    const ratio = (hi + 0.05) / (lo + 0.05);
    if (ratio < 4.5) low.push(el.tagName + " '" + el.textContent.trim().slice(0, 40) + "' " + ratio.toFixed(2));
  }
  return low;
})()`;

/** How far the page is wider than the window (0: no sideways scrolling). */
export const OVERFLOW = "document.documentElement.scrollWidth - window.innerWidth";

/** Browsers with fresh user data directories (no cookies, no history), closed together. */
export class Browsers {
  private readonly open: { context: BrowserContext; dir: string }[] = [];

  async fresh(viewport = { width: 1000, height: 800 }): Promise<Page> {
    const dir = mkdtempSync(join(tmpdir(), "core-chromium-"));
    const context = await chromium.launchPersistentContext(dir, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, viewport });
    this.open.push({ context, dir });
    return context.pages()[0] ?? (await context.newPage());
  }

  async close(): Promise<void> {
    for (const { context, dir } of this.open.splice(0)) {
      await context.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }
}

/** Photographs the page into test-output/screenshots/, and checks what every page must be: readable and not wider than the window. */
export async function look(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
  expect(await page.evaluate(LOW_CONTRAST), `low-contrast text on ${name}`).toEqual([]);
  expect(await page.evaluate(OVERFLOW), `sideways scrolling on ${name}`).toBeLessThanOrEqual(0);
}
