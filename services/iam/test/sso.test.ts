import { eq, like } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { member, orgPolicies, rateLimit, session, ssoProvider, user } from "../src/db/schema.js";
import { call, createIam, joinOrg, operator, signUp, uniqueEmail, uniqueSlug, type Iam, type Operator, type SignedUp } from "./support/harness.js";
import { startIdp, type Idp } from "./support/oidc-idp.js";
import { hiddenFields, PageBrowser, textOf } from "./support/pages.js";
import { approveProvider, callbackOf, localPath, orgWithOwner as newOrg, providerBody as bodyFor, registerProvider, SSO_IAM_URL as IAM_URL, startAt } from "./support/sso.js";

/** The operator's list of provider origins (CORE_SSO_PROVIDER_ORIGINS), with providers on loopback allowed as the tests' are. */
const listing = (...origins: string[]) => ({ origins, allowPrivate: true, timeoutMs: 5000 });

/**
 * Single sign-on per organization (issue 28, ADR 0026) against a real OpenID Connect provider
 * (`oidc-provider`) in this process: owners register it, operators approve its domains, people
 * sign in through it and join the organization; each refusal of the callback is a clear page. The
 * operator lists the provider's origin here (CORE_SSO_PROVIDER_ORIGINS); providers no operator
 * listed are sso-provider-addresses.test.ts.
 */
