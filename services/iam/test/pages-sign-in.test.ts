import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, createIam, PASSWORD, signUp, uniqueEmail, type Iam } from "./support/harness.js";
import { hiddenFields, PageBrowser, textOf } from "./support/pages.js";

const SESSION_COOKIE = "better-auth.session_token";

describe.each(testDatabases())("sign-in, sign-up and sign-out pages on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;

  beforeAll(async () => {
    database = await open();
    iam = await createIam(database);
  });
  afterAll(async () => {
    await database?.close();
  });

  const sessionWorks = async (browser: PageBrowser) => (await browser.get("/account")).status === 200;

  describe("GET /sign-in", () => {
    it("shows a password form and a magic-link form, each with a CSRF token bound to a new httpOnly cookie", async () => {
      const browser = new PageBrowser(iam);
      const page = await browser.get("/sign-in");
      expect(page.status).toBe(200);
      expect(page.headers.get("content-type")).toMatch(/^text\/html/);
      expect(page.html).toMatch(/^<!DOCTYPE html><html lang="en">/);
      expect(page.html).toContain("<h1>Sign in</h1>");
      expect(page.html).toMatch(/<label for="field-email">Email<\/label><input id="field-email" name="email" type="email"/);
      expect(page.html).toMatch(/<input id="field-password" name="password" type="password" autocomplete="current-password"/);
      expect(page.html).toMatch(/<label for="field-link-email">/);
      expect(hiddenFields(page.html, "/sign-in").csrf).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(hiddenFields(page.html, "/sign-in/magic-link").csrf).toBe(hiddenFields(page.html, "/sign-in").csrf);
      expect(page.headers.getSetCookie().find((c) => c.startsWith("core.csrf="))).toMatch(/HttpOnly; SameSite=Lax/);
      // no inline script: the one script is our own file (passkeys)
      expect([...page.html.matchAll(/<script[^>]*>([\s\S]*?)<\/script>/g)].map((m) => m[0])).toEqual(['<script src="/assets/passkeys.js" defer=""></script>']);
    });

    it("sends pages with no caching, no framing, no script and forms only to this site", async () => {
      const page = await new PageBrowser(iam).get("/sign-in");
      expect(page.headers.get("cache-control")).toBe("no-store");
      expect(page.headers.get("x-frame-options")).toBe("DENY");
      const csp = page.headers.get("content-security-policy") ?? "";
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("form-action 'self'");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(page.headers.get("referrer-policy")).toBe("same-origin");
    });

    it("serves the one stylesheet the pages link to", async () => {
      const css = await iam.app.request("/assets/pages.css");
      expect(css.status).toBe(200);
      expect(css.headers.get("content-type")).toMatch(/^text\/css/);
      expect(await css.text()).toContain(":focus-visible");
    });

    it("keeps a safe next address in the form and links sign-up to it", async () => {
      const page = await new PageBrowser(iam).get(`/sign-in?next=${encodeURIComponent("/device?user_code=BCDF-GHJK")}`);
      expect(hiddenFields(page.html, "/sign-in").next).toBe("/device?user_code=BCDF-GHJK");
      expect(page.html).toContain('href="/sign-up?next=%2Fdevice%3Fuser_code%3DBCDF-GHJK"');
      expect(textOf(page.html)).toContain("Sign in to continue.");
    });

    it("sends a signed-in visitor on to next at once", async () => {
      const ada = await signUp(iam);
      const page = await new PageBrowser(iam, ada.cookie).get("/sign-in?next=%2Fdevice");
      expect(page.status).toBe(302);
      expect(page.location).toBe("/device");
    });

    it("keeps page routes out of the OpenAPI description", async () => {
      const paths = Object.keys((await iam.app.openApiDocument()).paths ?? {});
      for (const page of ["/sign-in", "/sign-up", "/sign-out", "/device", "/onboarding", "/account"]) {
        expect(paths.filter((p) => p === page || p.startsWith(`${page}/`))).toEqual([]);
      }
    });
  });

  describe("what asked for the sign-in", () => {
    it("says that signing in approves the CLI when core login sent the browser, on sign-in and sign-up, without reading the code", async () => {
      const browser = new PageBrowser(iam);
      const page = await browser.get(`/sign-in?next=${encodeURIComponent("/device?user_code=BCDF-GHJK")}`);
      expect(page.html).toContain('<p class="lead" id="sign-in-purpose">Sign in to approve the Core CLI (core login) on your computer.</p>');
      expect(page.html).not.toContain("BCDF-GHJK</");
      const signUpPage = await browser.get(`/sign-up?next=${encodeURIComponent("/device")}`);
      expect(textOf(signUpPage.html)).toContain("Create your account to approve the Core CLI (core login) on your computer.");
      expect((await browser.get(`/sign-in?next=${encodeURIComponent("/invitations/inv_1")}`)).html).toContain("Sign in to answer your invitation");
      // nothing is said for a plain sign-in or one that leads elsewhere
      expect((await browser.get("/sign-in")).html).not.toContain("sign-in-purpose");
      expect((await browser.get(`/sign-in?next=${encodeURIComponent("/account")}`)).html).not.toContain("sign-in-purpose");
      expect((await browser.get(`/sign-in?next=${encodeURIComponent("/devices-elsewhere")}`)).html).not.toContain("sign-in-purpose");
    });
  });

  describe("POST /sign-in", () => {
    it("signs in with the right password: 303 to next with the session cookie", async () => {
      const ada = await signUp(iam);
      const browser = new PageBrowser(iam);
      const page = await browser.get("/sign-in?next=%2Fonboarding");
      const r = await browser.post("/sign-in", { ...hiddenFields(page.html, "/sign-in"), email: ada.email, password: PASSWORD });
      expect(r.status).toBe(303);
      expect(r.location).toBe("/onboarding");
      expect(r.headers.getSetCookie().find((c) => c.startsWith(`${SESSION_COOKIE}=`))).toMatch(/HttpOnly/);
      expect(await sessionWorks(browser)).toBe(true);
    });

    it.each([
      ["no next", undefined],
      ["another host", "//evil.example/steal"],
      ["an absolute address", "https://evil.example/"],
      ["a backslash trick", "/\\evil.example"],
      ["an encoded slash", "/%2F%2Fevil.example"],
      ["a script address", "javascript:alert(1)"],
    ])("goes to the landing page / after signing in when next is %s", async (_, next) => {
      const ada = await signUp(iam);
      const browser = new PageBrowser(iam);
      const fields = { ...hiddenFields((await browser.get("/sign-in")).html, "/sign-in"), email: ada.email, password: PASSWORD };
      const r = await browser.post("/sign-in", next === undefined ? fields : { ...fields, next });
      expect(r.status).toBe(303);
      expect(r.location).toBe("/");
    });

    it("says 'Wrong email or password.' on the page with 401, keeping the email and never the password", async () => {
      const ada = await signUp(iam);
      const browser = new PageBrowser(iam);
      const r = await browser.submit("/sign-in", "/sign-in", { email: ada.email, password: "not-the-password" });
      expect(r.status).toBe(401);
      expect(r.headers.get("content-type")).toMatch(/^text\/html/);
      expect(r.html).toContain('<div class="alert error" id="sign-in-error" role="alert">Wrong email or password.</div>');
      expect(r.html).toContain(`value="${ada.email}"`);
      expect(r.html).not.toContain("not-the-password");
      expect(r.headers.getSetCookie().some((c) => c.startsWith(`${SESSION_COOKIE}=`))).toBe(false);
    });

    it("asks for both fields when one is empty, without asking the library", async () => {
      const r = await new PageBrowser(iam).submit("/sign-in", "/sign-in", { email: "", password: "" });
      expect(r.status).toBe(400);
      expect(textOf(r.html)).toContain("Enter your email address and your password.");
    });

    it("refuses a form without the CSRF token with a 403 page, and signs nobody in", async () => {
      const ada = await signUp(iam);
      const browser = new PageBrowser(iam);
      await browser.get("/sign-in");
      const r = await browser.post("/sign-in", { email: ada.email, password: PASSWORD });
      expect(r.status).toBe(403);
      expect(r.headers.get("content-type")).toMatch(/^text\/html/);
      expect(textOf(r.html)).toContain("This form has expired or did not come from this site.");
      expect(r.headers.getSetCookie().some((c) => c.startsWith(`${SESSION_COOKIE}=`))).toBe(false);
    });

    it("refuses another browser's CSRF token (login CSRF) with 403", async () => {
      const ada = await signUp(iam);
      const attacker = new PageBrowser(iam);
      const token = hiddenFields((await attacker.get("/sign-in")).html, "/sign-in").csrf!;
      const victim = new PageBrowser(iam);
      await victim.get("/sign-in");
      const r = await victim.post("/sign-in", { csrf: token, email: ada.email, password: PASSWORD });
      expect(r.status).toBe(403);
    });

    it("refuses a form posted from another origin with a 403 page, even with a valid token", async () => {
      const ada = await signUp(iam);
      const browser = new PageBrowser(iam);
      const fields = hiddenFields((await browser.get("/sign-in")).html, "/sign-in");
      const r = await browser.post("/sign-in", { ...fields, email: ada.email, password: PASSWORD }, { origin: "https://evil.example" });
      expect(r.status).toBe(403);
      expect(r.html).toContain("<h1>Request refused</h1>");
      expect(r.headers.getSetCookie().some((c) => c.startsWith(`${SESSION_COOKIE}=`))).toBe(false);
    });
  });

  describe("POST /sign-in/magic-link", () => {
    it("goes back to billing's page after signing in, and refuses other origins and credentials in the address", async () => {
      // billing sends a browser without a session here with its invoice page as next (DESIGN §6.11)
      const back = "http://localhost:4200/invoices/in_1/html?platformId=plt_1";
      const ada = await signUp(iam);
      const browser = new PageBrowser(iam);
      const page = await browser.get(`/sign-in?next=${encodeURIComponent(back)}`);
      expect(hiddenFields(page.html, "/sign-in").next).toBe(back);
      const r = await browser.post("/sign-in", { ...hiddenFields(page.html, "/sign-in"), email: ada.email, password: PASSWORD });
      expect(r.status).toBe(303);
      expect(r.location).toBe(back);
      // a signed-in visitor is sent on at once
      expect((await new PageBrowser(iam, ada.cookie).get(`/sign-in?next=${encodeURIComponent(back)}`)).location).toBe(back);
      for (const next of ["http://localhost:4300/", "http://user:pw@localhost:4200/", "https://localhost:4200/", "http://localhost:4200/\\evil"]) {
        const stranger = new PageBrowser(iam);
        const fields = { ...hiddenFields((await stranger.get("/sign-in")).html, "/sign-in"), email: ada.email, password: PASSWORD, next };
        expect((await stranger.post("/sign-in", fields)).location, next).toBe("/");
      }
    });

    it("emails a link that signs in and goes back to billing's page through the sign-in page", async () => {
      const back = "http://localhost:4200/portal/open?platformId=plt_1";
      const ada = await signUp(iam);
      const browser = new PageBrowser(iam);
      await browser.submit(`/sign-in?next=${encodeURIComponent(back)}`, "/sign-in/magic-link", { email: ada.email });
      const mail = iam.mailer.sent.findLast((m) => m.to === ada.email)!;
      const link = new URL(mail.text.match(/https?:\/\/\S+/)![0]);
      const verified = await browser.get(link.pathname + link.search);
      expect(verified.status).toBe(302);
      const landing = new URL(verified.location!, iam.config.iamUrl);
      expect(landing.pathname + landing.search).toBe(`/sign-in?next=${encodeURIComponent(back)}`);
      expect((await browser.get(landing.pathname + landing.search)).location).toBe(back);
    });

    it("emails a link that signs in and lands on next", async () => {
      const ada = await signUp(iam);
      const browser = new PageBrowser(iam);
      const r = await browser.submit("/sign-in?next=%2Fdevice", "/sign-in/magic-link", { email: ada.email });
      expect(r.status).toBe(200);
      expect(r.html).toContain("<h1>Check your email</h1>");
      expect(textOf(r.html)).toContain(`We sent a sign-in link to ${ada.email}.`);
      const mail = iam.mailer.sent.findLast((m) => m.to === ada.email)!;
      const link = new URL(mail.text.match(/https?:\/\/\S+/)![0]);
      const verified = await browser.get(link.pathname + link.search);
      expect(verified.status).toBe(302);
      expect(new URL(verified.location!, iam.config.iamUrl).pathname).toBe("/device");
      expect(await sessionWorks(browser)).toBe(true);
    });

    it("brings a used link back to the sign-in page with a clear message", async () => {
      const ada = await signUp(iam);
      const browser = new PageBrowser(iam);
      await browser.submit("/sign-in", "/sign-in/magic-link", { email: ada.email });
      const link = new URL(iam.mailer.sent.findLast((m) => m.to === ada.email)!.text.match(/https?:\/\/\S+/)![0]);
      await new PageBrowser(iam).get(link.pathname + link.search);
      const again = await browser.get(link.pathname + link.search);
      expect(again.status).toBe(302);
      const landing = new URL(again.location!, iam.config.iamUrl);
      expect(landing.pathname).toBe("/sign-in");
      const page = await browser.get(landing.pathname + landing.search);
      expect(page.status).toBe(200);
      expect(textOf(page.html)).toContain("That sign-in link is invalid, used or expired.");
    });

    it("shows the library's refusal of a malformed address on the page, not JSON", async () => {
      const r = await new PageBrowser(iam).submit("/sign-in", "/sign-in/magic-link", { email: "not-an-email" });
      expect(r.status).toBe(400);
      expect(r.headers.get("content-type")).toMatch(/^text\/html/);
      expect(r.html).toMatch(/<div class="alert error" id="link-error" role="alert">[^<]+<\/div>/);
    });
  });

  describe("sign-up", () => {
    it("shows name, email and a new password with its rule", async () => {
      const page = await new PageBrowser(iam).get("/sign-up");
      expect(page.status).toBe(200);
      expect(page.html).toContain("<h1>Create your account</h1>");
      expect(page.html).toMatch(/<input id="field-name" name="name" type="text" autocomplete="name"/);
      expect(page.html).toMatch(/<input id="field-password" name="password" type="password" autocomplete="new-password" required="" minlength="8"/);
      expect(page.html).toContain("At least 8 characters.");
    });

    it("creates the account, signs in and goes on to set up an organization", async () => {
      const browser = new PageBrowser(iam);
      const email = uniqueEmail("page");
      const r = await browser.submit("/sign-up", "/sign-up", { name: "Ada Page", email, password: PASSWORD });
      expect(r.status).toBe(303);
      expect(r.location).toBe("/onboarding");
      const account = await browser.get("/account");
      expect(account.status).toBe(200);
      expect(account.html).toContain(`<dd>${email} <span class="badge warn">not confirmed</span></dd>`);
      expect(account.html).toContain('value="Ada Page"');
    });

    it("goes to next after signing up when there is one", async () => {
      const r = await new PageBrowser(iam).submit("/sign-up?next=%2Fdevice%3Fuser_code%3DBCDF-GHJK", "/sign-up", { name: "N", email: uniqueEmail(), password: PASSWORD });
      expect(r.status).toBe(303);
      expect(r.location).toBe("/device?user_code=BCDF-GHJK");
    });

    it("says the email is taken (the library's 422) and signs nobody in", async () => {
      const ada = await signUp(iam);
      const r = await new PageBrowser(iam).submit("/sign-up", "/sign-up", { name: "Ada", email: ada.email, password: PASSWORD });
      expect(r.status).toBe(422);
      expect(r.html).toContain("An account with this email already exists. Sign in instead.");
      expect(r.headers.getSetCookie().some((c) => c.startsWith(`${SESSION_COOKIE}=`))).toBe(false);
    });

    it.each([
      ["7 characters", "1234567", 400, "Use a password of at least 8 characters."],
      ["129 characters", "x".repeat(129), 400, "Use a password of at most 128 characters."],
    ])("refuses a password of %s with a message", async (_, password, status, message) => {
      const r = await new PageBrowser(iam).submit("/sign-up", "/sign-up", { name: "Ada", email: uniqueEmail(), password });
      expect(r.status).toBe(status);
      expect(r.html).toContain(message);
    });

    it("accepts a password of exactly 8 characters", async () => {
      const r = await new PageBrowser(iam).submit("/sign-up", "/sign-up", { name: "Ada", email: uniqueEmail(), password: "12345678" });
      expect(r.status).toBe(303);
    });

    it("refuses a sign-up form without the CSRF token", async () => {
      const browser = new PageBrowser(iam);
      await browser.get("/sign-up");
      const r = await browser.post("/sign-up", { name: "Ada", email: uniqueEmail(), password: PASSWORD });
      expect(r.status).toBe(403);
    });
  });

  describe("POST /sign-out", () => {
    it("ends the session, clears the cookie and says so on the sign-in page", async () => {
      const ada = await signUp(iam);
      const browser = new PageBrowser(iam, ada.cookie);
      const r = await browser.submit("/account", "/sign-out", {});
      expect(r.status).toBe(303);
      expect(r.location).toBe("/sign-in?signed_out=1");
      expect(browser.cookies.has(SESSION_COOKIE)).toBe(false);
      expect((await call(iam, "GET", "/api/core/session", { token: ada.token })).status).toBe(401);
      expect(textOf((await browser.get(r.location!)).html)).toContain("You are signed out.");
    });

    it("refuses sign-out without the CSRF token, and the session goes on", async () => {
      const ada = await signUp(iam);
      const browser = new PageBrowser(iam, ada.cookie);
      const r = await browser.post("/sign-out", {});
      expect(r.status).toBe(403);
      expect((await call(iam, "GET", "/api/core/session", { token: ada.token })).status).toBe(200);
    });

    it("refuses another session's CSRF token", async () => {
      const ada = await signUp(iam);
      const bob = await signUp(iam);
      const bobsToken = hiddenFields((await new PageBrowser(iam, bob.cookie).get("/account")).html, "/sign-out").csrf!;
      const r = await new PageBrowser(iam, ada.cookie).post("/sign-out", { csrf: bobsToken });
      expect(r.status).toBe(403);
      expect((await call(iam, "GET", "/api/core/session", { token: ada.token })).status).toBe(200);
    });
  });
});

