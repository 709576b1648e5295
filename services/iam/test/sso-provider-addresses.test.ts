import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { auditEvents, member, ssoProvider, user } from "../src/db/schema.js";
import type { SsoProviderConfig } from "../src/config.js";
import { call, createIam, operator, signIn, signUp, uniqueEmail, uniqueSlug, type Iam, type Operator } from "./support/harness.js";
import { certificateFor, startIdp, type Idp } from "./support/oidc-idp.js";
import { hiddenFields, PageBrowser, textOf } from "./support/pages.js";
import { approveProvider, callbackOf, orgWithOwner, providerBody, registerProvider, signInThrough, SSO_IAM_URL } from "./support/sso.js";

/**
 * A resolver the SSRF guard asks instead of DNS (its public `resolve` option): each name gives its
 * answers in turn, the last one from then on; "none" is a name without an address. Nothing here
 * reaches a real host: a public answer is only ever followed by one of those.
 */
function testResolver() {
  const answers = new Map<string, (string[] | "none")[]>();
  const lookups: string[] = [];
  return {
    lookups,
    answer: (name: string, ...turns: (string[] | "none")[]) => void answers.set(name, turns),
    resolve: async (hostname: string): Promise<string[]> => {
      lookups.push(hostname);
      const turns = answers.get(hostname) ?? ["none"];
      const turn = turns[Math.min(lookups.filter((h) => h === hostname).length, turns.length) - 1]!;
      if (turn === "none") throw Object.assign(new Error(`${hostname} has no address`), { code: "ENOTFOUND" });
      return turn;
    },
  };
}

