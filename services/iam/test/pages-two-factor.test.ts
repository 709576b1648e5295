import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, createIam, PASSWORD, signIn, signUp, uniqueEmail, type Iam } from "./support/harness.js";
import { PageBrowser, textOf } from "./support/pages.js";
import { base32Bytes, clearOfStepBoundary, totp } from "./support/totp.js";
import { startDeviceLogin } from "./support/device.js";

/** Issue 28: two-factor on the pages, without script: enrolment on /account, and the code step of signing in. */
describe.each(testDatabases())("two-factor pages on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;

  beforeAll(async () => {
    database = await open();
    iam = await createIam(database);
  });
  afterAll(() => database?.close());

  const secretOnPage = (html: string) => base32Bytes(/<code class="secret" id="totp-secret">([^<]+)<\/code>/.exec(html)![1]!);

  /** Enrols a new user through the pages; their browser stays signed in. */
  async function enrolThroughPages() {
    const ada = await signUp(iam, uniqueEmail("pages-tfa"));
    const browser = new PageBrowser(iam, ada.cookie);
    const account = await browser.get("/account");
    expect(textOf(account.html)).toContain("Two-factor authentication Off");
    const shown = await browser.submit("/account/two-factor", "/account/two-factor/enable", { password: PASSWORD });
    expect(shown.status).toBe(200);
    expect(shown.html).toMatch(/<div class="qr" role="img" aria-label="[^"]+"><svg /);
    expect(shown.html).not.toContain("<script");
    const secret = secretOnPage(shown.html);
    await clearOfStepBoundary();
    const confirmed = await browser.post("/account/two-factor/confirm", { csrf: /name="csrf" value="([^"]+)"/.exec(shown.html)![1]!, code: totp(secret, -1) });
    expect(confirmed.status).toBe(200);
    const codes = [...confirmed.html.matchAll(/<li><code>([A-Za-z0-9]{5}-[A-Za-z0-9]{5})<\/code><\/li>/g)].map((m) => m[1]!);
    expect(codes).toHaveLength(10);
    expect(textOf(confirmed.html)).toContain("shown only this once");
    // the enrolling browser's session was replaced by one that gave a code, and still works
    expect((await browser.get("/account")).status).toBe(200);
    return { ...ada, browser, secret, codes };
  }

  it("enrols from /account: password, QR code and secret as text, a code, then the backup codes once", async () => {
    const ada = await enrolThroughPages();
    const again = await ada.browser.get("/account/two-factor");
    expect(textOf(again.html)).toContain("Turn two-factor off");
    expect(again.html).not.toContain(ada.codes[0]);
  });

  it("offers to sign the other sessions out when enrolling, ticked; ticked, the others end", async () => {
    const ada = await signUp(iam, uniqueEmail("pages-others"));
    const other = await signIn(iam, ada);
    const browser = new PageBrowser(iam, ada.cookie);
    const shown = await browser.submit("/account/two-factor", "/account/two-factor/enable", { password: PASSWORD });
    expect(shown.html).toMatch(/<input type="checkbox" name="signOutOthers" value="yes" checked=""\/>/);
    await clearOfStepBoundary();
    const confirmed = await browser.post("/account/two-factor/confirm", { csrf: /name="csrf" value="([^"]+)"/.exec(shown.html)![1]!, code: totp(secretOnPage(shown.html), -1), signOutOthers: "yes" });
    expect(confirmed.status).toBe(200);
    expect((await call(iam, "GET", "/api/core/session", { token: other.token })).status).toBe(401);
    expect((await browser.get("/account")).status).toBe(200);
  });

  it("signs in with the password, then asks for the code before any session", async () => {
    const ada = await enrolThroughPages();
    const browser = new PageBrowser(iam);
    const first = await browser.submit("/sign-in", "/sign-in", { email: ada.email, password: PASSWORD });
    expect(first.status).toBe(303);
    expect(first.location).toBe("/sign-in/two-factor");
    expect(browser.cookies.has("better-auth.session_token")).toBe(false);
    expect((await browser.get("/account")).status).toBe(302);
    const wrong = await browser.submit("/sign-in/two-factor", "/sign-in/two-factor", { code: totp(ada.secret) === "123456" ? "654321" : "123456" });
    expect(wrong.status).toBe(401);
    expect(textOf(wrong.html)).toContain("That code is not right");
    const done = await browser.submit("/sign-in/two-factor", "/sign-in/two-factor", { code: totp(ada.secret) });
    expect(done.status).toBe(303);
    expect((await browser.get("/account")).status).toBe(200);
  });

  it("takes a backup code at the code step, once", async () => {
    const ada = await enrolThroughPages();
    const browser = new PageBrowser(iam);
    await browser.submit("/sign-in", "/sign-in", { email: ada.email, password: PASSWORD });
    const done = await browser.submit("/sign-in/two-factor", "/sign-in/two-factor", { code: ada.codes[3]! });
    expect(done.status).toBe(303);
    const other = new PageBrowser(iam);
    await other.submit("/sign-in", "/sign-in", { email: ada.email, password: PASSWORD });
    const reused = await other.submit("/sign-in/two-factor", "/sign-in/two-factor", { code: ada.codes[3]! });
    expect(reused.status).toBe(401);
  });

  it("asks for the code before the CLI's approval page when signing in on the way to it", async () => {
    const ada = await enrolThroughPages();
    const started = await startDeviceLogin(iam);
    const next = `/device?user_code=${encodeURIComponent(started.user_code)}`;
    const browser = new PageBrowser(iam);
    const first = await browser.submit(`/sign-in?next=${encodeURIComponent(next)}`, "/sign-in", { email: ada.email, password: PASSWORD });
    expect(first.location).toBe(`/sign-in/two-factor?next=${encodeURIComponent(next)}`);
    const device = await browser.get(next);
    expect(device.status).toBe(302);
    expect(device.html).not.toContain("Approve");
    const done = await browser.submit(first.location!, "/sign-in/two-factor", { code: totp(ada.secret) });
    expect(done.location).toBe(next);
    const approve = await browser.get(next);
    expect(approve.status).toBe(200);
    expect(approve.html).toContain("Approve");
  });

  it("turns two-factor off with the password and a code, not with a wrong code", async () => {
    const ada = await enrolThroughPages();
    const wrong = await ada.browser.submit("/account/two-factor", "/account/two-factor/disable", { password: PASSWORD, code: "00000-00000" });
    expect(wrong.status).toBe(401);
    expect(textOf(wrong.html)).toContain("That code is not right");
    const off = await ada.browser.submit("/account/two-factor", "/account/two-factor/disable", { password: PASSWORD, code: ada.codes[0]! });
    expect(off.status).toBe(303);
    expect(textOf((await ada.browser.get(off.location!)).html)).toContain("Two-factor authentication is off.");
  });

  it("makes new backup codes with the password and shows them once", async () => {
    const ada = await enrolThroughPages();
    const fresh = await ada.browser.submit("/account/two-factor", "/account/two-factor/backup-codes", { password: PASSWORD });
    expect(fresh.status).toBe(200);
    const codes = [...fresh.html.matchAll(/<li><code>([A-Za-z0-9]{5}-[A-Za-z0-9]{5})<\/code><\/li>/g)].map((m) => m[1]!);
    expect(codes).toHaveLength(10);
    expect(codes).not.toContain(ada.codes[0]);
  });
});