describe.each(testDatabases())("single sign-on per organization on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let idp: Idp;
  let ops: Operator;
  // organizations with a slug chosen here: the provider's redirect URIs name them
  const slugs = { main: uniqueSlug("acme"), other: uniqueSlug("rival"), down: uniqueSlug("down"), pages: uniqueSlug("pages") };

  beforeAll(async () => {
    database = await open();
    idp = await startIdp({ redirectUris: Object.values(slugs).map(callbackOf) });
    iam = await createIam(database, { config: { iamUrl: IAM_URL, ssoProviders: listing(idp.origin), rateLimits: { enabled: true, ssoStart: 1000, signUp: 1000, signIn: 1000 } } });
    ops = await operator(iam);
  });
  afterAll(async () => {
    await idp?.close();
    await database?.close();
  });

  const orgWithOwner = (slug: string) => newOrg(iam, ops, slug);
  const register = (orgId: string, by: SignedUp, body: Record<string, unknown>) => registerProvider(iam, orgId, by, body);
  const providerBody = (domains: string[], extra: Record<string, unknown> = {}) => bodyFor(idp, domains, extra);
  const approve = (providerId: string) => approveProvider(iam, ops, providerId);
  const start = (browser: PageBrowser, slug: string, next = "/account") => startAt(browser, idp, slug, next);
  const local = localPath;

  let main: Awaited<ReturnType<typeof orgWithOwner>>;
  const domain = `${slugs.main}.example`;

  it("an owner registers the organization's provider with two domains; the client secret is never answered, and nobody signs in before an operator approves", async () => {
    main = await orgWithOwner(slugs.main);
    const r = await register(main.orgId, main.owner, providerBody([domain, `Mail.${slugs.main}.example`], { defaultRole: "member" }));
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body).toEqual({
      providerId: `${slugs.main}-oidc`,
      organizationId: main.orgId,
      issuer: idp.issuer,
      clientId: idp.clientId,
      domains: [domain, `mail.${slugs.main}.example`],
      domainsApproved: false,
      defaultRole: "member",
      redirectUri: callbackOf(slugs.main),
    });
    expect(JSON.stringify(r.body)).not.toContain(idp.clientSecret);
    const listed = await call(iam, "GET", `/api/core/organizations/${main.orgId}/sso-providers`, { token: main.owner.token });
    expect(listed.status).toBe(200);
    expect(listed.body.data).toHaveLength(1);
    expect(JSON.stringify(listed.body)).not.toContain(idp.clientSecret);

    const audit = await call(iam, "GET", `/api/audit/events?action=sso.provider.create`, { token: ops.token });
    const event = (audit.body.data as { targetId: string; metadata: unknown }[]).find((e) => e.targetId === `${slugs.main}-oidc`);
    expect(event).toBeDefined();
    expect(JSON.stringify(audit.body)).not.toContain(idp.clientSecret);

    // not approved yet: the start is refused with a sentence, not sent to the provider
    const refused = await new PageBrowser(iam).get(`/sign-in/sso?organization=${slugs.main}`);
    expect(refused.status).toBe(400);
    expect(textOf(refused.html)).toContain("waiting for an operator's approval");

    expect((await approve(`${slugs.main}-oidc`)).body.domainsApproved).toBe(true);
  });

  it("refuses registration by an admin or member, a second provider, a domain another organization claims, and a provider outside the operator's list", async () => {
    const rival = await orgWithOwner(slugs.other);
    const member_ = await signUp(iam, uniqueEmail("member"));
    expect((await register(main.orgId, member_, providerBody([`x-${domain}`]))).status).toBe(403);
    expect((await register(main.orgId, main.owner, providerBody([`second-${domain}`]))).status).toBe(409);
    // the same domain, or one under it: another organization could otherwise take over its addresses
    for (const taken of [domain, `eu.${domain}`]) {
      const r = await register(rival.orgId, rival.owner, providerBody([taken]));
      expect(r.status).toBe(409);
      expect(r.body.error.code).toBe("SSO_DOMAIN_CLAIMED");
    }
    // two registrations that raced past that check (a row written directly here): approval refuses the overlap
    await database.db.insert(ssoProvider).values({ id: `race-${slugs.other}`, issuer: idp.issuer, providerId: `race-${slugs.other}`, organizationId: rival.orgId, domain: `eu.${domain}` });
    const raced = await approve(`race-${slugs.other}`);
    expect(raced.status).toBe(409);
    expect(raced.body.error.code).toBe("SSO_DOMAIN_CLAIMED");
    await database.db.delete(ssoProvider).where(eq(ssoProvider.providerId, `race-${slugs.other}`));
    const junk = await register(rival.orgId, rival.owner, providerBody(["not a domain"]));
    expect(junk.status).toBe(400);
    // an issuer outside the operator's list (CORE_SSO_PROVIDER_ORIGINS): IAM does not fetch it
    const unlisted = await register(rival.orgId, rival.owner, { ...providerBody([`${slugs.other}.example`]), issuer: "http://127.0.0.2:9/" });
    expect(unlisted.status).toBe(400);
    expect(unlisted.body.error.message).toContain("is not among the identity provider origins this service allows");
    expect(JSON.stringify(unlisted.body)).not.toContain(idp.clientSecret);
  });

  it("signs a person in through the provider on first sign-in: a user with a verified address, a member of the organization with the default role, back at next", async () => {
    const email = `ada@${domain}`;
    idp.addAccount("ada", { email, emailVerified: true, name: "Ada Lovelace" });
    const browser = new PageBrowser(iam);
    const authorization = await start(browser, slugs.main, "/account?from=sso");
    const back = await idp.authorize(authorization, "ada");
    const landed = await browser.get(local(back));
    expect(landed.status, landed.html).toBe(302);
    expect(landed.location).toBe("/account?from=sso");
    const account = await browser.get("/account");
    expect(account.status).toBe(200);
    expect(textOf(account.html)).toContain(email);

    const [created] = await database.db.select().from(user).where(eq(user.email, email));
    expect(created!.emailVerified).toBe(true);
    const memberships = await database.db.select().from(member).where(eq(member.userId, created!.id));
    expect(memberships.map((m) => [m.organizationId, m.role])).toEqual([[main.orgId, "member"]]);
    const audit = await call(iam, "GET", `/api/audit/events?action=auth.sso.sign_in`, { token: ops.token });
    expect(audit.body.data.some((e: { outcome: string; actorId: string }) => e.outcome === "success" && e.actorId === created!.id)).toBe(true);
  });

  it("a session made at the callback is an SSO session of that provider: it meets the organization's SSO policy, and a password session is sent to the provider", async () => {
    const email = `grace@${domain}`;
    idp.addAccount("grace", { email, emailVerified: true, name: "Grace Hopper" });
    const browser = new PageBrowser(iam);
    const landed = await browser.get(local(await idp.authorize(await start(browser, slugs.main), "grace")));
    expect(landed.status, landed.html).toBe(302);
    const [grace] = await database.db.select().from(user).where(eq(user.email, email));
    const sessions = await database.db.select({ method: session.signInMethod, provider: session.ssoProviderId }).from(session).where(eq(session.userId, grace!.id));
    expect(sessions).toEqual([{ method: "sso", provider: `${slugs.main}-oidc` }]);

    const withPassword = await joinOrg(iam, main.orgId, main.owner, "member");
    // the policy set directly: the owner's own password session would not meet it (the route refuses that, 409)
    await database.db.insert(orgPolicies).values({ orgId: main.orgId, requireSso: true, requireTwoFactor: false, updatedAt: new Date() });
    iam.app.ctx.forgetPrincipals();
    try {
      expect((await browser.get("/account")).status).toBe(200);
      const heldBack = await new PageBrowser(iam, withPassword.cookie).get("/account");
      expect(heldBack.status).toBe(302);
      expect(heldBack.location).toBe(`/sign-in/sso?organization=${slugs.main}&next=%2Faccount`);
      // where the policy sends it is the organization's SSO start, which goes to the provider
      await start(new PageBrowser(iam, withPassword.cookie), slugs.main);
    } finally {
      await database.db.delete(orgPolicies).where(eq(orgPolicies.orgId, main.orgId));
      iam.app.ctx.forgetPrincipals();
    }
  });

  it("refuses an address outside the organization's domains: no user, no session", async () => {
    idp.addAccount("mallory", { email: `mallory@${slugs.other}.example`, emailVerified: true, name: "Mallory" });
    const browser = new PageBrowser(iam);
    const back = await idp.authorize(await start(browser, slugs.main), "mallory");
    const landed = await browser.get(local(back));
    expect(landed.status).toBe(302);
    expect(new URL(landed.location!, IAM_URL).searchParams.get("error")).toBe("EMAIL_OUTSIDE_SSO_DOMAINS");
    const page = await browser.get(landed.location!);
    expect(page.status).toBe(400);
    expect(textOf(page.html)).toContain("outside the domains of the organization");
    expect(await database.db.select().from(user).where(eq(user.email, `mallory@${slugs.other}.example`))).toEqual([]);
    expect((await browser.get("/account")).status).toBe(302);
  });

  it("refuses an address the provider does not say is verified", async () => {
    const email = `unverified@${domain}`;
    idp.addAccount("unverified", { email, emailVerified: false, name: "Una" });
    const browser = new PageBrowser(iam);
    const landed = await browser.get(local(await idp.authorize(await start(browser, slugs.main), "unverified")));
    expect(new URL(landed.location!, IAM_URL).searchParams.get("error")).toBe("EMAIL_NOT_VERIFIED_BY_PROVIDER");
    const page = await browser.get(landed.location!);
    expect(textOf(page.html)).toContain("did not confirm that your address is verified");
    expect(await database.db.select().from(user).where(eq(user.email, email))).toEqual([]);
  });

  it("refuses a callback with a wrong state, or from another browser, with a page that says to start again", async () => {
    idp.addAccount("grace", { email: `grace@${domain}`, emailVerified: true, name: "Grace" });
    const browser = new PageBrowser(iam);
    const back = new URL(await idp.authorize(await start(browser, slugs.main), "grace"));
    back.searchParams.set("state", "forged-state-value");
    const forged = await browser.get(local(back.href));
    expect(forged.status).toBe(302);
    const error = new URL(forged.location!, IAM_URL);
    expect(error.pathname).toBe("/sign-in/sso");
    expect(error.searchParams.get("error")).toMatch(/state/);
    const page = await browser.get(error.pathname + error.search);
    expect(page.status).toBe(400);
    expect(textOf(page.html)).toContain("Start it again");

    // the real state, in a browser that did not start the sign-in (no state cookie)
    const other = new PageBrowser(iam);
    const back2 = await idp.authorize(await start(browser, slugs.main), "grace");
    const stolen = await other.get(local(back2));
    expect(stolen.status).toBe(302);
    expect(new URL(stolen.location!, IAM_URL).searchParams.get("error")).toMatch(/state/);
    expect((await other.get("/account")).status).toBe(302);
  });

  it("refuses an id token whose issuer is not the provider's registered issuer", async () => {
    // the registered issuer no longer matches what the provider signs into its id tokens (`iss`)
    await database.db.update(ssoProvider).set({ issuer: `${idp.issuer}/elsewhere` }).where(eq(ssoProvider.providerId, `${slugs.main}-oidc`));
    try {
      idp.addAccount("eve", { email: `eve@${domain}`, emailVerified: true, name: "Eve" });
      const browser = new PageBrowser(iam);
      const landed = await browser.get(local(await idp.authorize(await start(browser, slugs.main), "eve")));
      const error = new URL(landed.location!, IAM_URL);
      expect(error.searchParams.get("error")).toBe("invalid_provider");
      expect(error.searchParams.get("error_description")).toBe("token_not_verified");
      expect(await database.db.select().from(user).where(eq(user.email, `eve@${domain}`))).toEqual([]);
      const page = await browser.get(error.pathname + error.search);
      expect(page.status).toBe(502);
      expect(textOf(page.html)).toContain("could not be verified");
    } finally {
      await database.db.update(ssoProvider).set({ issuer: idp.issuer }).where(eq(ssoProvider.providerId, `${slugs.main}-oidc`));
    }
  });

  it("a provider that is down: a clear page, never a 500", async () => {
    const down = await orgWithOwner(slugs.down);
    const second = await startIdp({ redirectUris: [callbackOf(slugs.down)] });
    const downIam = iam;
    // the operator lists this provider's origin too: a second app on the same database
    const trusting = await createIam(database, { config: { iamUrl: IAM_URL, ssoProviders: listing(idp.origin, second.origin) } });
    try {
      const r = await call(trusting, "POST", `/api/core/organizations/${down.orgId}/sso-providers`, {
        token: down.owner.token,
        body: { issuer: second.issuer, clientId: second.clientId, clientSecret: second.clientSecret, domains: [`${slugs.down}.example`] },
      });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      expect((await approve(`${slugs.down}-oidc`)).status).toBe(200);
      second.addAccount("linus", { email: `linus@${slugs.down}.example`, emailVerified: true, name: "Linus" });
      const browser = new PageBrowser(trusting);
      const started = await browser.get(`/sign-in/sso?organization=${slugs.down}`);
      const back = await second.authorize(started.location!, "linus");
      await second.close();
      const landed = await browser.get(local(back));
      expect(landed.status).toBe(302);
      const error = new URL(landed.location!, IAM_URL);
      expect(error.searchParams.get("error")).toBe("invalid_provider");
      const page = await browser.get(error.pathname + error.search);
      expect(page.status).toBe(502);
      expect(textOf(page.html)).toContain("could not be reached");
      expect(downIam).toBe(iam);
    } finally {
      await second.close();
    }
  });

  it("finds the provider from a work address on the SSO page, and says so when none serves it", async () => {
    const browser = new PageBrowser(iam);
    const sent = await browser.submit("/sign-in/sso", "/sign-in/sso", { email: `ada@${domain}` });
    expect(sent.status, sent.html).toBe(302);
    expect(sent.location!.startsWith(`${idp.origin}/auth?`)).toBe(true);
    expect(new URL(sent.location!).searchParams.get("login_hint")).toBe(`ada@${domain}`);
    const none = await browser.submit("/sign-in/sso", "/sign-in/sso", { email: "someone@nowhere.example" });
    expect(none.status).toBe(404);
    expect(textOf(none.html)).toContain("No organization signs in addresses like this one");
    const unknown = await browser.get("/sign-in/sso?organization=no-such-org");
    expect(unknown.status).toBe(404);
    expect(textOf(unknown.html)).toContain("This organization has no single sign-on");
  });

  it("limits SSO starts per client address (the library's limiter, counted in the database)", async () => {
    const limited = await createIam(database, { config: { iamUrl: IAM_URL, ssoProviders: listing(idp.origin), rateLimits: { enabled: true, ssoStart: 2, windowSeconds: 3600 } } });
    // the starts of the tests before (one client address in-process) are forgotten
    await database.db.delete(rateLimit).where(like(rateLimit.key, "%/sign-in/sso%"));
    const browser = new PageBrowser(limited);
    const path = `/sign-in/sso?organization=${slugs.main}`;
    expect((await browser.get(path)).status).toBe(302);
    expect((await browser.get(path)).status).toBe(302);
    const third = await browser.get(path);
    expect(third.status).toBe(429);
    expect(Number(third.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(textOf(third.html)).toContain("Too many sign-in attempts");
  });

  it("an owner changes the domains (approval is withdrawn) and the secret, and removes the provider; each audited without the secret", async () => {
    const id = `${slugs.main}-oidc`;
    const changed = await call(iam, "PATCH", `/api/core/organizations/${main.orgId}/sso-providers/${id}`, {
      token: main.owner.token,
      body: { domains: [domain, `new-${domain}`], clientSecret: "a-new-secret-value-0123", defaultRole: "admin" },
    });
    expect(changed.status, JSON.stringify(changed.body)).toBe(200);
    expect(changed.body).toMatchObject({ domains: [domain, `new-${domain}`], domainsApproved: false, defaultRole: "admin" });
    const audit = await call(iam, "GET", `/api/audit/events?action=sso.provider.update`, { token: ops.token });
    expect(JSON.stringify(audit.body)).not.toContain("a-new-secret-value-0123");
    expect(audit.body.data[0].metadata).toMatchObject({ changed: ["clientSecret", "defaultRole", "domains"], approvalWithdrawn: true });

    const removed = await call(iam, "DELETE", `/api/core/organizations/${main.orgId}/sso-providers/${id}`, { token: main.owner.token });
    expect(removed.status).toBe(204);
    expect((await call(iam, "GET", `/api/core/organizations/${main.orgId}/sso-providers`, { token: main.owner.token })).body.data).toEqual([]);
    const deleted = await call(iam, "GET", `/api/audit/events?action=sso.provider.delete`, { token: ops.token });
    expect(deleted.body.data.some((e: { targetId: string }) => e.targetId === id)).toBe(true);
  });

  it("the library's own SSO configuration routes are not served: owners go through IAM's", async () => {
    for (const path of ["/api/auth/sso/register", "/api/auth/sso/update-provider", "/api/auth/sso/delete-provider", "/api/auth/sso/verify-domain"]) {
      const r = await call(iam, "POST", path, { token: main.owner.token, headers: { origin: iam.origin }, body: { providerId: "x" } });
      expect(r.status, path).toBe(404);
    }
  });

  it("the owners' page registers a provider, and shows no secret", async () => {
    const org = await orgWithOwner(slugs.pages);
    const browser = new PageBrowser(iam, org.owner.cookie);
    const account = await browser.get("/account");
    expect(account.html).toContain('href="/account/sso"');
    const shown = await browser.get("/account/sso");
    expect(shown.status).toBe(200);
    expect(shown.html).toContain("<h1>Single sign-on</h1>");
    const done = await browser.post("/account/sso", {
      ...hiddenFields(shown.html, "/account/sso"),
      orgId: org.orgId,
      issuer: idp.issuer,
      clientId: idp.clientId,
      clientSecret: idp.clientSecret,
      domains: `${slugs.pages}.example, ${slugs.pages}.example.org`,
      defaultRole: "member",
    });
    expect(done.status, done.html).toBe(303);
    const after = await browser.get(done.location!);
    expect(textOf(after.html)).toContain("Provider registered");
    expect(textOf(after.html)).toContain(`${slugs.pages}.example, ${slugs.pages}.example.org`);
    expect(after.html).not.toContain(idp.clientSecret);
    // a taken domain is a sentence on the page
    const again = await browser.post("/account/sso/update", {
      ...hiddenFields(after.html, "/account/sso/update"),
      orgId: org.orgId,
      providerId: `${slugs.pages}-oidc`,
      clientId: idp.clientId,
      domains: `${slugs.down}.example`,
      defaultRole: "member",
    });
    expect(again.status).toBe(409);
    expect(textOf(again.html)).toContain("already claims");
  });
});