/** A server of one discovery document (and nothing else), to register providers whose endpoints are elsewhere. */
async function discoveryServer(document: (origin: string) => Record<string, unknown>) {
  const server: Server = createServer((req, res) => {
    if (req.url !== "/.well-known/openid-configuration") return void res.writeHead(404).end();
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(document(origin)));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { origin, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/**
 * Single sign-on to the identity provider an organization brings (ADR 0026, amended in issue 35):
 * any https origin whose name resolves to a public address, every connection through the webhooks'
 * connect-time SSRF guard; `CORE_SSO_PROVIDER_ORIGINS` narrows that; http, loopback and private
 * addresses only with `CORE_IAM_SSO_ALLOW_PRIVATE=1`. Against real OpenID Connect providers
 * (`oidc-provider`) on 127.0.0.1, one over http and one over https under a name only the tests'
 * resolver knows.
 */
describe.each(testDatabases())("identity providers an organization brings itself, on $name", ({ open }) => {
  let database: DatabaseHandle;
  let ops: Operator;
  const resolver = testResolver();
  const slugs = { own: uniqueSlug("own"), strict: uniqueSlug("strict"), named: uniqueSlug("named"), listed: uniqueSlug("listed"), trusted: uniqueSlug("trusted") };
  const namedHost = `idp.${slugs.named}.example`;
  let idp: Idp;
  let named: Idp;
  let ca: string;
  /** CORE_IAM_SSO_ALLOW_PRIVATE=1 and no CORE_SSO_PROVIDER_ORIGINS: the embedded database's default */
  let lenient: Iam;
  /** the default with PostgreSQL: https providers at public addresses only */
  let strict: Iam;
  const rules = (allowPrivate: boolean, origins: string[] | null = null): SsoProviderConfig => ({ origins, allowPrivate, timeoutMs: 5000, resolve: resolver.resolve, ca });

  beforeAll(async () => {
    database = await open();
    idp = await startIdp({ redirectUris: [slugs.own, slugs.strict, slugs.listed, slugs.trusted].map(callbackOf) });
    const tls = certificateFor(namedHost);
    ca = tls.cert;
    named = await startIdp({ redirectUris: [callbackOf(slugs.named)], tls, hostname: namedHost });
    resolver.answer(namedHost, ["127.0.0.1"]);
    lenient = await createIam(database, { config: { iamUrl: SSO_IAM_URL, ssoProviders: rules(true) } });
    strict = await createIam(database, { config: { iamUrl: SSO_IAM_URL, ssoProviders: rules(false) } });
    ops = await operator(lenient);
  });
  afterAll(async () => {
    await idp?.close();
    await named?.close();
    await database?.close();
  });

  /** How often a provider was asked for its discovery document. */
  const discoveries = (of: Idp) => of.requests.filter((line) => line === "GET /.well-known/openid-configuration").length;

  /** The failed registrations audited for the organization. */
  const refusedRegistrations = async (orgId: string) =>
    (await database.db.select().from(auditEvents).where(eq(auditEvents.orgId, orgId))).filter((e) => e.action === "sso.provider.create" && e.outcome === "failure");

  it("an owner registers the organization's own provider at an origin no operator listed, and its people sign in through it", async () => {
    const org = await orgWithOwner(lenient, ops, slugs.own);
    const r = await registerProvider(lenient, org.orgId, org.owner, providerBody(idp, [`${slugs.own}.example`]));
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body).toMatchObject({ providerId: `${slugs.own}-oidc`, issuer: idp.issuer, domainsApproved: false });
    // the endpoints IAM read from the discovery document are stored for the plugin
    const [row] = await database.db.select().from(ssoProvider).where(eq(ssoProvider.providerId, `${slugs.own}-oidc`));
    expect(JSON.parse(row!.oidcConfig!)).toMatchObject({ tokenEndpoint: `${idp.origin}/token`, jwksEndpoint: `${idp.origin}/jwks`, authorizationEndpoint: `${idp.origin}/auth` });
    expect((await approveProvider(lenient, ops, `${slugs.own}-oidc`)).status).toBe(200);

    const email = `ada@${slugs.own}.example`;
    idp.addAccount("ada-own", { email, emailVerified: true, name: "Ada" });
    const { landed } = await signInThrough(lenient, idp, slugs.own, "ada-own", "/account?from=own");
    expect(landed.status, landed.html).toBe(302);
    expect(landed.location).toBe("/account?from=own");
    const [person] = await database.db.select().from(user).where(eq(user.email, email));
    expect((await database.db.select().from(member).where(eq(member.userId, person!.id))).map((m) => m.organizationId)).toEqual([org.orgId]);
  });

  it("without CORE_IAM_SSO_ALLOW_PRIVATE, registration refuses http, a loopback or private address, and a name that resolves to one, with a 400 naming why and not the address", async () => {
    const org = await orgWithOwner(strict, ops, slugs.strict);
    const fetched = discoveries(idp);
    resolver.answer(`inside.${slugs.strict}.example`, ["10.0.0.7"]);
    resolver.answer(`mixed.${slugs.strict}.example`, ["203.0.113.9", "169.254.169.254"]);
    const cases: [string, string][] = [
      [idp.issuer, `must be an https address; ${idp.origin} is not`],
      [`https://127.0.0.1:${idp.port}`, "127.0.0.1 is a loopback or private address"],
      [`https://[::ffff:127.0.0.1]:${idp.port}`, "is a loopback or private address"],
      [`https://localhost:${idp.port}`, "localhost is a loopback or private address"],
      [`https://inside.${slugs.strict}.example`, `inside.${slugs.strict}.example resolves to a loopback or private address`],
      [`https://mixed.${slugs.strict}.example`, `mixed.${slugs.strict}.example resolves to a loopback or private address`],
    ];
    for (const [issuer, why] of cases) {
      const r = await registerProvider(strict, org.orgId, org.owner, { ...providerBody(idp, [`${slugs.strict}.example`]), issuer });
      expect(r.status, issuer).toBe(400);
      expect(r.body.error.code).toBe("VALIDATION_ERROR");
      expect(r.body.error.message, issuer).toContain(why);
      expect(r.body.error.message).toContain("CORE_IAM_SSO_ALLOW_PRIVATE");
      for (const resolved of ["10.0.0.7", "169.254.169.254"]) expect(JSON.stringify(r.body)).not.toContain(resolved);
    }
    // nothing was fetched from the provider, nothing stored, and each refusal audited without the address
    expect(discoveries(idp)).toBe(fetched);
    expect(await database.db.select().from(ssoProvider).where(eq(ssoProvider.organizationId, org.orgId))).toEqual([]);
    const audited = await refusedRegistrations(org.orgId);
    expect(audited).toHaveLength(cases.length);
    expect(JSON.stringify(audited)).not.toContain("10.0.0.7");

    // the owner's page says the same sentence next to the organization
    const page = new PageBrowser(strict, org.owner.cookie);
    const shown = await page.get("/account/sso");
    const refused = await page.post("/account/sso", { ...hiddenFields(shown.html, "/account/sso"), orgId: org.orgId, issuer: `https://inside.${slugs.strict}.example`, clientId: "c", clientSecret: "s", domains: `${slugs.strict}.example`, defaultRole: "member" });
    expect(refused.status).toBe(400);
    expect(textOf(refused.html)).toContain("resolves to a loopback or private address");
    expect(refused.html).not.toContain("10.0.0.7");
  });

  it("a public https origin passes without any list: IAM goes on to connect to it (where a private answer is refused instead)", async () => {
    const org = await orgWithOwner(strict, ops, uniqueSlug("public"));
    // the check of the name sees a public address; the connection's own lookup then finds none, so
    // nothing is contacted, and the answer is that the provider could not be reached, not a refusal
    const host = `login.${org.slug}.example`;
    resolver.answer(host, ["203.0.113.10"], "none");
    const r = await registerProvider(strict, org.orgId, org.owner, { ...providerBody(idp, [`${org.slug}.example`]), issuer: `https://${host}` });
    expect(r.status, JSON.stringify(r.body)).toBe(502);
    expect(r.body.error).toMatchObject({ code: "UPSTREAM_UNAVAILABLE", message: "The identity provider could not be reached (ENOTFOUND)" });
    expect(resolver.lookups.filter((h) => h === host)).toHaveLength(2);

    // the same public answer for a name whose connection is refused: a loopback answer at connect time
    const rebinding = `rebind.${org.slug}.example`;
    resolver.answer(rebinding, ["203.0.113.10"], ["127.0.0.1"]);
    const before = named.requests.length;
    const rebound = await registerProvider(strict, org.orgId, org.owner, { ...providerBody(idp, [`${org.slug}.example`]), issuer: `https://${rebinding}:${named.port}` });
    expect(rebound.status).toBe(400);
    expect(rebound.body.error.message).toContain(`${rebinding} resolves to a loopback or private address`);
    expect(named.requests.length).toBe(before);
  });

  it("CORE_SSO_PROVIDER_ORIGINS narrows the origins to its list, for the issuer and for every endpoint its document names", async () => {
    const org = await orgWithOwner(lenient, ops, slugs.listed);
    const fetched = discoveries(idp);
    const narrowed = await createIam(database, { config: { iamUrl: SSO_IAM_URL, ssoProviders: rules(true, ["https://login.elsewhere.example"]) } });
    const outside = await registerProvider(narrowed, org.orgId, org.owner, providerBody(idp, [`${slugs.listed}.example`]));
    expect(outside.status).toBe(400);
    expect(outside.body.error.message).toBe(`${idp.origin} is not among the identity provider origins this service allows (CORE_SSO_PROVIDER_ORIGINS)`);
    expect(discoveries(idp)).toBe(fetched);

    // a listed issuer whose document sends IAM's token request to another origin
    const split = await discoveryServer((origin) => ({ issuer: origin, authorization_endpoint: `${origin}/auth`, token_endpoint: `${idp.origin}/token`, jwks_uri: `${origin}/jwks` }));
    try {
      const listed = await createIam(database, { config: { iamUrl: SSO_IAM_URL, ssoProviders: rules(true, [split.origin]) } });
      const r = await registerProvider(listed, org.orgId, org.owner, { ...providerBody(idp, [`${slugs.listed}.example`]), issuer: split.origin });
      expect(r.status).toBe(400);
      expect(r.body.error.message).toBe(`${idp.origin} is not among the identity provider origins this service allows (CORE_SSO_PROVIDER_ORIGINS)`);
    } finally {
      await split.close();
    }
    // listed, it registers
    const allowed = await createIam(database, { config: { iamUrl: SSO_IAM_URL, ssoProviders: rules(true, [idp.origin]) } });
    expect((await registerProvider(allowed, org.orgId, org.owner, providerBody(idp, [`${slugs.listed}.example`]))).status).toBe(201);
    expect((await approveProvider(allowed, ops, `${slugs.listed}-oidc`)).status).toBe(200);

    // an operator who narrows the list afterwards: the provider is not started, nor is its callback run
    const started = await new PageBrowser(narrowed).get(`/sign-in/sso?organization=${slugs.listed}`);
    expect(started.status).toBe(502);
    expect(textOf(started.html)).toContain("at an address this service does not connect to");
    const callback = await new PageBrowser(narrowed).get(`/api/auth/sso/callback/${slugs.listed}-oidc?code=x&state=y`);
    expect(callback.status).toBe(302);
    expect(callback.location).toBe("/sign-in/sso?error=SSO_PROVIDER_NOT_ALLOWED");
    const page = await new PageBrowser(narrowed).get(callback.location!);
    expect(page.status).toBe(502);
  });

  it("a provider whose name resolves to a private address when someone signs in is refused where IAM connects: the code never reaches it", async () => {
    const org = await orgWithOwner(lenient, ops, slugs.named);
    // registered while private addresses were allowed (the name answers 127.0.0.1, where the provider listens)
    const r = await registerProvider(lenient, org.orgId, org.owner, providerBody(named, [`${slugs.named}.example`]));
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body.issuer).toBe(`https://${namedHost}:${named.port}`);
    expect((await approveProvider(lenient, ops, `${slugs.named}-oidc`)).status).toBe(200);
    named.addAccount("grace", { email: `grace@${slugs.named}.example`, emailVerified: true, name: "Grace" });
    named.addAccount("linus", { email: `linus@${slugs.named}.example`, emailVerified: true, name: "Linus" });

    // where they are allowed, the sign-in goes through: only the guard's resolver knows the name, and
    // only its agent trusts the provider's certificate, so the plugin's connections went through it
    expect((await signInThrough(lenient, named, slugs.named, "grace")).landed.location).toBe("/account");

    // the same provider, where they are not: the start connects to nothing and goes ahead; the
    // callback's token request is refused by the guard's lookup, and nothing is sent to the provider
    const tokenRequests = () => named.requests.filter((line) => line === "POST /token").length;
    const before = tokenRequests();
    const asked = resolver.lookups.length;
    const { browser, landed } = await signInThrough(strict, named, slugs.named, "linus");
    expect(resolver.lookups.slice(asked)).toContain(namedHost);
    expect(landed.status).toBe(302);
    const error = new URL(landed.location!, SSO_IAM_URL);
    expect(error.pathname).toBe("/sign-in/sso");
    expect(error.searchParams.get("error")).toBe("invalid_provider");
    expect(landed.location).not.toContain("127.0.0.1");
    expect(tokenRequests()).toBe(before);
    const page = await browser.get(error.pathname + error.search);
    expect(page.status).toBe(502);
    expect(textOf(page.html)).toContain("could not be reached");
    expect(await database.db.select().from(user).where(eq(user.email, `linus@${slugs.named}.example`))).toEqual([]);
  });

  it("a listed provider's origin is not one of the library's trusted origins: a browser's write from it is refused, and no sign-in returns to it", async () => {
    // the provider on the list of the operator
    const listed = await createIam(database, { config: { iamUrl: SSO_IAM_URL, ssoProviders: rules(true, [idp.origin]) } });
    const org = await orgWithOwner(listed, ops, slugs.trusted);
    expect((await registerProvider(listed, org.orgId, org.owner, providerBody(idp, [`${slugs.trusted}.example`]))).status).toBe(201);
    expect((await approveProvider(listed, ops, `${slugs.trusted}-oidc`)).status).toBe(200);
    const context = await listed.app.ctx.auth.$context;
    expect(context.trustedOrigins).not.toContain(idp.origin);

    // a signed-in browser's write whose Origin is the provider's, and the same from IAM's own page
    const person = await signIn(listed, await signUp(listed, uniqueEmail("csrf")));
    const fromProvider = await call(listed, "POST", "/api/auth/update-user", { headers: { cookie: person.cookie, origin: idp.origin }, body: { name: "Written by the provider" } });
    expect(fromProvider.status).toBe(403);
    const fromIam = await call(listed, "POST", "/api/auth/update-user", { headers: { cookie: person.cookie, origin: listed.origin }, body: { name: "Written here" } });
    expect(fromIam.status).toBe(200);

    // a start through the library's route from a page of the provider, or that would send the browser back to it
    const fromProviderPage = await call(listed, "POST", "/api/auth/sign-in/sso", { headers: { cookie: person.cookie, origin: idp.origin }, body: { organizationSlug: slugs.trusted, callbackURL: "/account" } });
    expect(fromProviderPage.status).toBe(403);
    for (const field of ["callbackURL", "errorCallbackURL", "newUserCallbackURL"]) {
      const r = await call(listed, "POST", "/api/auth/sign-in/sso", { body: { organizationSlug: slugs.trusted, callbackURL: "/account", [field]: `${idp.origin}/collect` } });
      expect(r.status, field).toBe(403);
    }
    const fine = await call(listed, "POST", "/api/auth/sign-in/sso", { body: { organizationSlug: slugs.trusted, callbackURL: "/account" } });
    expect(fine.status, JSON.stringify(fine.body)).toBe(200);
    expect(fine.body.url.startsWith(`${idp.origin}/auth?`)).toBe(true);
    expect(new URL(fine.body.url).searchParams.get("redirect_uri")).toBe(callbackOf(slugs.trusted));
    // an address no provider serves: the plugin's own answer
    const none = await call(listed, "POST", "/api/auth/sign-in/sso", { body: { email: "someone@nowhere.example", callbackURL: "/account" } });
    expect(none.status).toBe(404);
  });
});
