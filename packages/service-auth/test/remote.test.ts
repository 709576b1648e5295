import { decodeJwt, SignJWT } from "jose";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { ApiError, idsOnlyTracing, manualClock, parseTraceparent } from "@core/kit";
import { POSITIVE_TTL_MS, remoteResolvers, ServiceTokenClient, type CredentialResolvers } from "@core/service-auth";
import { deadUrl, principal, startFakeIam, type FakeIam } from "./support/fake-iam.js";

const SERVICE = "platform-registry";
const SECRET = "registry-secret";

let iam: FakeIam;
beforeAll(async () => {
  iam = await startFakeIam();
  iam.serviceSecrets.set(SERVICE, SECRET);
});
afterAll(async () => {
  await iam.close();
});

/** Fresh resolvers (empty caches) on a clock the test moves, pointed at the fake IAM. */
function resolversAt(iamUrl = iam.url) {
  const clock = manualClock(new Date());
  const tokens = new ServiceTokenClient(iamUrl, { serviceId: SERVICE, secret: SECRET });
  return { clock, resolvers: remoteResolvers({ iamUrl, serviceId: SERVICE, tokens, clock }) };
}

async function failureOf(promise: Promise<unknown>): Promise<ApiError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    return err as ApiError;
  }
  throw new Error("expected a failure");
}

const now = () => Math.floor(Date.now() / 1000);
let unique = 0;
const fresh = (prefix: string) => `${prefix}-${process.pid}-${unique++}`;

