import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { session } from "../src/db/schema.js";
import { call, failingFields, operator, REGISTRY_SECRET, serviceToken, signIn, signUp, tenantOrg, type Iam, iamWithOperator, type Operator } from "./support/harness.js";

const PRINCIPAL_KEYS = [
  "apiKeyId",
  "email",
  "expiresAt",
  "orgId",
  "orgType",
  "permissions",
  "platformId",
  "platformStatus",
  "role",
  "sessionId",
  "type",
  "userId",
];
const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describe.each(testDatabases())("sessions on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let op: Operator;
  let service: string;
  beforeAll(async () => ({ database, iam, op, service } = await iamWithOperator(open)));
  afterAll(() => database?.close());

  const validate = (token: string, as = service) => call(iam, "POST", "/api/validate-session", { token: as, body: { token } });

  describe("POST /api/validate-session", () => {
    it("answers { valid: true, principal } with every principal field for a live session", async () => {
      const ada = await signUp(iam);
      const r = await validate(ada.token);
      expect(r.status).toBe(200);
      expect(Object.keys(r.body).sort()).toEqual(["principal", "valid"]);
      expect(r.body.valid).toBe(true);
      expect(Object.keys(r.body.principal).sort()).toEqual(PRINCIPAL_KEYS);
      expect(r.body.principal).toEqual({
        type: "user",
        userId: ada.userId,
        email: ada.email,
        sessionId: expect.any(String),
        apiKeyId: null,
        expiresAt: expect.stringMatching(ISO_8601),
        orgId: null,
        orgType: null,
        platformId: null,
        platformStatus: null,
        role: null,
        permissions: [],
      });
    });

    it("carries the organization, its type, the effective role and the permissions of a member", async () => {
      const { orgId, owner } = await tenantOrg(iam, op);
      const r = await validate(owner.token);
      expect(r.body.principal).toMatchObject({ orgId, orgType: "tenant", role: "owner", platformId: null, platformStatus: null });
      expect(r.body.principal.permissions).toContain("org:manage");
    });

    it("answers the session's expiry as ISO 8601, one session lifetime after sign-in", async () => {
      const ada = await signUp(iam);
      const before = Date.now();
      const again = await signIn(iam, ada);
      const r = await validate(again.token);
      const expires = Date.parse(r.body.principal.expiresAt);
      expect(expires).toBeGreaterThanOrEqual(before + iam.config.sessionSeconds * 1000 - 1000);
      expect(expires).toBeLessThanOrEqual(Date.now() + iam.config.sessionSeconds * 1000);
    });

    it("answers { valid: false } and nothing else for an unknown token", async () => {
      const r = await validate("no-such-session-token");
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ valid: false });
    });

    it("answers { valid: false } at once for a session revoked by sign-out", async () => {
      const ada = await signUp(iam);
      expect((await validate(ada.token)).body.valid).toBe(true);
      const out = await call(iam, "POST", "/api/auth/sign-out", { cookie: ada.cookie });
      expect(out.status).toBe(200);
      expect((await validate(ada.token)).body).toEqual({ valid: false });
    });

    it("answers { valid: false } for a session past its expiry", async () => {
      const ada = await signUp(iam);
      await database.db
        .update(session)
        .set({ expiresAt: new Date(iam.clock.now().getTime() - 1000) })
        .where(eq(session.token, ada.token));
      const r = await validate(ada.token);
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ valid: false });
    });

    it("refuses a caller without credentials with 401", async () => {
      const ada = await signUp(iam);
      const r = await call(iam, "POST", "/api/validate-session", { body: { token: ada.token } });
      expect(r.status).toBe(401);
      expect(r.body.error.code).toBe("UNAUTHENTICATED");
    });

    it("refuses a user's session token as the caller's credential with 401: the route is for services", async () => {
      const ada = await signUp(iam);
      const r = await validate(ada.token, ada.token);
      expect(r.status).toBe(401);
    });

    it("refuses a forged or foreign service token with 401", async () => {
      const ada = await signUp(iam);
      const [header, payload] = service.split(".");
      const forged = `${header}.${payload}.${"A".repeat(86)}`;
      expect((await validate(ada.token, forged)).status).toBe(401);
      // a token addressed to another service is not good at IAM
      const forBilling = await serviceToken(iam, "platform-registry", REGISTRY_SECRET, "billing");
      expect((await validate(ada.token, forBilling)).status).toBe(401);
    });

    it.each([
      ["token missing", {}],
      ["token empty", { token: "" }],
      ["token of 513 characters", { token: "t".repeat(513) }],
      ["token not a string", { token: 42 }],
    ])("answers 400 VALIDATION_ERROR naming token for %s", async (_label, body) => {
      const r = await call(iam, "POST", "/api/validate-session", { token: service, body });
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("VALIDATION_ERROR");
      expect(failingFields(r.body)).toContain("token");
    });

    it("answers 400 BAD_REQUEST for a malformed JSON body, and 415 for a body that is not JSON", async () => {
      const malformed = await call(iam, "POST", "/api/validate-session", { token: service, body: '{"token": ' });
      expect(malformed.status).toBe(400);
      expect(malformed.body.error.code).toBe("BAD_REQUEST");
      const text = await call(iam, "POST", "/api/validate-session", { token: service, body: "token=x", headers: { "content-type": "text/plain" } });
      expect(text.status).toBe(415);
    });

    it("accepts a token of 512 characters (and finds no such session)", async () => {
      const r = await validate("t".repeat(512));
      expect(r).toMatchObject({ status: 200, body: { valid: false } });
    });
  });

  describe("GET /api/core/session", () => {
    it("answers { session, user, principal } in the shape of DESIGN §4", async () => {
      const ada = await signUp(iam);
      const r = await call(iam, "GET", "/api/core/session", { token: ada.token });
      expect(r.status).toBe(200);
      expect(Object.keys(r.body).sort()).toEqual(["principal", "session", "user"]);
      expect(r.body.session).toEqual({ id: r.body.principal.sessionId, expiresAt: r.body.principal.expiresAt });
      expect(r.body.user).toEqual({ id: ada.userId, email: ada.email, name: ada.email.split("@")[0], image: null });
      expect(Object.keys(r.body.principal).sort()).toEqual(PRINCIPAL_KEYS);
      expect(r.body.principal).toMatchObject({ type: "user", userId: ada.userId, apiKeyId: null });
    });

    it("accepts the session cookie as well as the bearer token", async () => {
      const ada = await signUp(iam);
      const r = await call(iam, "GET", "/api/core/session", { cookie: ada.cookie });
      expect(r.status).toBe(200);
      expect(r.body.user.id).toBe(ada.userId);
    });

    it("answers the operator's context: core-operator organization, owner, operator-only permissions", async () => {
      const r = await call(iam, "GET", "/api/core/session", { token: op.token });
      expect(r.body.principal).toMatchObject({ orgId: op.orgId, orgType: "core-operator", role: "owner" });
      expect(r.body.principal.permissions).toEqual(expect.arrayContaining(["orgs:create", "platforms:manage", "stacks:publish", "billing:operate"]));
    });

    it("refuses a request without a session with 401", async () => {
      const r = await call(iam, "GET", "/api/core/session");
      expect(r.status).toBe(401);
      expect(r.body.error).toMatchObject({ code: "UNAUTHENTICATED", requestId: expect.any(String) });
    });

    it("refuses an unknown bearer token and a forged cookie with 401", async () => {
      const ada = await signUp(iam);
      expect((await call(iam, "GET", "/api/core/session", { token: "not-a-session" })).status).toBe(401);
      const forged = ada.cookie.replace(/=([^.]+)\./, "=$1x.");
      expect((await call(iam, "GET", "/api/core/session", { cookie: forged })).status).toBe(401);
    });

    it("refuses a service token with 401: it is not a session", async () => {
      const r = await call(iam, "GET", "/api/core/session", { token: service });
      expect(r.status).toBe(401);
    });
  });

  describe("GET /api/sessions", () => {
    it("lists the caller's live sessions, newest first, marking the current one", async () => {
      const ada = await signUp(iam);
      const second = await signIn(iam, ada);
      const r = await call(iam, "GET", "/api/sessions", { token: ada.token });
      expect(r.status).toBe(200);
      expect(Object.keys(r.body)).toEqual(["data"]);
      expect(r.body.data).toHaveLength(2);
      for (const s of r.body.data) {
        expect(Object.keys(s).sort()).toEqual(["createdAt", "current", "expiresAt", "id", "ipAddress", "userAgent"]);
        expect(s.createdAt).toMatch(ISO_8601);
        expect(s.expiresAt).toMatch(ISO_8601);
      }
      const [newest, oldest] = r.body.data;
      expect(Date.parse(newest.createdAt)).toBeGreaterThanOrEqual(Date.parse(oldest.createdAt));
      const mine = (await call(iam, "GET", "/api/core/session", { token: ada.token })).body.session.id;
      const theirs = (await call(iam, "GET", "/api/core/session", { token: second.token })).body.session.id;
      expect(r.body.data.filter((s: { current: boolean }) => s.current).map((s: { id: string }) => s.id)).toEqual([mine]);
      expect(r.body.data.map((s: { id: string }) => s.id).sort()).toEqual([mine, theirs].sort());
    });

    it("shows nobody else's sessions", async () => {
      const ada = await signUp(iam);
      const bob = await signUp(iam);
      const bobsSession = (await call(iam, "GET", "/api/core/session", { token: bob.token })).body.session.id;
      const r = await call(iam, "GET", "/api/sessions", { token: ada.token });
      expect(r.body.data.map((s: { id: string }) => s.id)).not.toContain(bobsSession);
      expect(r.body.data).toHaveLength(1);
    });

    it("leaves out a session after sign-out", async () => {
      const ada = await signUp(iam);
      const second = await signIn(iam, ada);
      await call(iam, "POST", "/api/auth/sign-out", { cookie: second.cookie });
      const r = await call(iam, "GET", "/api/sessions", { token: ada.token });
      expect(r.body.data).toHaveLength(1);
      expect(r.body.data[0].current).toBe(true);
    });

    it("refuses a request without a session with 401", async () => {
      expect((await call(iam, "GET", "/api/sessions")).status).toBe(401);
      expect((await call(iam, "GET", "/api/sessions", { token: "wrong" })).status).toBe(401);
    });
  });

  describe("DELETE /api/sessions/:id", () => {
    const sessionIdOf = async (token: string) => (await call(iam, "GET", "/api/core/session", { token })).body.session.id as string;

    it("revokes one of the caller's sessions and answers { id }; the token stops working at once", async () => {
      const ada = await signUp(iam);
      const laptop = await signIn(iam, ada);
      const id = await sessionIdOf(laptop.token);
      expect((await validate(laptop.token)).body.valid).toBe(true);
      const r = await call(iam, "DELETE", `/api/sessions/${id}`, { token: ada.token });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ id });
      expect((await validate(laptop.token)).body).toEqual({ valid: false });
      expect((await call(iam, "GET", "/api/core/session", { token: laptop.token })).status).toBe(401);
      // the caller's own session lives on
      expect((await call(iam, "GET", "/api/core/session", { token: ada.token })).status).toBe(200);
    });

    it("lets the caller revoke the very session they use", async () => {
      const ada = await signUp(iam);
      const id = await sessionIdOf(ada.token);
      expect((await call(iam, "DELETE", `/api/sessions/${id}`, { token: ada.token })).status).toBe(200);
      expect((await call(iam, "GET", "/api/sessions", { token: ada.token })).status).toBe(401);
    });

    it("answers 404 for another user's session and leaves it alive", async () => {
      const ada = await signUp(iam);
      const bob = await signUp(iam);
      const bobs = await sessionIdOf(bob.token);
      const r = await call(iam, "DELETE", `/api/sessions/${bobs}`, { token: ada.token });
      expect(r.status).toBe(404);
      expect(r.body.error.code).toBe("NOT_FOUND");
      expect((await validate(bob.token)).body.valid).toBe(true);
    });

    it("answers 404 for an unknown session and for one revoked already", async () => {
      const ada = await signUp(iam);
      expect((await call(iam, "DELETE", "/api/sessions/no-such-session", { token: ada.token })).status).toBe(404);
      const laptop = await signIn(iam, ada);
      const id = await sessionIdOf(laptop.token);
      expect((await call(iam, "DELETE", `/api/sessions/${id}`, { token: ada.token })).status).toBe(200);
      expect((await call(iam, "DELETE", `/api/sessions/${id}`, { token: ada.token })).status).toBe(404);
    });

    it("refuses a request without a session with 401", async () => {
      const ada = await signUp(iam);
      const id = await sessionIdOf(ada.token);
      expect((await call(iam, "DELETE", `/api/sessions/${id}`)).status).toBe(401);
      expect((await call(iam, "DELETE", `/api/sessions/${id}`, { token: "wrong" })).status).toBe(401);
    });

    it("refuses a cookie-carrying revocation from an untrusted origin with 403", async () => {
      const ada = await signUp(iam);
      const laptop = await signIn(iam, ada);
      const id = await sessionIdOf(laptop.token);
      const r = await call(iam, "DELETE", `/api/sessions/${id}`, { cookie: ada.cookie, headers: { origin: "https://evil.example" } });
      expect(r.status).toBe(403);
      expect((await validate(laptop.token)).body.valid).toBe(true);
    });

    it("answers 400 VALIDATION_ERROR for an id longer than 128 characters", async () => {
      const ada = await signUp(iam);
      const r = await call(iam, "DELETE", `/api/sessions/${"x".repeat(129)}`, { token: ada.token });
      expect(r.status).toBe(400);
      expect(failingFields(r.body)).toContain("id");
    });
  });
});
