import { eq, sql } from "drizzle-orm";
import { createLocalJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rowsOf, testDatabases, type DatabaseHandle } from "@core/storage";
import { apikey } from "../src/db/schema.js";
import { call, createApiKey, createIam, failingFields, REGISTRY_SECRET, serviceToken, signUp, tenantOrg, type Iam, type SignedUp, iamWithOperator, type Operator } from "./support/harness.js";

const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString("base64")}`;

describe.each(testDatabases())("service tokens and API keys on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let op: Operator;
  let service: string;
  beforeAll(async () => ({ database, iam, op, service } = await iamWithOperator(open)));
  afterAll(() => database?.close());

  const issue = (body: unknown, authorization?: string) =>
    call(iam, "POST", "/api/core/service-token", { body, headers: authorization ? { authorization } : {} });

  describe("POST /api/core/service-token", () => {
    it("answers { token, tokenType: \"Bearer\", expiresIn } for a service presenting its own secret", async () => {
      const r = await issue({ serviceId: "platform-registry", targetService: "iam" }, basic("platform-registry", REGISTRY_SECRET));
      expect(r.status).toBe(200);
      expect(Object.keys(r.body).sort()).toEqual(["expiresIn", "token", "tokenType"]);
      expect(r.body).toEqual({ token: expect.any(String), tokenType: "Bearer", expiresIn: 300 });
    });

    it("signs an EdDSA JWT with sub, aud, iss, typ \"service\" and a lifetime of at most 5 minutes, verifiable with the JWKS", async () => {
      const r = await issue({ serviceId: "platform-registry", targetService: "billing" }, basic("platform-registry", REGISTRY_SECRET));
      const claims = decodeJwt(r.body.token);
      expect(claims).toMatchObject({ sub: "platform-registry", aud: "billing", iss: iam.config.iamUrl, typ: "service" });
      expect(claims.exp! - claims.iat!).toBeLessThanOrEqual(300);
      expect(claims.exp! - claims.iat!).toBeGreaterThan(0);
      expect(claims.iat).toBe(Math.floor(iam.clock.now().getTime() / 1000));
      expect(decodeProtectedHeader(r.body.token)).toMatchObject({ alg: "EdDSA", kid: expect.any(String) });
      const jwks = await call(iam, "GET", "/api/auth/jwks");
      expect(jwks.status).toBe(200);
      const verified = await jwtVerify(r.body.token, createLocalJWKSet(jwks.body as JSONWebKeySet), {
        issuer: iam.config.iamUrl,
        audience: "billing",
        currentDate: iam.clock.now(),
      });
      expect(verified.payload.sub).toBe("platform-registry");
    });

    it("issues tokens IAM itself accepts as a service credential", async () => {
      const token = await serviceToken(iam);
      const r = await call(iam, "POST", "/api/validate-session", { token, body: { token: "unknown" } });
      expect(r).toMatchObject({ status: 200, body: { valid: false } });
    });

    it("refuses a request without credentials with 401 and a Basic challenge", async () => {
      const r = await issue({ serviceId: "platform-registry", targetService: "iam" });
      expect(r.status).toBe(401);
      expect(r.body.error.code).toBe("UNAUTHENTICATED");
      expect(r.headers.get("www-authenticate")).toMatch(/^Basic /);
    });

    it("refuses a wrong secret, an unknown service and a bearer credential with 401", async () => {
      const body = { serviceId: "platform-registry", targetService: "iam" };
      expect((await issue(body, basic("platform-registry", `${REGISTRY_SECRET}x`))).status).toBe(401);
      expect((await issue(body, basic("platform-registry", ""))).status).toBe(401);
      expect((await issue({ ...body, serviceId: "ghost" }, basic("ghost", REGISTRY_SECRET))).status).toBe(401);
      expect((await issue(body, `Bearer ${service}`)).status).toBe(401);
    });

    it("refuses a service asking in another service's name with 403", async () => {
      const r = await issue({ serviceId: "billing", targetService: "iam" }, basic("platform-registry", REGISTRY_SECRET));
      expect(r.status).toBe(403);
      expect(r.body.error.code).toBe("FORBIDDEN");
    });

    it.each(["ghost-service", "constructor", "toString"])("answers 400 for the unknown target service %s", async (target) => {
      const r = await issue({ serviceId: "platform-registry", targetService: target }, basic("platform-registry", REGISTRY_SECRET));
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("BAD_REQUEST");
    });

    it.each([
      ["serviceId missing", { targetService: "iam" }, "serviceId"],
      ["serviceId empty", { serviceId: "", targetService: "iam" }, "serviceId"],
      ["targetService missing", { serviceId: "platform-registry" }, "targetService"],
      ["targetService empty", { serviceId: "platform-registry", targetService: "" }, "targetService"],
      ["targetService of 65 characters", { serviceId: "platform-registry", targetService: "t".repeat(65) }, "targetService"],
    ])("answers 400 VALIDATION_ERROR for %s", async (_label, body, field) => {
      const r = await issue(body, basic("platform-registry", REGISTRY_SECRET));
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("VALIDATION_ERROR");
      expect(failingFields(r.body)).toContain(field);
    });
  });

  describe("API keys through better-auth's /api/auth/api-key/create", () => {
    it("shows the raw key once and stores only its hash", async () => {
      const ada = await signUp(iam);
      const created = await createApiKey(iam, ada);
      expect(created.key).toMatch(/^core_/);
      const [row] = await database.db.select().from(apikey).where(eq(apikey.id, created.id));
      expect(row).toBeDefined();
      expect(row!.key).not.toBe(created.key);
      expect(row!.key).not.toContain(created.key.slice("core_".length));
      const everything = rowsOf<Record<string, unknown>>(await database.db.execute(sql`select * from iam.apikey`));
      expect(JSON.stringify(everything)).not.toContain(created.key);
      // listing the keys later never shows the key again
      const list = await call(iam, "GET", "/api/auth/api-key/list", { token: ada.token });
      expect(list.status).toBe(200);
      expect(JSON.stringify(list.body)).not.toContain(created.key);
    });

    it("refuses to create a key without a session", async () => {
      const r = await call(iam, "POST", "/api/auth/api-key/create", { headers: { origin: iam.origin }, body: { name: "ci" } });
      expect(r.status).toBe(401);
    });
  });

  describe("POST /api/core/apikey/validate", () => {
    const validate = (key: string, as = service) => call(iam, "POST", "/api/core/apikey/validate", { token: as, body: { key } });

    it("answers { valid: true, principal } for a key of a user outside any organization", async () => {
      const ada = await signUp(iam);
      const created = await createApiKey(iam, ada);
      const r = await validate(created.key);
      expect(r.status).toBe(200);
      expect(Object.keys(r.body).sort()).toEqual(["principal", "valid"]);
      expect(r.body.principal).toEqual({
        type: "apikey",
        userId: ada.userId,
        email: ada.email,
        sessionId: null,
        apiKeyId: created.id,
        expiresAt: null,
        orgId: null,
        orgType: null,
        platformId: null,
        platformStatus: null,
        role: null,
        permissions: [],
      });
    });

    it("lets the key act as its owner in the owner's organization, with the owner's permissions", async () => {
      const { orgId, owner } = await tenantOrg(iam, op);
      const created = await createApiKey(iam, owner);
      const r = await validate(created.key);
      expect(r.body.principal).toMatchObject({ type: "apikey", userId: owner.userId, orgId, orgType: "tenant", role: "owner", sessionId: null });
      expect(r.body.principal.permissions).toContain("org:manage");
    });

    it("answers the key's expiry as ISO 8601 when it has one", async () => {
      const ada = await signUp(iam);
      const created = await createApiKey(iam, ada, { name: "expiring", expiresIn: 86_400 });
      const r = await validate(created.key);
      expect(r.body.principal.expiresAt).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      expect(Date.parse(r.body.principal.expiresAt)).toBeGreaterThan(Date.now() + 86_000_000);
    });

    it("keeps a key valid beyond ten validations (the library's daily cap is off)", async () => {
      const ada = await signUp(iam);
      const created = await createApiKey(iam, ada);
      for (let i = 0; i < 12; i++) {
        // past IAM's short cache, so every validation reaches the library's check
        iam.app.ctx.apiKeys.forget();
        const r = await validate(created.key);
        expect(r.body.valid, `validation ${i + 1}`).toBe(true);
      }
    });

    it("answers { valid: false } for an unknown key and for a deleted one", async () => {
      expect((await validate("core_no-such-key")).body).toEqual({ valid: false });
      const ada = await signUp(iam);
      const created = await createApiKey(iam, ada);
      expect((await validate(created.key)).body.valid).toBe(true);
      const deleted = await call(iam, "POST", "/api/auth/api-key/delete", { token: ada.token, headers: { origin: iam.origin }, body: { keyId: created.id } });
      expect(deleted.status).toBe(200);
      expect((await validate(created.key)).body).toEqual({ valid: false });
    });

    it("lets a person use the key as x-api-key on IAM's own routes", async () => {
      const ada = await signUp(iam);
      const created = await createApiKey(iam, ada);
      const r = await call(iam, "GET", "/api/core/organizations/no-such-org", { headers: { "x-api-key": created.key } });
      expect(r.status).toBe(404);
      const wrong = await call(iam, "GET", "/api/core/organizations/no-such-org", { headers: { "x-api-key": `${created.key}x` } });
      expect(wrong.status).toBe(401);
    });

    it("refuses callers that are not services with 401: nobody, a session, an API key", async () => {
      const ada = await signUp(iam);
      const created = await createApiKey(iam, ada);
      expect((await call(iam, "POST", "/api/core/apikey/validate", { body: { key: created.key } })).status).toBe(401);
      expect((await validate(created.key, ada.token)).status).toBe(401);
      const asKey = await call(iam, "POST", "/api/core/apikey/validate", { headers: { "x-api-key": created.key }, body: { key: created.key } });
      expect(asKey.status).toBe(401);
      expect((await validate(created.key, `${service.slice(0, -2)}xx`)).status).toBe(401);
    });

    it.each([
      ["key missing", {}],
      ["key empty", { key: "" }],
      ["key of 513 characters", { key: "k".repeat(513) }],
    ])("answers 400 VALIDATION_ERROR naming key for %s", async (_label, body) => {
      const r = await call(iam, "POST", "/api/core/apikey/validate", { token: service, body });
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("VALIDATION_ERROR");
      expect(failingFields(r.body)).toContain("key");
    });

    it("never limits failed validations while rate limits are off", async () => {
      // one more failure than the configured allowance, each with a new key (past the short negative cache)
      for (let i = 0; i <= iam.config.rateLimits.apiKeyFailures; i++) {
        expect((await validate(`core_unlimited-${i}`)).status).toBe(200);
      }
    });

    it("accepts a key of 512 characters (and finds it invalid)", async () => {
      expect(await validate("k".repeat(512))).toMatchObject({ status: 200, body: { valid: false } });
    });
  });
});

describe.each(testDatabases())("API key validation limits on $name", ({ open }) => {
  const BILLING_SECRET = "billing-secret-for-tests-0123456789";
  let database: DatabaseHandle;
  let iam: Iam;

  beforeAll(async () => {
    database = await open();
    iam = await createIam(database, {
      config: { rateLimits: { enabled: true, windowSeconds: 60, signIn: 10, signUp: 50, magicLink: 5, apiKeyFailures: 3 } },
      serviceCredentials: new Map([
        ["platform-registry", REGISTRY_SECRET],
        ["billing", BILLING_SECRET],
      ]),
    });
  });
  afterAll(async () => {
    await database?.close();
  });

  it("answers 429 with Retry-After once a calling service has had too many failed validations, and only to that service", async () => {
    const ada = await signUp(iam);
    const created = await createApiKey(iam, ada);
    const billing = await serviceToken(iam, "billing", BILLING_SECRET);
    const registry = await serviceToken(iam);
    const validate = (key: string, as: string) => call(iam, "POST", "/api/core/apikey/validate", { token: as, body: { key } });

    for (let i = 0; i < 3; i++) expect((await validate(`core_wrong-${i}`, billing)).body).toEqual({ valid: false });
    const limited = await validate(`core_wrong-4`, billing);
    expect(limited.status).toBe(429);
    expect(limited.body.error.code).toBe("RATE_LIMITED");
    const retryAfter = Number(limited.headers.get("retry-after"));
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    // while limited, even a good key is not checked for that caller
    expect((await validate(created.key, billing)).status).toBe(429);
    // another service is counted on its own
    expect((await validate(created.key, registry)).body.valid).toBe(true);

    // the next window starts afresh
    iam.clock.advance(60_000);
    expect((await validate(created.key, billing)).body.valid).toBe(true);
  });

  it("counts each client address the service names on its own, and refuses an address over 64 characters", async () => {
    const ada = await signUp(iam);
    const created = await createApiKey(iam, ada);
    const billing = await serviceToken(iam, "billing", BILLING_SECRET);
    const validate = (body: Record<string, unknown>) => call(iam, "POST", "/api/core/apikey/validate", { token: billing, body });

    for (let i = 0; i < 3; i++) expect((await validate({ key: `core_guess-${i}`, clientIp: "198.51.100.9" })).body).toEqual({ valid: false });
    expect((await validate({ key: created.key, clientIp: "198.51.100.9" })).status).toBe(429);
    expect((await validate({ key: created.key, clientIp: "198.51.100.10" })).body.valid).toBe(true);
    const tooLong = await validate({ key: created.key, clientIp: "x".repeat(65) });
    expect(tooLong.status).toBe(400);
    expect(failingFields(tooLong.body)).toEqual(["clientIp"]);
    iam.clock.advance(60_000);
  });

  it("does not count successful validations against the caller", async () => {
    const ada = await signUp(iam);
    const created = await createApiKey(iam, ada);
    const registry = await serviceToken(iam);
    for (let i = 0; i < 5; i++) {
      iam.app.ctx.apiKeys.forget();
      expect((await call(iam, "POST", "/api/core/apikey/validate", { token: registry, body: { key: created.key } })).body.valid).toBe(true);
    }
  });
});
