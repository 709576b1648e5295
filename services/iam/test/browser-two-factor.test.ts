import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startLiveIam, type LiveIam } from "../../../packages/cli/test/support/live-iam.js";
import { Browsers, hasChromium, look, requireBrowserOrSkip } from "../../../test/support/chromium.js";
import { PASSWORD, signUp, uniqueEmail } from "./support/harness.js";
import { base32Bytes, totp } from "./support/totp.js";

requireBrowserOrSkip();

/**
 * Two-factor as a person meets it (issue 28): enrolment on /account (the QR code, the secret typed
 * into an "app" — here RFC 6238 computed by the test from the secret the page shows), the backup
 * codes, then signing out and in with the password and a code. Headless Chromium against IAM
 * listening on loopback; every page photographed into test-output/screenshots/.
 */
describe.skipIf(!hasChromium)("two-factor in a real browser (Chromium)", () => {
  let live: LiveIam;
  const browsers = new Browsers();

  beforeAll(async () => {
    live = await startLiveIam();
  });
  afterAll(async () => {
    await browsers.close();
    await live?.close();
  });

  const heading = (page: Page) => page.locator("h1").innerText();

  it("enrols from /account, then signs in with the password and a code", async () => {
    const email = uniqueEmail("browser-tfa");
    await signUp(live.iam, email);
    const page = await browsers.fresh();

    await page.goto(`${live.iamUrl}/account`);
    expect(await heading(page)).toBe("Sign in");
    await page.locator("#field-email").fill(email);
    await page.locator("#field-password").fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    expect(await heading(page)).toBe("Your account");
    expect(await page.locator("#two-factor").innerText()).toContain("Off");
    await look(page, "two-factor-01-account");

    await page.getByRole("link", { name: "Set up two-factor authentication" }).click();
    expect(await heading(page)).toBe("Two-factor authentication");
    await look(page, "two-factor-02-start");
    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByRole("button", { name: "Continue" }).click();

    // the QR code is an SVG drawn by the server, and the secret is there as text
    expect(await page.locator(".qr svg").count()).toBe(1);
    const secret = base32Bytes(await page.locator("#totp-secret").innerText());
    await look(page, "two-factor-03-scan");
    await page.getByLabel("Code from your app").fill(totp(secret, -1));
    await page.getByRole("button", { name: "Turn on two-factor" }).click();
    expect(await page.locator("#backup-codes li").count()).toBe(10);
    expect(await page.getByText("shown only this once").count()).toBe(1);
    await look(page, "two-factor-04-backup-codes");

    await page.goto(`${live.iamUrl}/account`);
    expect(await page.locator("#two-factor").innerText()).toContain("On");
    await page.locator("header form[action=\"/sign-out\"] button").click();
    expect(await heading(page)).toBe("Sign in");

    await page.locator("#field-email").fill(email);
    await page.locator("#field-password").fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    expect(await heading(page)).toBe("Enter your code");
    expect(new URL(page.url()).pathname).toBe("/sign-in/two-factor");
    expect(await page.evaluate("document.activeElement.id")).toBe("field-code");
    await look(page, "two-factor-05-code");

    await page.getByLabel("Code", { exact: true }).fill(totp(secret) === "000000" ? "111111" : "000000");
    await page.getByRole("button", { name: "Verify" }).click();
    expect(await page.getByRole("alert").innerText()).toContain("That code is not right");
    await look(page, "two-factor-06-wrong-code");

    await page.getByLabel("Code", { exact: true }).fill(totp(secret));
    await page.getByRole("button", { name: "Verify" }).click();
    // signed in (someone in no organization lands on its set-up)
    expect(await heading(page)).toBe("Set up your organization");
    await page.goto(`${live.iamUrl}/account`);
    expect(await heading(page)).toBe("Your account");
  });

  it("keeps the pages readable on a narrow screen", async () => {
    const email = uniqueEmail("browser-tfa-narrow");
    const person = await signUp(live.iam, email);
    const page = await browsers.fresh({ width: 360, height: 740 });
    const [name, value] = person.cookie.split("=");
    await page.context().addCookies([{ name: name!, value: value!, url: live.iamUrl }]);
    await page.goto(`${live.iamUrl}/account/two-factor`);
    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByRole("button", { name: "Continue" }).click();
    expect(await page.locator(".qr svg").count()).toBe(1);
    await look(page, "two-factor-07-scan-narrow");
  });
});
