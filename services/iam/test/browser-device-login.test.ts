import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildCli, CoreProcess, freshHome } from "../../../packages/cli/test/support/cli.js";
import { startLiveIam, type LiveIam } from "../../../packages/cli/test/support/live-iam.js";
import { Browsers, hasChromium, look, requireBrowserOrSkip } from "../../../test/support/chromium.js";
import { call, PASSWORD, serviceToken, signUp, uniqueEmail, uniqueSlug, type SignedUp } from "./support/harness.js";

requireBrowserOrSkip();

/**
 * The whole device login as a person does it (issue 3): the real `core login` process against IAM
 * listening on loopback, and the pages in headless Chromium: sign up or sign in, Approve or Deny.
 * Every page is photographed into test-output/screenshots/ for a reviewer.
 */
describe.skipIf(!hasChromium)("device login in a real browser (Chromium)", () => {
  let core: string;
  let live: LiveIam;
  const browsers = new Browsers();

  /** someone who signed up before, for the tests that sign in */
  let returning: SignedUp;

  beforeAll(async () => {
    [core, live] = await Promise.all([buildCli(), startLiveIam({ deviceIntervalSeconds: 1, deviceCodeSeconds: 120 })]);
    returning = await signUp(live.iam, uniqueEmail("returning"));
  });
  afterAll(async () => {
    await browsers.close();
    await live?.close();
  });

  const freshBrowser = (viewport?: { width: number; height: number }) => browsers.fresh(viewport);

  const heading = (page: Page) => page.locator("h1").innerText();

  /** `core login` started, with the code and the address (code filled in) it printed. */
  async function startLogin(home: string) {
    const cli = new CoreProcess(core, ["login", "--iam-url", live.iamUrl], { env: { CORE_HOME: home, CORE_LOGIN_TIMEOUT_SECONDS: "90" } });
    const [, userCode] = await cli.waitFor(/Your one-time code: ([A-Z]{4}-[A-Z]{4})/);
    const [address] = await cli.waitFor(/https?:\/\/\S+\/device\?user_code=[A-Z-]+/);
    return { cli, userCode: userCode!, address: address! };
  }

  it("signs up and approves: core login prints `Authenticated as <email>`, exits 0 and stores the credential", async () => {
    const person = { email: uniqueEmail("browser"), name: "Ada Browser" };
    const home = freshHome();
    const { cli, userCode, address } = await startLogin(home);
    expect(address).toBe(`${live.iamUrl}/device?user_code=${userCode}`);

    const page = await freshBrowser();
    await page.goto(address);
    // not signed in: the sign-in page, on the way back to the code
    expect(new URL(page.url()).pathname).toBe("/sign-in");
    expect(await heading(page)).toBe("Sign in");
    expect(await page.locator("#sign-in-purpose").innerText()).toBe("Sign in to approve the Core CLI (core login) on your computer.");
    expect(await page.evaluate("document.activeElement.id")).toBe("field-email");
    await page.keyboard.press("Tab");
    expect(await page.evaluate("document.activeElement.id")).toBe("field-password");
    await page.keyboard.press("Tab");
    expect(await page.evaluate("document.activeElement.textContent")).toBe("Sign in");
    await look(page, "01-sign-in");

    await page.getByRole("link", { name: "Create an account" }).click();
    expect(await heading(page)).toBe("Create your account");
    expect(await page.locator("#sign-in-purpose").innerText()).toBe("Create your account to approve the Core CLI (core login) on your computer.");
    await page.getByLabel("Your name").fill(person.name);
    await page.getByLabel("Email").fill(person.email);
    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await look(page, "02-sign-up");
    await page.getByRole("button", { name: "Create account" }).click();

    // signed up and back at the code: what is asking, and the choice
    expect(await heading(page)).toBe("Approve this sign-in?");
    expect(await page.locator(".code").innerText()).toBe(userCode);
    const facts = await page.locator("dl.facts").innerText();
    expect(facts).toMatch(/Program\s+core-cli\//);
    expect(facts).toMatch(/From address\s+127\.0\.0\.1/);
    await look(page, "03-device-confirm");
    await page.getByRole("button", { name: "Approve" }).click();
    expect(await heading(page)).toBe("Device approved");
    expect(await page.getByRole("status").innerText()).toContain("Device approved — you can return to your terminal.");
    await look(page, "04-device-approved");
    // a reload right after the success shows the success again, not "Code not found or expired"
    await page.reload();
    expect(await heading(page)).toBe("Device approved");

    const done = await cli.finished;
    expect(done.stdout.trim().split("\n").at(-1)).toBe(`Authenticated as ${person.email}`);
    expect(done.code).toBe(0);
    const credentials = join(home, "credentials.json");
    expect(JSON.parse(readFileSync(credentials, "utf8"))).toMatchObject({ email: person.email, audience: "core-cli", iamUrl: live.iamUrl });
    expect(statSync(credentials).mode & 0o777).toBe(0o600);
    expect(statSync(dirname(credentials)).mode & 0o777).toBe(0o700);

    // the account page lists the CLI's session beside this browser's
    await page.getByRole("link", { name: "Your account and sessions" }).click();
    expect(await heading(page)).toBe("Your account");
    const sessions = page.locator("section[aria-labelledby=sessions-heading] li");
    expect(await sessions.count()).toBe(2);
    expect(await sessions.filter({ hasText: "This browser" }).innerText()).toContain("Chrome on Linux");
  }, 90_000);

  it("sets up an organization and manages an API key in the browser", async () => {
    const page = await freshBrowser();
    await page.goto(`${live.iamUrl}/sign-in`);
    await page.getByLabel("Email", { exact: true }).fill(returning.email);
    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    // someone in no organization lands on onboarding
    expect(await heading(page)).toBe("Set up your organization");
    const slug = uniqueSlug("browser");
    await page.getByLabel("Organization name").fill("Browser Works");
    await page.getByLabel("Slug").fill(slug);
    await look(page, "05-onboarding");
    await page.getByRole("button", { name: "Create organization" }).click();
    expect(await heading(page)).toBe("Your account");
    expect(await page.locator("section[aria-labelledby=org-heading]").innerText()).toContain(slug);

    await page.getByLabel("Key name").fill("deploy job");
    await page.getByRole("button", { name: "Create key" }).click();
    const key = await page.locator("#new-api-key").innerText();
    expect(key).toMatch(/^core_/);
    await look(page, "06-account-new-api-key");
    // a reload shows the list, not the key again, and makes no second key
    await page.reload();
    expect(await page.locator("#new-api-key").count()).toBe(0);
    expect(await page.locator("section[aria-labelledby=keys-heading] li").count()).toBe(1);
    const keyValid = async () => (await call(live.iam, "POST", "/api/core/apikey/validate", { token: await serviceToken(live.iam), body: { key } })).body.valid;
    expect(await keyValid()).toBe(true);

    await page.getByRole("button", { name: /^Revoke the key deploy job/ }).click();
    expect(await page.getByRole("status").first().innerText()).toContain("The API key is revoked");
    expect(await keyValid()).toBe(false);
    await look(page, "07-account");

    await page.goto(`${live.iamUrl}/device`);
    expect(await heading(page)).toBe("Connect a device");
    await look(page, "08-device-enter-code");
    await page.getByLabel("Code").fill("BCDF-GHJK");
    await page.getByRole("button", { name: "Continue" }).click();
    expect(await heading(page)).toBe("Code not found or expired");
    await look(page, "09-device-code-not-found");

    await page.getByRole("button", { name: "Sign out", exact: true }).click();
    expect(await heading(page)).toBe("Sign in");
    expect(await page.getByRole("status").innerText()).toBe("You are signed out.");
    await page.goto(`${live.iamUrl}/account`);
    expect(new URL(page.url()).pathname).toBe("/sign-in");
  }, 90_000);

  it("tells the owner of an unconfirmed account what a magic link removed, and a mailed link sets a new password", async () => {
    const person = await signUp(live.iam, uniqueEmail("unproven"));
    const mailTo = (subject: RegExp) => live.iam.mailer.sent.findLast((m) => m.to === person.email && subject.test(m.subject))!;
    const linkIn = (text: string) => /https?:\/\/\S+/.exec(text)![0].replace(live.iam.config.iamUrl, live.iamUrl);

    const page = await freshBrowser();
    await page.goto(`${live.iamUrl}/sign-in`);
    await page.getByLabel("Email for the sign-in link").fill(person.email);
    await page.getByRole("button", { name: "Email me a link" }).click();
    expect(await heading(page)).toBe("Check your email");
    await page.goto(linkIn(mailTo(/sign-in link/).text));
    expect(await heading(page)).toBe("Your account");
    expect(await page.locator("#notice").innerText()).toContain("its password was removed and its other sessions were signed out");
    expect(await page.locator("section#password").innerText()).toContain("This account has no password");
    await look(page, "13-account-after-unproven-magic-link");
    expect(mailTo(/password and other sessions were removed/).text).toContain("the password of the account");

    await page.getByRole("button", { name: "Email me a link to set a password" }).click();
    expect(await page.getByRole("status").first().innerText()).toContain("We sent you a link to set a password");
    await page.goto(linkIn(mailTo(/Set a new Core password/).text));
    expect(await heading(page)).toBe("Set a new password");
    await look(page, "14-reset-password");
    await page.getByLabel("New password", { exact: true }).fill("a-brand-new-password");
    await page.getByLabel("New password again").fill("a-brand-new-password");
    await page.getByRole("button", { name: "Set password" }).click();
    expect(await heading(page)).toBe("Your password is set");
    await look(page, "15-password-set");

    await page.goto(`${live.iamUrl}/sign-in`);
    await page.getByRole("link", { name: "Forgot your password?" }).click();
    expect(await heading(page)).toBe("Forgot your password?");
    await look(page, "16-forgot-password");
    await page.goto(`${live.iamUrl}/sign-in`);
    await page.getByLabel("Email", { exact: true }).fill(person.email);
    await page.getByLabel("Password", { exact: true }).fill("a-brand-new-password");
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    expect(await heading(page)).toBe("Set up your organization");
  }, 90_000);

  it("signs in on a phone-sized screen and denies: core login prints `Access denied.` and exits 1", async () => {
    const home = freshHome();
    const { cli, address } = await startLogin(home);
    const page = await freshBrowser({ width: 360, height: 740 });
    await page.goto(address);
    expect(await heading(page)).toBe("Sign in");
    await page.getByLabel("Email", { exact: true }).fill(returning.email);
    await page.getByLabel("Password", { exact: true }).fill("not-the-password");
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    expect(await page.getByRole("alert").innerText()).toBe("Wrong email or password.");
    await look(page, "10-sign-in-wrong-password-mobile");
    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();

    expect(await heading(page)).toBe("Approve this sign-in?");
    await look(page, "11-device-confirm-mobile");
    await page.getByRole("button", { name: "Deny" }).click();
    expect(await heading(page)).toBe("Request denied");
    await look(page, "12-device-denied-mobile");

    const done = await cli.finished;
    expect(done.stderr + done.stdout).toContain("Access denied.");
    expect(done.code).toBe(1);
    expect(existsSync(join(home, "credentials.json"))).toBe(false);
  }, 90_000);
});
