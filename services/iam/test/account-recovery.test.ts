import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, iamWithOperator, PASSWORD, signIn, signUp, uniqueEmail, type Iam, type Operator, type SignedUp } from "./support/harness.js";
import { pollToken, refresh, startDeviceLogin } from "./support/device.js";
import { PageBrowser, textOf } from "./support/pages.js";

/**
 * Issue 10 §3: signing in by magic link must not destroy a proven account's password; an address is
 * proven by the mail sign-up sends; a forgotten password is reset by mail; a password is changed on
 * /account; and when the library does strip an unproven account, its owner is told.
 */
describe.each(testDatabases())("verification, passwords and magic links on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let op: Operator;

  beforeAll(async () => ({ database, iam, op } = await iamWithOperator(open)));
  afterAll(() => database?.close());

  const mailsTo = (email: string) => iam.mailer.sent.filter((m) => m.to === email);
  const lastMailTo = (email: string, subject: RegExp) => mailsTo(email).findLast((m) => subject.test(m.subject));
  const linkIn = (text: string) => new URL(/https?:\/\/\S+/.exec(text)![0]);
  const pathOf = (url: URL) => `${url.pathname}${url.search}`;
  const sessionWorks = async (token: string) => (await call(iam, "GET", "/api/core/session", { token })).status === 200;
  const passwordWorks = async (person: { email: string }, password = PASSWORD) =>
    (await call(iam, "POST", "/api/auth/sign-in/email", { body: { email: person.email, password } })).status === 200;
  const auditOf = async (action: string, actorId?: string) =>
    ((await call(iam, "GET", `/api/audit/events?action=${action}${actorId ? `&actorId=${actorId}` : ""}`, { token: op.token })).body.data ?? []) as {
      outcome: string;
      actorId: string | null;
      metadata: Record<string, unknown>;
    }[];

  /** A CLI login of `person` through the device flow: its access token and refresh token. */
  async function cliLogin(person: SignedUp) {
    const started = await startDeviceLogin(iam);
    await call(iam, "POST", "/oauth/device/authorize", { token: person.token, body: { user_code: started.user_code } });
    const tokens = (await pollToken(iam, started.device_code)).body;
    return { access: tokens.access_token as string, refresh: tokens.refresh_token as string };
  }

  /** Requests a magic link for `email` as the sign-in page does, and opens it in `browser`; answers where it lands. */
  async function signInByLink(email: string, browser = new PageBrowser(iam)) {
    await browser.submit("/sign-in", "/sign-in/magic-link", { email });
    const link = linkIn(lastMailTo(email, /sign-in link/)!.text);
    const landed = await browser.get(pathOf(link));
    return { browser, landed };
  }

  async function verifyAddress(person: { email: string }) {
    const link = linkIn(lastMailTo(person.email, /Confirm your email/)!.text);
    return new PageBrowser(iam).get(pathOf(link));
  }

  describe("the address is proven by the mail sign-up sends", () => {
    it("mails a link to a page that confirms the address and says so", async () => {
      const ada = await signUp(iam);
      const mail = lastMailTo(ada.email, /Confirm your email address/);
      expect(mail).toBeDefined();
      const link = linkIn(mail!.text);
      expect(`${link.origin}${link.pathname}`).toBe(`${iam.config.iamUrl}/verify-email`);
      const page = await new PageBrowser(iam).get(pathOf(link));
      expect(page.status).toBe(200);
      expect(textOf(page.html)).toContain("Your email address is confirmed");
      expect((await call(iam, "GET", "/api/auth/get-session", { token: ada.token })).body.user.emailVerified).toBe(true);
      expect(await auditOf("auth.email_verify")).toContainEqual(expect.objectContaining({ outcome: "success" }));
    });

    it("says a made-up or expired link is invalid and how to get a new one", async () => {
      const page = await new PageBrowser(iam).get("/verify-email?token=made-up");
      expect(page.status).toBe(400);
      expect(textOf(page.html)).toContain("This confirmation link is invalid or expired.");
      expect(textOf(page.html)).toContain("Sign in to send a new link");
      expect(await auditOf("auth.email_verify")).toContainEqual(expect.objectContaining({ outcome: "failure" }));
    });

    it("sends a new link from /account, which shows the address as not confirmed until then", async () => {
      const ada = await signUp(iam);
      const browser = new PageBrowser(iam, ada.cookie);
      expect((await browser.get("/account")).html).toContain("not confirmed");
      const before = mailsTo(ada.email).length;
      const sent = await browser.submit("/account", "/account/verify-email", {});
      expect(sent.location).toBe("/account?sent=verification");
      expect(mailsTo(ada.email).length).toBe(before + 1);
      expect((await verifyAddress(ada)).status).toBe(200);
      const page = await browser.get("/account");
      expect(page.html).toContain('<span class="badge">confirmed</span>');
      expect(page.html).not.toContain('action="/account/verify-email"');
    });
  });

  describe("a magic link on a proven account", () => {
    it("keeps the password and every other session, the CLI's login and its refresh included", async () => {
      const ada = await signUp(iam);
      await verifyAddress(ada);
      const cli = await cliLogin(ada);
      const { landed } = await signInByLink(ada.email);
      expect(landed.status).toBe(302);
      expect(await passwordWorks(ada)).toBe(true);
      expect(await sessionWorks(ada.token)).toBe(true);
      expect(await sessionWorks(cli.access)).toBe(true);
      expect((await refresh(iam, cli.refresh)).status).toBe(200);
      expect(await auditOf("auth.unproven_access_revoked", ada.userId)).toEqual([]);
    });
  });

  describe("a magic link on an unproven account (better-auth revokes what it cannot trust)", () => {
    it("tells the owner on the page, by mail and in the audit log what was removed, and the CLI's login ends with the rest", async () => {
      const ada = await signUp(iam);
      const cli = await cliLogin(ada);
      const { browser, landed } = await signInByLink(ada.email);
      expect(landed.status).toBe(302);
      // what the library did
      expect(await passwordWorks(ada)).toBe(false);
      expect(await sessionWorks(ada.token)).toBe(false);
      expect(await sessionWorks(cli.access)).toBe(false);
      expect((await refresh(iam, cli.refresh)).status).toBe(400);
      // the page it lands on says so, once: the landing sends it to the account, where the password is set
      const home = await browser.get(pathOf(new URL(landed.location!, iam.config.iamUrl)));
      expect(home.location).toBe("/account");
      const account = await browser.get(home.location!);
      expect(account.status).toBe(200);
      expect(textOf(account.html)).toContain("its password was removed and its other sessions were signed out");
      expect(textOf((await browser.get("/account")).html)).not.toContain("its password was removed");
      // the mail says what went and how to set a new password
      const mail = lastMailTo(ada.email, /password and other sessions were removed/);
      expect(mail?.text).toContain("the password of the account");
      expect(mail?.text).toContain("2 signed-in sessions");
      expect(mail?.text).toContain(`${iam.config.iamUrl}/forgot-password`);
      // the audit log records it
      expect(await auditOf("auth.unproven_access_revoked", ada.userId)).toEqual([
        expect.objectContaining({ outcome: "success", metadata: { passwordRemoved: true, otherAccountsRemoved: 0, sessionsRevoked: 2 } }),
      ]);
      // the account page offers a way to a password again
      expect(textOf(account.html)).toContain("This account has no password");
      const asked = await browser.submit("/account", "/account/password-link", {});
      expect(asked.location).toBe("/account?sent=password-link");
      const reset = linkIn(lastMailTo(ada.email, /Set a new Core password/)!.text);
      const done = await new PageBrowser(iam).submit(pathOf(reset), "/reset-password", { password: "a-new-password-1", repeat: "a-new-password-1" });
      expect(done.status).toBe(200);
      expect(await passwordWorks(ada, "a-new-password-1")).toBe(true);
    });
  });

  describe("forgot password", () => {
    it("mails a reset link; the reset page sets the password, signs every session out and says so", async () => {
      const ada = await signUp(iam);
      const other = await signIn(iam, ada);
      const cli = await cliLogin(ada);
      const browser = new PageBrowser(iam);
      const asked = await browser.submit("/forgot-password", "/forgot-password", { email: ada.email });
      expect(asked.status).toBe(200);
      expect(textOf(asked.html)).toContain(`If ${ada.email} has an account, a link to set a new password is on its way.`);
      const link = linkIn(lastMailTo(ada.email, /Set a new Core password/)!.text);
      expect(`${link.origin}${link.pathname}`).toBe(`${iam.config.iamUrl}/reset-password`);

      const done = await browser.submit(pathOf(link), "/reset-password", { password: "another-horse-battery", repeat: "another-horse-battery" });
      expect(done.status).toBe(200);
      expect(textOf(done.html)).toContain("every session of your account was signed out");
      expect(await passwordWorks(ada)).toBe(false);
      expect(await passwordWorks(ada, "another-horse-battery")).toBe(true);
      for (const token of [ada.token, other.token, cli.access]) expect(await sessionWorks(token)).toBe(false);
      expect((await refresh(iam, cli.refresh)).status).toBe(400);
      expect(lastMailTo(ada.email, /password was changed/)).toBeDefined();
      expect(await auditOf("auth.password_reset", ada.userId)).toEqual([expect.objectContaining({ outcome: "success" })]);

      // the link works once
      const again = await new PageBrowser(iam).submit(pathOf(link), "/reset-password", { password: "third-horse-battery", repeat: "third-horse-battery" });
      expect(again.status).toBe(400);
      expect(textOf(again.html)).toContain("This link is invalid, used or expired.");
    });

    it("answers the same for an address without an account, and mails nothing", async () => {
      const email = uniqueEmail("nobody");
      const page = await new PageBrowser(iam).submit("/forgot-password", "/forgot-password", { email });
      expect(page.status).toBe(200);
      expect(textOf(page.html)).toContain(`If ${email} has an account`);
      expect(mailsTo(email)).toEqual([]);
    });

    it("refuses two different passwords, and one too short, keeping the link usable", async () => {
      const ada = await signUp(iam);
      await new PageBrowser(iam).submit("/forgot-password", "/forgot-password", { email: ada.email });
      const link = pathOf(linkIn(lastMailTo(ada.email, /Set a new Core password/)!.text));
      const browser = new PageBrowser(iam);
      const differ = await browser.submit(link, "/reset-password", { password: "first-password-1", repeat: "second-password-2" });
      expect(differ.status).toBe(400);
      expect(textOf(differ.html)).toContain("The two passwords differ.");
      const short = await browser.submit(link, "/reset-password", { password: "short", repeat: "short" });
      expect(short.status).toBe(400);
      expect((await browser.submit(link, "/reset-password", { password: "first-password-1", repeat: "first-password-1" })).status).toBe(200);
    });

    it("is linked from the sign-in page", async () => {
      expect((await new PageBrowser(iam).get("/sign-in")).html).toContain('href="/forgot-password"');
    });
  });

  describe("change password on /account", () => {
    it("refuses a wrong current password and keeps the old one", async () => {
      const ada = await signUp(iam);
      const page = await new PageBrowser(iam, ada.cookie).submit("/account", "/account/password", { current: "wrong-password", password: "new-password-1", signOutOthers: "yes" });
      expect(page.status).toBe(400);
      expect(textOf(page.html)).toContain("Your current password is wrong.");
      expect(await passwordWorks(ada)).toBe(true);
    });

    it("changes it and signs the other sessions out, keeping this browser signed in", async () => {
      const ada = await signUp(iam);
      const other = await signIn(iam, ada);
      const cli = await cliLogin(ada);
      const browser = new PageBrowser(iam, ada.cookie);
      const changed = await browser.submit("/account", "/account/password", { current: PASSWORD, password: "changed-password-1", signOutOthers: "yes" });
      expect(changed.status).toBe(303);
      expect(changed.location).toBe("/account?changed=password-others");
      expect(await passwordWorks(ada, "changed-password-1")).toBe(true);
      expect(await sessionWorks(other.token)).toBe(false);
      expect(await sessionWorks(cli.access)).toBe(false);
      expect((await refresh(iam, cli.refresh)).status).toBe(400);
      const page = await browser.get(changed.location!);
      expect(page.status).toBe(200);
      expect(textOf(page.html)).toContain("Your password is changed, and your other sessions are signed out.");
      expect(await auditOf("auth.password_change", ada.userId)).toEqual([expect.objectContaining({ outcome: "success" })]);
    });

    it("keeps the other sessions when asked to", async () => {
      const ada = await signUp(iam);
      const other = await signIn(iam, ada);
      const changed = await new PageBrowser(iam, ada.cookie).submit("/account", "/account/password", { current: PASSWORD, password: "changed-password-2" });
      expect(changed.location).toBe("/account?changed=password");
      expect(await sessionWorks(other.token)).toBe(true);
    });
  });

  describe("IAM's own address in a browser", () => {
    it("sends a signed-out browser to /sign-in, someone in no organization to /onboarding and a member to /account, never a JSON 404", async () => {
      const out = await new PageBrowser(iam).get("/");
      expect([out.status, out.location]).toEqual([302, "/sign-in"]);
      const ada = await signUp(iam);
      const signedIn = await new PageBrowser(iam, ada.cookie).get("/");
      expect([signedIn.status, signedIn.location]).toEqual([302, "/onboarding"]);
      expect([(await new PageBrowser(iam, op.cookie).get("/")).location]).toEqual(["/account"]);
    });

    it("is where a magic link without a callback lands, which then leads to the account", async () => {
      const email = uniqueEmail("nocallback");
      await call(iam, "POST", "/api/auth/sign-in/magic-link", { body: { email } });
      const link = linkIn(lastMailTo(email, /sign-in link/)!.text);
      const browser = new PageBrowser(iam);
      const landed = await browser.get(pathOf(link));
      expect(landed.location).toBe(`${iam.config.iamUrl}/`);
      const home = await browser.get("/");
      // a new person (the link made the account): onboarding comes first
      expect(home.location).toBe("/onboarding");
    });
  });

  describe("audit of magic links", () => {
    it("records a refused link (made-up or used) as a failure with the library's code", async () => {
      await new PageBrowser(iam).get("/api/auth/magic-link/verify?token=made-up-token&callbackURL=%2Fsign-in");
      const events = await auditOf("auth.magic_link.verify");
      expect(events[0]).toMatchObject({ outcome: "failure", metadata: { path: "/magic-link/verify", code: "INVALID_TOKEN" } });
    });
  });
});