describe("the library's log of a refused SSO callback", () => {
  it("a state it did not issue is the client's doing: logged at info in our words, not as an error", async () => {
    const { libraryLogLine } = await import("../src/library-log.js");
    expect(libraryLogLine("error", "Failed to parse state", [new Error("State mismatch: verification not found")])).toEqual({
      level: "info",
      message: "the auth library refused a sign-in callback whose state it did not give this browser",
    });
  });
});

describe("single sign-on configuration", () => {
  it("reads CORE_SSO_PROVIDER_ORIGINS as origins and CORE_IAM_SSO_ALLOW_PRIVATE as 1 or 0 (on by default on the embedded database only), refuses anything else, and CORE_RATE_LIMIT_SSO_START", async () => {
    const { mkdtempSync, rmSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const { join } = await import("node:path");
    const { ConfigError, loadCommonConfig } = await import("@core/kit");
    const { loadIamConfig } = await import("../src/config.js");
    const dataDir = mkdtempSync(join(tmpdir(), "core-iam-sso-config-"));
    try {
      const load = (env: NodeJS.ProcessEnv) => loadIamConfig(loadCommonConfig({ CORE_DATA_DIR: dataDir, ...env }), { CORE_DATA_DIR: dataDir, ...env });
      const onPostgres = { DATABASE_URL: "postgres://core@127.0.0.1:5432/core" };
      expect(load({}).ssoProviders).toEqual({ origins: null, allowPrivate: true, timeoutMs: 10_000 });
      expect(load(onPostgres).ssoProviders.allowPrivate).toBe(false);
      expect(load({ ...onPostgres, CORE_IAM_SSO_ALLOW_PRIVATE: "1" }).ssoProviders.allowPrivate).toBe(true);
      expect(load({ CORE_IAM_SSO_ALLOW_PRIVATE: "0" }).ssoProviders.allowPrivate).toBe(false);
      expect(load({}).rateLimits.ssoStart).toBe(10);
      const set = load({ CORE_SSO_PROVIDER_ORIGINS: "https://login.acme.example, http://localhost:8080/", CORE_RATE_LIMIT_SSO_START: "3" });
      expect(set.ssoProviders.origins).toEqual(["https://login.acme.example", "http://localhost:8080"]);
      expect(set.rateLimits.ssoStart).toBe(3);
      // the providers are never the library's trusted origins, listed or not
      expect(set.trustedOrigins).not.toContain("https://login.acme.example");
      expect(load({ ...onPostgres, CORE_SSO_PROVIDER_ORIGINS: "https://login.acme.example" }).ssoProviders.origins).toEqual(["https://login.acme.example"]);
      const refused: [NodeJS.ProcessEnv, string][] = [
        [{ CORE_SSO_PROVIDER_ORIGINS: "login.acme.example" }, "must list origins"],
        [{ CORE_SSO_PROVIDER_ORIGINS: "https://login.acme.example/realms/acme" }, "must list origins"],
        [{ CORE_SSO_PROVIDER_ORIGINS: "ftp://x.example" }, "must list origins"],
        [{ CORE_IAM_SSO_ALLOW_PRIVATE: "yes" }, "CORE_IAM_SSO_ALLOW_PRIVATE must be 1, 0 or unset"],
        // listed origins that could never be used without the setting
        [{ ...onPostgres, CORE_SSO_PROVIDER_ORIGINS: "http://login.acme.example" }, "need CORE_IAM_SSO_ALLOW_PRIVATE=1"],
        [{ CORE_IAM_SSO_ALLOW_PRIVATE: "0", CORE_SSO_PROVIDER_ORIGINS: "https://10.1.2.3" }, "need CORE_IAM_SSO_ALLOW_PRIVATE=1"],
        [{ CORE_IAM_SSO_ALLOW_PRIVATE: "0", CORE_SSO_PROVIDER_ORIGINS: "https://localhost:8443" }, "need CORE_IAM_SSO_ALLOW_PRIVATE=1"],
      ];
      for (const [env, message] of refused) {
        expect(() => load(env), JSON.stringify(env)).toThrow(ConfigError);
        expect(() => load(env), JSON.stringify(env)).toThrow(message);
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