describe("service tokens", () => {
  // on the system clock: these tokens are dated by the fake IAM's real time
  let resolvers: CredentialResolvers;
  beforeAll(() => {
    const tokens = new ServiceTokenClient(iam.url, { serviceId: SERVICE, secret: SECRET });
    resolvers = remoteResolvers({ iamUrl: iam.url, serviceId: SERVICE, tokens });
  });
  const verify = async (claims: Parameters<FakeIam["mintServiceToken"]>[0]) => resolvers.serviceToken(await iam.mintServiceToken(claims));

  it("accepts an IAM service token for this service and names the calling service", async () => {
    expect(await verify({ sub: "billing" })).toEqual({ serviceId: "billing" });
  });

  it("refuses a token for another audience", async () => {
    expect(await verify({ aud: "billing" })).toBeNull();
    expect(await verify({ aud: null })).toBeNull();
  });

  it("refuses a token from another issuer", async () => {
    expect(await verify({ iss: "http://evil.example.com" })).toBeNull();
    expect(await verify({ iss: null })).toBeNull();
  });

  it('refuses a token that is not typed "service"', async () => {
    expect(await verify({ typ: null })).toBeNull();
    expect(await verify({ typ: "session" })).toBeNull();
  });

  it("refuses a token signed by a key IAM does not publish", async () => {
    expect(await verify({ foreignKey: true })).toBeNull();
  });

  it("refuses an OAuth access token IAM issued for the vault (issue 29): its audience is the vault's URL and it is no service token", async () => {
    const access = { headerTyp: "at+jwt", typ: null, sub: "usr_reader", extra: { scope: "vault:read", permissions: ["vault:read"], org_id: "org_tenant", client_id: "client-1" } };
    expect(await verify({ ...access, aud: "http://localhost:4500/mcp" })).toBeNull();
    // even one addressed to this service's id: only a token typed "service" names a calling service
    expect(await verify({ ...access, aud: SERVICE })).toBeNull();
    // the same token typed as a service token is accepted: what refuses the others is their type and audience
    expect(await verify({ ...access, aud: SERVICE, typ: "service" })).toEqual({ serviceId: "usr_reader" });
  });

  it("refuses a token whose payload was altered after signing", async () => {
    const [header, , signature] = (await iam.mintServiceToken({ sub: "billing" })).split(".");
    const forged = Buffer.from(JSON.stringify({ ...decodeJwt(await iam.mintServiceToken()), sub: "iam" })).toString("base64url");
    expect(await resolvers.serviceToken(`${header}.${forged}.${signature}`)).toBeNull();
  });

  it("refuses a token signed with another algorithm", async () => {
    const hs = await new SignJWT({ iss: iam.url, aud: SERVICE, sub: "billing", typ: "service" })
      .setProtectedHeader({ alg: "HS256", kid: "key-1" })
      .setIssuedAt()
      .setExpirationTime("5m")
      .sign(new TextEncoder().encode("a-shared-secret-of-thirty-two-bytes!"));
    expect(await resolvers.serviceToken(hs)).toBeNull();
  });

  it("accepts a lifetime of exactly 300 s and refuses 301 s", async () => {
    const iat = now();
    expect(await verify({ iat, exp: iat + 300 })).toEqual({ serviceId: "billing" });
    expect(await verify({ iat, exp: iat + 301 })).toBeNull();
  });

  it("refuses a token without iat or exp", async () => {
    expect(await verify({ iat: null, exp: now() + 60 })).toBeNull();
    expect(await verify({ exp: null })).toBeNull();
  });

  it("refuses an expired token beyond 5 s of clock skew, and accepts one within it", async () => {
    expect(await verify({ iat: now() - 200, exp: now() - 5 })).toBeNull();
    expect(await verify({ iat: now() - 200, exp: now() - 3 })).toEqual({ serviceId: "billing" });
  });

  it("refuses a token dated ahead beyond 5 s of clock skew, which would otherwise outlive 5 minutes", async () => {
    const year = 365 * 24 * 3600;
    expect(await verify({ iat: now() + year, exp: now() + year + 300 })).toBeNull();
    expect(await verify({ iat: now() + 7, exp: now() + 7 + 300 })).toBeNull();
    expect(await verify({ iat: now() + 3, exp: now() + 3 + 300 })).toEqual({ serviceId: "billing" });
  });

  it("judges lifetimes by the injected clock", async () => {
    const { clock, resolvers: later } = resolversAt();
    const token = await iam.mintServiceToken();
    expect(await later.serviceToken(token)).toEqual({ serviceId: "billing" });
    clock.advance(303_000); // 300 s lifetime + less than the 5 s of skew
    expect(await later.serviceToken(token)).toEqual({ serviceId: "billing" });
    clock.advance(4_000);
    expect(await later.serviceToken(token)).toBeNull();
  });

  it("accepts tokens of both keys while IAM publishes an old and a new key (rotation)", async () => {
    const rotating = await startFakeIam();
    try {
      rotating.serviceSecrets.set(SERVICE, SECRET);
      const before = await rotating.mintServiceToken();
      await rotating.rotateKey();
      const after = await rotating.mintServiceToken();
      expect(decodeJwt(after)).toBeTruthy();
      const { resolvers: fresh } = resolversAt(rotating.url);
      expect(await fresh.serviceToken(before)).toEqual({ serviceId: "billing" });
      expect(await fresh.serviceToken(after)).toEqual({ serviceId: "billing" });
    } finally {
      await rotating.close();
    }
  });

  it("answers 503 UPSTREAM_UNAVAILABLE when IAM's key set cannot be fetched, asking the client to come back in 5 s", async () => {
    const { resolvers: cut } = resolversAt(await deadUrl());
    const err = await failureOf(cut.serviceToken(await iam.mintServiceToken()));
    expect(err).toMatchObject({ status: 503, code: "UPSTREAM_UNAVAILABLE", message: "IAM's key set is unreachable", headers: { "retry-after": "5" } });
  });

  it("answers 503 with IAM's Retry-After when IAM answers its key set with a 5xx: IAM is unavailable, the token is not wrong", async () => {
    const { resolvers: fresh } = resolversAt();
    const token = await iam.mintServiceToken();
    iam.failWith = 503;
    iam.failRetryAfter = "12";
    try {
      const err = await failureOf(fresh.serviceToken(token));
      expect(err).toMatchObject({ status: 503, code: "UPSTREAM_UNAVAILABLE", message: "IAM's key set is unavailable (it answered 503); try again shortly", headers: { "retry-after": "12" } });
    } finally {
      iam.failWith = undefined;
      iam.failRetryAfter = undefined;
    }
    expect(await fresh.serviceToken(token)).toEqual({ serviceId: "billing" });
  });
});

describe("a new signing key published after the key set was fetched", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("is picked up once the 5 s refetch cooldown has passed", async () => {
    const rotating = await startFakeIam();
    try {
      // only Date is faked: fetch and its timers stay real
      vi.useFakeTimers({ toFake: ["Date"], now: Date.now() });
      const tokens = new ServiceTokenClient(rotating.url, { serviceId: SERVICE, secret: SECRET });
      const resolvers = remoteResolvers({ iamUrl: rotating.url, serviceId: SERVICE, tokens });
      expect(await resolvers.serviceToken(await rotating.mintServiceToken())).toEqual({ serviceId: "billing" });
      await rotating.rotateKey();
      vi.setSystemTime(Date.now() + 6_000);
      expect(await resolvers.serviceToken(await rotating.mintServiceToken())).toEqual({ serviceId: "billing" });
      expect(rotating.calls["GET /api/auth/jwks"]).toBe(2);
    } finally {
      await rotating.close();
    }
  });
});

