import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, createIam, operator, serviceToken, signIn, signUp, tenantOrg, type Iam } from "./support/harness.js";
import { hiddenFields, PageBrowser, textOf } from "./support/pages.js";

describe.each(testDatabases())("the /account page on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let service: string;
  let op: Awaited<ReturnType<typeof operator>>;

  beforeAll(async () => {
    database = await open();
    iam = await createIam(database);
    service = await serviceToken(iam);
    op = await operator(iam);
  });
  afterAll(async () => {
    await database?.close();
  });

  const sessionValid = async (token: string) => (await call(iam, "GET", "/api/core/session", { token })).status === 200;
  const keyValid = async (key: string) => (await call(iam, "POST", "/api/core/apikey/validate", { token: service, body: { key } })).body.valid as boolean;

  it("sends a signed-out visitor to sign in first", async () => {
    const r = await new PageBrowser(iam).get("/account");
    expect(r.status).toBe(302);
    expect(r.location).toBe("/sign-in?next=%2Faccount");
  });

  it("sends a visitor with a forged session cookie to sign in", async () => {
    const ada = await signUp(iam);
    const r = await new PageBrowser(iam, ada.cookie.replace(/=([^.]+)\./, "=$1x.")).get("/account");
    expect(r.status).toBe(302);
  });

  it("shows the profile, the sessions with this browser marked, and the key forms", async () => {
    const ada = await signUp(iam);
    await signIn(iam, ada);
    const page = await new PageBrowser(iam, ada.cookie).get("/account");
    expect(page.status).toBe(200);
    for (const heading of ["Profile", "Organizations", "Active sessions", "API keys"]) expect(page.html).toContain(`>${heading}</h2>`);
    expect(page.html).toContain(`<dd>${ada.email} <span class="badge warn">not confirmed</span></dd>`);
    expect(page.html.match(/action="\/account\/sessions\/revoke"/g)).toHaveLength(2);
    expect(page.html.match(/<span class="badge">This browser<\/span>/g)).toHaveLength(1);
    expect(textOf(page.html)).toContain("You have no API keys.");
    expect(textOf(page.html)).toContain("You are not in an organization yet.");
    for (const action of ["/account/profile", "/account/api-keys", "/sign-out"]) expect(hiddenFields(page.html, action).csrf).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it("lands a signed-in person on / : onboarding without an organization, the account page with one, sign-in when signed out", async () => {
    expect((await new PageBrowser(iam).get("/")).location).toBe("/sign-in");
    const ada = await signUp(iam);
    const browser = new PageBrowser(iam, ada.cookie);
    expect((await browser.get("/")).location).toBe("/onboarding");
    // the account page itself stays reachable, with the way to onboarding on it
    expect(textOf((await browser.get("/account")).html)).toContain("You are not in an organization yet. Set up an organization");
    await tenantOrg(iam, op, ada);
    expect((await browser.get("/")).location).toBe("/account");
  });

  it("shows each session's times to the minute, and signs out every other session at once", async () => {
    const ada = await signUp(iam);
    const others = [await signIn(iam, ada), await signIn(iam, ada)];
    const browser = new PageBrowser(iam, ada.cookie);
    const page = await browser.get("/account");
    expect(textOf(page.html)).toMatch(/since \d{4}-\d\d-\d\d \d\d:\d\d UTC · until \d{4}-\d\d-\d\d \d\d:\d\d UTC/);
    const r = await browser.post("/account/sessions/revoke-others", hiddenFields(page.html, "/account/sessions/revoke-others"));
    expect(r.status).toBe(303);
    expect(r.location).toBe("/account?revoked=others");
    for (const other of others) expect(await sessionValid(other.token)).toBe(false);
    expect(await sessionValid(ada.token)).toBe(true);
    const after = await browser.get(r.location!);
    expect(textOf(after.html)).toContain("Your other sessions are signed out, command-line logins included.");
    // nothing else to sign out: the button is gone
    expect(after.html).not.toContain('action="/account/sessions/revoke-others"');
  });

  describe("organizations", () => {
    it("lists every organization with the role in it, and switches this browser to another", async () => {
      const ada = await signUp(iam);
      const first = await tenantOrg(iam, op, ada);
      iam.clock.advance(1000);
      const second = await tenantOrg(iam, op, ada);
      const browser = new PageBrowser(iam, ada.cookie);
      const page = await browser.get("/account");
      const text = textOf(page.html);
      expect(text).toContain(`Tenant ${first.slug} ${first.slug} Active here owner`);
      expect(text).toContain(`Tenant ${second.slug} ${second.slug} owner`);
      expect(page.html.match(/action="\/account\/organization"/g)).toHaveLength(1);
      const r = await browser.post("/account/organization", hiddenFields(page.html, "/account/organization"));
      expect(r.status).toBe(303);
      expect(r.location).toBe(`/account?switched=${second.slug}#organizations`);
      expect((await call(iam, "GET", "/api/core/session", { token: ada.token })).body.principal.orgId).toBe(second.orgId);
      const after = textOf((await browser.get(r.location!)).html);
      expect(after).toContain(`You now act in Tenant ${second.slug} (${second.slug}) in this browser.`);
      expect(after).toContain(`Tenant ${second.slug} ${second.slug} Active here owner`);
    });

    it("refuses to switch into an organization the person is not in (404), staying where it was", async () => {
      const ada = await signUp(iam);
      const browser = new PageBrowser(iam, ada.cookie);
      const csrf = hiddenFields((await browser.get("/account")).html, "/account/profile").csrf!;
      const r = await browser.post("/account/organization", { csrf, slug: "core-operator" });
      expect(r.status).toBe(404);
      expect(textOf(r.html)).toContain("You are not a member of that organization.");
      expect((await call(iam, "GET", "/api/core/session", { token: ada.token })).body.principal.orgId).toBeNull();
    });
  });

  describe("profile", () => {
    it("saves a new name and says so", async () => {
      const ada = await signUp(iam);
      const browser = new PageBrowser(iam, ada.cookie);
      const r = await browser.submit("/account", "/account/profile", { name: "Ada Lovelace" });
      expect(r.status).toBe(303);
      expect(r.location).toBe("/account?saved=profile");
      const page = await browser.get(r.location!);
      expect(textOf(page.html)).toContain("Your name is saved.");
      expect((await call(iam, "GET", "/api/auth/profile", { token: ada.token })).body.name).toBe("Ada Lovelace");
    });

    it.each([
      ["an empty name", ""],
      ["a name of 101 characters", "n".repeat(101)],
    ])("refuses %s with 400 and a message on the field", async (_, name) => {
      const ada = await signUp(iam);
      const r = await new PageBrowser(iam, ada.cookie).submit("/account", "/account/profile", { name });
      expect(r.status).toBe(400);
      expect(r.html).toContain('<p class="field-error" id="field-name-error">Give a name of 1 to 100 characters.</p>');
      expect((await call(iam, "GET", "/api/auth/profile", { token: ada.token })).body.name).toBe(ada.email.split("@")[0]);
    });

    it("accepts a name of exactly 100 characters", async () => {
      const ada = await signUp(iam);
      expect((await new PageBrowser(iam, ada.cookie).submit("/account", "/account/profile", { name: "n".repeat(100) })).status).toBe(303);
    });
  });

  describe("sessions", () => {
    it("revokes another session: it stops working at once", async () => {
      const ada = await signUp(iam);
      const other = await signIn(iam, ada);
      const otherId = (await call(iam, "GET", "/api/sessions", { token: other.token })).body.data.find((s: { current: boolean }) => s.current).id;
      const browser = new PageBrowser(iam, ada.cookie);
      const page = await browser.get("/account");
      const r = await browser.post("/account/sessions/revoke", { csrf: hiddenFields(page.html, "/account/profile").csrf!, id: otherId });
      expect(r.status).toBe(303);
      expect(r.location).toBe("/account?revoked=session");
      expect(await sessionValid(other.token)).toBe(false);
      expect(await sessionValid(ada.token)).toBe(true);
    });

    it("revoking this browser's own session signs it out", async () => {
      const ada = await signUp(iam);
      const browser = new PageBrowser(iam, ada.cookie);
      const page = await browser.get("/account");
      const own = page.html.match(/<span class="badge">This browser<\/span>[\s\S]*?<form method="post" action="\/account\/sessions\/revoke">[\s\S]*?<\/form>/)![0];
      const fields = hiddenFields(own, "/account/sessions/revoke");
      const r = await browser.post("/account/sessions/revoke", fields);
      expect(r.status).toBe(303);
      expect(r.location).toBe("/sign-in?signed_out=1");
      expect(browser.cookies.has("better-auth.session_token")).toBe(false);
      expect(await sessionValid(ada.token)).toBe(false);
    });

    it("refuses to revoke someone else's session with 404, and it keeps working", async () => {
      const ada = await signUp(iam);
      const bob = await signUp(iam);
      const bobsId = (await call(iam, "GET", "/api/sessions", { token: bob.token })).body.data[0].id;
      const browser = new PageBrowser(iam, ada.cookie);
      const csrf = hiddenFields((await browser.get("/account")).html, "/account/profile").csrf!;
      const r = await browser.post("/account/sessions/revoke", { csrf, id: bobsId });
      expect(r.status).toBe(404);
      expect(textOf(r.html)).toContain("That session is not one of yours, or it has ended already.");
      expect(await sessionValid(bob.token)).toBe(true);
    });
  });

  describe("API keys", () => {
    it("creates a key shown once that works at once, lists it without the key, and revokes it", async () => {
      const ada = await signUp(iam);
      const browser = new PageBrowser(iam, ada.cookie);
      const posted = await browser.submit("/account", "/account/api-keys", { name: "deploy job", lifetime: "30" });
      // POST/redirect/GET: the page that shows the key is a GET, so a reload makes no second key
      expect(posted.status).toBe(303);
      expect(posted.location).toBe("/account#keys-heading");
      expect(posted.html).not.toMatch(/core_/);
      const created = await browser.get("/account");
      const key = created.html.match(/<code class="secret" id="new-api-key">([^<]+)<\/code>/)![1]!;
      expect(key).toMatch(/^core_/);
      expect(textOf(created.html)).toContain("Copy it now: it is shown only this once, and a reload will not show it again.");
      // at the top of the page, before the profile
      expect(created.html.indexOf("new-api-key")).toBeLessThan(created.html.indexOf("profile-heading"));
      expect(await keyValid(key)).toBe(true);

      const listed = await browser.get("/account");
      expect(listed.html).not.toContain(key);
      const text = textOf(listed.html);
      expect(text).toContain(`deploy job ${key.slice(0, 6)}…`);
      const expires = new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 10);
      expect(text).toContain(`expires ${expires}`);

      const revoked = await browser.post("/account/api-keys/revoke", hiddenFields(listed.html, "/account/api-keys/revoke"));
      expect(revoked.status).toBe(303);
      expect(revoked.location).toBe("/account?revoked=key");
      expect(await keyValid(key)).toBe(false);
      expect(textOf((await browser.get(revoked.location!)).html)).toContain("You have no API keys.");
    });

    it("creates a key that never expires when asked", async () => {
      const ada = await signUp(iam);
      const browser = new PageBrowser(iam, ada.cookie);
      expect((await browser.submit("/account", "/account/api-keys", { name: "forever", lifetime: "never" })).status).toBe(303);
      expect(textOf((await browser.get("/account")).html)).toContain("never expires");
    });

    it.each([
      ["without a name", { name: "", lifetime: "30" }],
      ["with a name of 101 characters", { name: "k".repeat(101), lifetime: "30" }],
      ["with a lifetime not offered", { name: "ci", lifetime: "3650" }],
    ])("refuses a key %s with 400 and a message, creating none", async (_, fields) => {
      const ada = await signUp(iam);
      const r = await new PageBrowser(iam, ada.cookie).submit("/account", "/account/api-keys", fields);
      expect(r.status).toBe(400);
      expect(textOf(r.html)).toContain("Give the key a name of 1 to 100 characters and choose when it expires.");
      expect((await call(iam, "GET", "/api/auth/api-key/list", { token: ada.token })).body.apiKeys).toEqual([]);
    });

    it("shows a new key once: a reload shows the list with one key and no secret", async () => {
      const ada = await signUp(iam);
      const browser = new PageBrowser(iam, ada.cookie);
      await browser.submit("/account", "/account/api-keys", { name: "once", lifetime: "30" });
      expect((await browser.get("/account")).html).toContain('id="new-api-key"');
      const reloaded = await browser.get("/account");
      expect(reloaded.html).not.toContain('id="new-api-key"');
      expect(reloaded.html).not.toMatch(/core_[A-Za-z0-9]{10}/);
      expect((await call(iam, "GET", "/api/auth/api-key/list", { token: ada.token })).body.apiKeys).toHaveLength(1);
    });

    it("carries the new key sealed: the cookie holds no key, and an edited or foreign one shows nothing", async () => {
      const ada = await signUp(iam);
      const browser = new PageBrowser(iam, ada.cookie);
      await browser.submit("/account", "/account/api-keys", { name: "sealed", lifetime: "30" });
      const sealed = browser.cookies.get("core-created-key")!;
      expect(sealed).toMatch(/^[A-Za-z0-9_-]+$/);
      expect(sealed).not.toContain("core_");
      const edited = sealed.slice(0, -2) + (sealed.endsWith("A") ? "BB" : "AA");
      browser.cookies.set("core-created-key", edited);
      const page = await browser.get("/account");
      expect(page.status).toBe(200);
      expect(page.html).not.toContain('id="new-api-key"');
      // bound to the session that made the key: another session, even the same person's, is shown nothing
      await browser.submit("/account", "/account/api-keys", { name: "sealed again", lifetime: "30" });
      const intact = browser.cookies.get("core-created-key")!;
      const bob = await signUp(iam);
      const other = new PageBrowser(iam, bob.cookie);
      other.cookies.set("core-created-key", intact);
      expect((await other.get("/account")).html).not.toContain('id="new-api-key"');
      const adaElsewhere = new PageBrowser(iam, (await signIn(iam, ada)).cookie);
      adaElsewhere.cookies.set("core-created-key", intact);
      expect((await adaElsewhere.get("/account")).html).not.toContain('id="new-api-key"');
      expect((await browser.get("/account")).html).toContain('id="new-api-key"');
    });

    it("refuses to revoke someone else's key with 404, and it keeps working", async () => {
      const ada = await signUp(iam);
      const bob = await signUp(iam);
      const bobsKey = await call(iam, "POST", "/api/auth/api-key/create", { token: bob.token, headers: { origin: iam.origin }, body: { name: "bob" } });
      const browser = new PageBrowser(iam, ada.cookie);
      const csrf = hiddenFields((await browser.get("/account")).html, "/account/profile").csrf!;
      const r = await browser.post("/account/api-keys/revoke", { csrf, id: bobsKey.body.id });
      expect(r.status).toBe(404);
      expect(textOf(r.html)).toContain("That key is not one of yours, or it is revoked already.");
      expect(await keyValid(bobsKey.body.key)).toBe(true);
    });
  });

  it.each([
    ["/account/profile", { name: "Mallory" }],
    ["/account/sessions/revoke", { id: "x" }],
    ["/account/api-keys", { name: "stolen", lifetime: "30" }],
    ["/account/api-keys/revoke", { id: "x" }],
  ])("refuses %s without the CSRF token (403 page), changing nothing", async (action, fields) => {
    const ada = await signUp(iam);
    const r = await new PageBrowser(iam, ada.cookie).post(action, fields);
    expect(r.status).toBe(403);
    expect(r.headers.get("content-type")).toMatch(/^text\/html/);
    expect((await call(iam, "GET", "/api/auth/profile", { token: ada.token })).body.name).toBe(ada.email.split("@")[0]);
    expect((await call(iam, "GET", "/api/auth/api-key/list", { token: ada.token })).body.apiKeys).toEqual([]);
    expect(await sessionValid(ada.token)).toBe(true);
  });

  it("refuses an account form posted from another origin, even with the right token", async () => {
    const ada = await signUp(iam);
    const browser = new PageBrowser(iam, ada.cookie);
    const fields = hiddenFields((await browser.get("/account")).html, "/account/api-keys");
    const r = await browser.post("/account/api-keys", { ...fields, name: "stolen", lifetime: "30" }, { origin: "https://evil.example" });
    expect(r.status).toBe(403);
    expect((await call(iam, "GET", "/api/auth/api-key/list", { token: ada.token })).body.apiKeys).toEqual([]);
  });
});