describe.each(testDatabases())("sign-in page limits on $name", ({ open }) => {
  let database: DatabaseHandle;

  beforeAll(async () => {
    database = await open();
  });
  afterAll(async () => {
    await database?.close();
  });

  it("says how long to wait once sign-in is rate limited (429 and Retry-After), as the library's route does", async () => {
    const iam = await createIam(database, { config: { rateLimits: { enabled: true, signIn: 2 } } });
    const ada = await signUp(iam);
    const browser = new PageBrowser(iam);
    for (let i = 0; i < 2; i++) expect((await browser.submit("/sign-in", "/sign-in", { email: ada.email, password: "wrong-password" })).status).toBe(401);
    const limited = await browser.submit("/sign-in", "/sign-in", { email: ada.email, password: PASSWORD });
    expect(limited.status).toBe(429);
    expect(limited.headers.get("content-type")).toMatch(/^text\/html/);
    const wait = Number(limited.html.match(/Too many attempts\. Wait (\d+) seconds, then try again\./)?.[1]);
    expect(wait).toBeGreaterThanOrEqual(1);
    expect(wait).toBeLessThanOrEqual(60);
    expect(limited.headers.get("retry-after")).toBe(String(wait));
    expect(limited.headers.getSetCookie().some((c) => c.startsWith(`${SESSION_COOKIE}=`))).toBe(false);
    // the page and the library's JSON route count together
    expect((await call(iam, "POST", "/api/auth/sign-in/email", { headers: { origin: iam.origin }, body: { email: ada.email, password: PASSWORD } })).status).toBe(429);
  });
});