describe("session tokens and API keys", () => {
  it("resolves a session token through IAM, authenticated with a service token for IAM", async () => {
    const { resolvers } = resolversAt();
    const token = fresh("session");
    const who = principal({ userId: "usr_1", sessionId: "ses_1" });
    iam.sessions.set(token, who);
    expect(await resolvers.session(token)).toEqual(who);
    const call = iam.received.filter((r) => r.route === "POST /api/validate-session").at(-1)!;
    expect(call.body).toEqual({ token });
    const bearer = call.authorization!.replace(/^Bearer /, "");
    expect(decodeJwt(bearer)).toMatchObject({ sub: SERVICE, aud: "iam", iss: iam.url });
  });

  it.each([
    ["two-factor", { code: "TWO_FACTOR_REQUIRED" as const, location: "/account/two-factor?required=1" }, "/account/two-factor?required=1"],
    ["single sign-on", { code: "SSO_REQUIRED" as const, location: "/sign-in/sso?organization=acme&next=%2Faccount" }, "/sign-in/sso?organization=acme&next=%2Faccount"],
  ])("keeps the restriction of a session held back by a %s policy, its page an absolute IAM address, from the cache too", async (_, given, path) => {
    const { resolvers } = resolversAt();
    const token = fresh("held-back");
    const who = principal({ orgId: null, orgType: null, platformId: null, platformStatus: null, role: null, permissions: [], restriction: { ...given, orgId: "org_policy" } });
    iam.sessions.set(token, who);
    const expected = { ...who, restriction: { code: given.code, orgId: "org_policy", location: `${iam.url}${path}` } };
    expect(await resolvers.session(token)).toEqual(expected);
    const asked = iam.calls["POST /api/validate-session"];
    expect(await resolvers.session(token)).toEqual(expected);
    expect(iam.calls["POST /api/validate-session"]).toBe(asked);
    expect(resolvers.known!.session(token)).toEqual(expected);
  });

  it("resolves an API key through IAM", async () => {
    const { resolvers } = resolversAt();
    const key = fresh("key");
    const who = principal({ type: "apikey", apiKeyId: "key_1", sessionId: null });
    iam.apiKeys.set(key, who);
    expect(await resolvers.apiKey(key)).toEqual(who);
    expect(iam.received.filter((r) => r.route === "POST /api/core/apikey/validate").at(-1)!.body).toEqual({ key });
  });

  it("sends the address of the client that presented the key, so IAM limits wrong keys per address", async () => {
    const { resolvers } = resolversAt();
    const key = fresh("key");
    iam.apiKeys.set(key, principal({ type: "apikey", apiKeyId: "key_2", sessionId: null }));
    await resolvers.apiKey(key, { ip: "203.0.113.7" });
    expect(iam.received.filter((r) => r.route === "POST /api/core/apikey/validate").at(-1)!.body).toEqual({ key, clientIp: "203.0.113.7" });
  });

  it("sends the request id along, so IAM logs its side of the check under the same id", async () => {
    const { resolvers } = resolversAt();
    const token = fresh("session");
    iam.sessions.set(token, principal());
    await resolvers.session(token, { ip: "203.0.113.9", requestId: "req-from-client" });
    expect(iam.received.filter((r) => r.route === "POST /api/validate-session").at(-1)).toMatchObject({ requestId: "req-from-client", body: { token } });
    const key = fresh("key");
    iam.apiKeys.set(key, principal({ type: "apikey" }));
    await resolvers.apiKey(key, { ip: "203.0.113.9", requestId: "req-with-key" });
    expect(iam.received.filter((r) => r.route === "POST /api/core/apikey/validate").at(-1)!.requestId).toBe("req-with-key");
  });

  it("passes IAM's 429 on as 429 RATE_LIMITED with IAM's Retry-After: that client is over its limit, IAM is not down", async () => {
    const { resolvers } = resolversAt();
    await resolvers.session(fresh("warm-up")); // holds a service token now
    iam.failWith = 429;
    try {
      const failure = await failureOf(resolvers.apiKey(fresh("wrong"), { ip: "203.0.113.8" }));
      expect(failure).toMatchObject({ status: 429, code: "RATE_LIMITED" });
      expect((failure as { headers?: Record<string, string> }).headers).toEqual({ "retry-after": "17" });
    } finally {
      iam.failWith = undefined;
    }
  });

  it("answers null for a token or key IAM does not know", async () => {
    const { resolvers } = resolversAt();
    expect(await resolvers.session(fresh("nobody"))).toBeNull();
    expect(await resolvers.apiKey(fresh("nokey"))).toBeNull();
  });

  it("caches a positive answer for 2.5 s: a revoked session works until then, and not after", async () => {
    const { clock, resolvers } = resolversAt();
    const token = fresh("session");
    iam.sessions.set(token, principal());
    const before = iam.calls["POST /api/validate-session"] ?? 0;
    expect(await resolvers.session(token)).not.toBeNull();
    iam.sessions.delete(token); // revoked at IAM
    clock.advance(POSITIVE_TTL_MS - 1);
    expect(await resolvers.session(token)).not.toBeNull();
    expect(iam.calls["POST /api/validate-session"]).toBe(before + 1);
    clock.advance(1);
    expect(await resolvers.session(token)).toBeNull();
    expect(iam.calls["POST /api/validate-session"]).toBe(before + 2);
  });

  it("caches a negative answer for 1 s: a new session is honoured within a second", async () => {
    const { clock, resolvers } = resolversAt();
    const token = fresh("session");
    const before = iam.calls["POST /api/validate-session"] ?? 0;
    expect(await resolvers.session(token)).toBeNull();
    iam.sessions.set(token, principal());
    clock.advance(999);
    expect(await resolvers.session(token)).toBeNull();
    expect(iam.calls["POST /api/validate-session"]).toBe(before + 1);
    clock.advance(1);
    expect(await resolvers.session(token)).not.toBeNull();
    expect(iam.calls["POST /api/validate-session"]).toBe(before + 2);
  });

  it("caches API keys the same way, apart from session tokens", async () => {
    const { clock, resolvers } = resolversAt();
    const same = fresh("same-string");
    iam.apiKeys.set(same, principal({ type: "apikey" }));
    const keysBefore = iam.calls["POST /api/core/apikey/validate"] ?? 0;
    const sessionsBefore = iam.calls["POST /api/validate-session"] ?? 0;
    expect(await resolvers.apiKey(same)).not.toBeNull();
    expect(await resolvers.session(same)).toBeNull();
    clock.advance(POSITIVE_TTL_MS - 1);
    expect(await resolvers.apiKey(same)).not.toBeNull();
    expect(iam.calls["POST /api/core/apikey/validate"]).toBe(keysBefore + 1);
    expect(iam.calls["POST /api/validate-session"]).toBe(sessionsBefore + 1);
    clock.advance(1);
    await resolvers.apiKey(same);
    expect(iam.calls["POST /api/core/apikey/validate"]).toBe(keysBefore + 2);
  });

  it("asks IAM once for a credential that many requests present at the same moment", async () => {
    const { clock, resolvers } = resolversAt();
    const token = fresh("session");
    iam.sessions.set(token, principal());
    await resolvers.session(fresh("warm-up")); // holds a service token now
    const before = iam.calls["POST /api/validate-session"] ?? 0;
    const answers = await Promise.all(Array.from({ length: 20 }, () => resolvers.session(token)));
    expect(answers.every((a) => a?.userId === principal().userId)).toBe(true);
    expect(iam.calls["POST /api/validate-session"]).toBe(before + 1);
    // expired: again one question for the crowd
    clock.advance(POSITIVE_TTL_MS);
    await Promise.all(Array.from({ length: 20 }, () => resolvers.session(token)));
    expect(iam.calls["POST /api/validate-session"]).toBe(before + 2);
    // wrong API keys from two client addresses are two questions: each counts against its own client
    const keysBefore = iam.calls["POST /api/core/apikey/validate"] ?? 0;
    const wrong = fresh("wrong-key");
    await Promise.all([0, 1, 2, 3].map((i) => resolvers.apiKey(wrong, { ip: `10.0.0.${i % 2}`, requestId: `r${i}` })));
    expect(iam.calls["POST /api/core/apikey/validate"]).toBe(keysBefore + 2);
  });

  it("asks once more when IAM's connection is reset, and not when IAM does not answer in time", async () => {
    const token = fresh("session");
    iam.sessions.set(token, principal());
    const calls: string[] = [];
    const resetOnce = (failure: () => Error) => {
      let failed = false;
      return (async (input: string | URL | Request, init?: RequestInit) => {
        calls.push(String(input));
        if (String(input).endsWith("/api/validate-session") && !failed) {
          failed = true;
          throw failure();
        }
        return fetch(input, init);
      }) as typeof fetch;
    };
    const build = (doFetch: typeof fetch) =>
      remoteResolvers({ iamUrl: iam.url, serviceId: SERVICE, tokens: new ServiceTokenClient(iam.url, { serviceId: SERVICE, secret: SECRET }), fetch: doFetch });
    // a kept-alive connection closed by IAM as it was reused: the answer comes on the second try
    const reset = () => new TypeError("fetch failed", { cause: Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }) });
    expect(await build(resetOnce(reset)).session(token)).not.toBeNull();
    expect(calls.filter((c) => c.endsWith("/api/validate-session"))).toHaveLength(2);
    // IAM too slow: no second try, 503 at once
    calls.length = 0;
    const timeout = () => new DOMException("The operation was aborted due to timeout", "TimeoutError");
    expect(await failureOf(build(resetOnce(timeout)).session(token))).toMatchObject({ status: 503, code: "UPSTREAM_UNAVAILABLE" });
    expect(calls.filter((c) => c.endsWith("/api/validate-session"))).toHaveLength(1);
  });

  it("answers 503 UPSTREAM_UNAVAILABLE when IAM is unreachable, saying so and asking the client to come back in 5 s", async () => {
    const { resolvers } = resolversAt(await deadUrl());
    const unreachable = { status: 503, code: "UPSTREAM_UNAVAILABLE", message: "IAM is unreachable", headers: { "retry-after": "5" } };
    expect(await failureOf(resolvers.session("any"))).toMatchObject(unreachable);
    expect(await failureOf(resolvers.apiKey("any"))).toMatchObject(unreachable);
  });

  it("answers 503 when IAM fails, and caches no failure: the next call after recovery succeeds", async () => {
    const { resolvers } = resolversAt();
    const token = fresh("session");
    iam.sessions.set(token, principal());
    await resolvers.session(fresh("warm-up")); // holds a service token now
    iam.failWith = 500;
    try {
      expect(await failureOf(resolvers.session(token))).toMatchObject({ status: 503, message: "IAM is unavailable (it answered 500); try again shortly", headers: { "retry-after": "5" } });
    } finally {
      iam.failWith = undefined;
    }
    expect(await resolvers.session(token)).not.toBeNull();
  });

  it("answers IAM's own 503 as IAM unavailable, not unreachable, with IAM's Retry-After (5 s when it sent none)", async () => {
    const { resolvers } = resolversAt();
    await resolvers.session(fresh("warm-up")); // holds a service token now
    iam.failWith = 503;
    try {
      iam.failRetryAfter = "17";
      for (const check of [resolvers.session(fresh("session")), resolvers.apiKey(fresh("key"), { ip: "203.0.113.5" })]) {
        const failure = await failureOf(check);
        expect(failure).toMatchObject({ status: 503, code: "UPSTREAM_UNAVAILABLE", message: "IAM is unavailable (it answered 503); try again shortly", headers: { "retry-after": "17" } });
        expect(failure.message).not.toContain("unreachable");
      }
      iam.failRetryAfter = undefined;
      expect(await failureOf(resolvers.session(fresh("session")))).toMatchObject({ status: 503, headers: { "retry-after": "5" } });
    } finally {
      iam.failWith = undefined;
      iam.failRetryAfter = undefined;
    }
  });

  it("asks IAM in the request's trace: the check and the service token it needs carry its trace id, each with a span id of its own", async () => {
    const { resolvers } = resolversAt();
    const token = fresh("session");
    iam.sessions.set(token, principal());
    const request = idsOnlyTracing.serve("GET", undefined, undefined);
    const before = iam.received.length;
    await resolvers.session(token, { ip: "203.0.113.9", requestId: "req-traced", trace: request });
    const calls = iam.received.slice(before);
    expect(calls.map((c) => c.route)).toEqual(["POST /api/core/service-token", "POST /api/validate-session"]);
    const parents = calls.map((c) => parseTraceparent(c.traceparent));
    for (const parent of parents) expect(parent).toMatchObject({ traceId: request.traceId, sampled: true });
    expect(new Set([request.spanId, ...parents.map((p) => p!.parentId)]).size).toBe(3);
  });

  it("asked outside any request, a check starts a trace of its own", async () => {
    const { resolvers } = resolversAt();
    const before = iam.received.length;
    await resolvers.session(fresh("session"));
    for (const call of iam.received.slice(before)) expect(parseTraceparent(call.traceparent)).not.toBeNull();
  });

  it("answers 502 when IAM's answer breaks the contract, never a 500", async () => {
    const { resolvers } = resolversAt();
    for (const answer of [{ valid: true, principal: { userId: 42 } }, { hello: "world" }, { valid: "yes" }]) {
      iam.validateAnswer = answer;
      try {
        expect(await failureOf(resolvers.session(fresh("session")))).toMatchObject({ status: 502, code: "UPSTREAM_UNAVAILABLE" });
      } finally {
        iam.validateAnswer = undefined;
      }
    }
  });
});

describe("ServiceTokenClient", () => {
  let client: ServiceTokenClient;
  beforeEach(() => {
    iam.tokenLifetime = 300;
    client = new ServiceTokenClient(`${iam.url}/`, { serviceId: SERVICE, secret: SECRET });
  });
  afterEach(() => {
    iam.tokenLifetime = 300;
  });
  const tokenCalls = () => iam.calls["POST /api/core/service-token"] ?? 0;

  it("authenticates with Basic base64(serviceId:secret) and asks for a token toward the target", async () => {
    const token = await client.tokenFor("billing");
    const call = iam.received.filter((r) => r.route === "POST /api/core/service-token").at(-1)!;
    expect(call.authorization).toBe(`Basic ${Buffer.from(`${SERVICE}:${SECRET}`).toString("base64")}`);
    expect(call.body).toEqual({ serviceId: SERVICE, targetService: "billing" });
    expect(decodeJwt(token)).toMatchObject({ sub: SERVICE, aud: "billing", typ: "service" });
  });

  it("reuses a token until shortly before it expires", async () => {
    const before = tokenCalls();
    const first = await client.tokenFor("iam");
    expect(await client.tokenFor("iam")).toBe(first);
    expect(await client.tokenFor("iam")).toBe(first);
    expect(tokenCalls()).toBe(before + 1);
  });

  it("holds one token per target service", async () => {
    const before = tokenCalls();
    const forIam = await client.tokenFor("iam");
    const forBilling = await client.tokenFor("billing");
    expect(decodeJwt(forIam).aud).toBe("iam");
    expect(decodeJwt(forBilling).aud).toBe("billing");
    expect(tokenCalls()).toBe(before + 2);
  });

  it("asks IAM once for concurrent requests of the same token", async () => {
    const before = tokenCalls();
    const tokens = await Promise.all(Array.from({ length: 5 }, () => client.tokenFor("iam")));
    expect(new Set(tokens).size).toBe(1);
    expect(tokenCalls()).toBe(before + 1);
  });

  it("renews a token that has 30 s or less left, and keeps one with more", async () => {
    iam.tokenLifetime = 30;
    const before = tokenCalls();
    await client.tokenFor("iam");
    await client.tokenFor("iam");
    expect(tokenCalls()).toBe(before + 2);
    iam.tokenLifetime = 31;
    await client.tokenFor("billing");
    await client.tokenFor("billing");
    expect(tokenCalls()).toBe(before + 3);
  });

  it("answers 503 when IAM refuses its credential", async () => {
    const wrong = new ServiceTokenClient(iam.url, { serviceId: SERVICE, secret: "not-the-secret" });
    expect(await failureOf(wrong.tokenFor("iam"))).toMatchObject({ status: 503, code: "UPSTREAM_UNAVAILABLE", message: "IAM refused a service token (401)", headers: { "retry-after": "5" } });
  });

  it("answers 503 when IAM is unreachable, with Retry-After", async () => {
    const cut = new ServiceTokenClient(await deadUrl(), { serviceId: SERVICE, secret: SECRET });
    expect(await failureOf(cut.tokenFor("iam"))).toMatchObject({ status: 503, message: "IAM is unreachable", headers: { "retry-after": "5" } });
  });

  it("answers 503 naming IAM unavailable, with IAM's Retry-After, when IAM answers 503", async () => {
    iam.failWith = 503;
    iam.failRetryAfter = "9";
    try {
      expect(await failureOf(client.tokenFor("iam"))).toMatchObject({ status: 503, code: "UPSTREAM_UNAVAILABLE", message: "IAM is unavailable (it answered 503); try again shortly", headers: { "retry-after": "9" } });
    } finally {
      iam.failWith = undefined;
      iam.failRetryAfter = undefined;
    }
  });
});
