import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServiceApp, silentLogger } from "@core/kit";
import {
  browserCallerOf,
  callerOf,
  guardCaller,
  settledCallerOf,
  MAX_CREDENTIAL_LENGTH,
  remoteResolvers,
  requireCaller,
  ServiceTokenClient,
  type CredentialResolvers,
  type Principal,
} from "@core/service-auth";
import { deadUrl, principal, startFakeIam, type FakeIam } from "./support/fake-iam.js";

const SERVICE = "platform-registry";

/** A service on the kit whose one route answers who is calling. */
function appWith(resolvers: CredentialResolvers) {
  const app = createServiceApp({ service: SERVICE, title: "t", logger: silentLogger() });
  app.get("/who", async (c) => c.json(await requireCaller(c, resolvers)));
  app.get("/maybe", async (c) => c.json({ caller: await callerOf(c, resolvers) }));
  return app;
}

function resolversFor(iamUrl: string) {
  const tokens = new ServiceTokenClient(iamUrl, { serviceId: SERVICE, secret: "s3cret" });
  return remoteResolvers({ iamUrl, serviceId: SERVICE, tokens });
}

let iam: FakeIam;
let app: ReturnType<typeof appWith>;
const member = principal({ userId: "usr_m", email: "m@example.com" });
const keyHolder = principal({ type: "apikey", userId: "usr_k", apiKeyId: "key_1", sessionId: null });

beforeAll(async () => {
  iam = await startFakeIam();
  iam.serviceSecrets.set(SERVICE, "s3cret");
  iam.sessions.set("session-token-1", member);
  iam.apiKeys.set("raw-api-key-1", keyHolder);
  app = appWith(resolversFor(iam.url));
});
afterAll(async () => {
  await iam.close();
});

const who = async (headers: Record<string, string>) => {
  const res = await app.request("/who", { headers });
  return { status: res.status, body: (await res.json()) as { kind?: string; principal?: Principal; serviceId?: string; error?: { code: string; message: string } } };
};

describe("credential middleware", () => {
  it("answers 401 UNAUTHENTICATED when the request carries no credential", async () => {
    expect(await who({})).toEqual({
      status: 401,
      body: { error: { code: "UNAUTHENTICATED", message: "Authentication required", requestId: expect.any(String), details: null } },
    });
  });

  it("reads a request without a credential as no caller where one is optional", async () => {
    const res = await app.request("/maybe");
    expect(await res.json()).toEqual({ caller: null });
  });

  it("takes a Bearer session token to IAM and answers its principal", async () => {
    expect(await who({ authorization: "Bearer session-token-1" })).toEqual({ status: 200, body: { kind: "principal", principal: member } });
    expect(await who({ authorization: "bearer   session-token-1" })).toMatchObject({ status: 200 });
  });

  it("takes an x-api-key to IAM and answers its principal, ahead of any bearer token", async () => {
    expect(await who({ "x-api-key": "raw-api-key-1" })).toEqual({ status: 200, body: { kind: "principal", principal: keyHolder } });
    expect(await who({ "x-api-key": "raw-api-key-1", authorization: "Bearer session-token-1" })).toMatchObject({
      body: { principal: { userId: "usr_k" } },
    });
  });

  it("verifies a service token locally and answers the calling service", async () => {
    const token = await iam.mintServiceToken({ sub: "iam" });
    const before = iam.calls["POST /api/validate-session"] ?? 0;
    expect(await who({ authorization: `Bearer ${token}` })).toEqual({ status: 200, body: { kind: "service", serviceId: "iam" } });
    expect(iam.calls["POST /api/validate-session"] ?? 0).toBe(before);
  });

  it("answers 401 for a credential that is present but wrong, never treating it as none", async () => {
    expect(await who({ authorization: "Bearer no-such-session" })).toMatchObject({
      status: 401,
      body: { error: { code: "UNAUTHENTICATED", message: "Invalid or expired session" } },
    });
    expect(await who({ "x-api-key": "no-such-key" })).toMatchObject({ status: 401, body: { error: { message: "Invalid API key" } } });
    const wrongAudience = await iam.mintServiceToken({ aud: "billing" });
    expect(await who({ authorization: `Bearer ${wrongAudience}` })).toMatchObject({
      status: 401,
      body: { error: { message: "Invalid service token" } },
    });
    const res = await app.request("/maybe", { headers: { authorization: "Bearer no-such-session" } });
    expect(res.status).toBe(401);
  });

  it("answers 401 for an Authorization header that is not a Bearer token", async () => {
    expect((await who({ authorization: "Basic dXNlcjpwYXNz" })).status).toBe(401);
    expect((await who({ authorization: "Bearer" })).status).toBe(401);
  });

  it(`answers 401 for a session token or API key over ${MAX_CREDENTIAL_LENGTH} characters without asking IAM, which would refuse it with 400`, async () => {
    const asked = () => (iam.calls["POST /api/validate-session"] ?? 0) + (iam.calls["POST /api/core/apikey/validate"] ?? 0);
    const before = asked();
    const long = "x".repeat(MAX_CREDENTIAL_LENGTH + 1);
    expect(await who({ authorization: `Bearer ${long}` })).toMatchObject({ status: 401, body: { error: { code: "UNAUTHENTICATED" } } });
    expect(await who({ "x-api-key": long })).toMatchObject({ status: 401, body: { error: { code: "UNAUTHENTICATED" } } });
    expect(await who({ "x-api-key": "k".repeat(4096) })).toMatchObject({ status: 401 });
    expect(asked()).toBe(before);
    // at the limit the credential is asked about as any other
    expect((await who({ authorization: `Bearer ${"y".repeat(MAX_CREDENTIAL_LENGTH)}` })).status).toBe(401);
    expect(asked()).toBe(before + 1);
  });

  it("answers 503 UPSTREAM_UNAVAILABLE when IAM is down", async () => {
    const cut = appWith(resolversFor(await deadUrl()));
    const res = await cut.request("/who", { headers: { authorization: "Bearer session-token-1" } });
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("UPSTREAM_UNAVAILABLE");
    const jwt = await cut.request("/who", { headers: { authorization: `Bearer ${await iam.mintServiceToken()}` } });
    expect(jwt.status).toBe(503);
  });

  it("resolves the caller once per request however often a handler asks", async () => {
    let lookups = 0;
    const counting: CredentialResolvers = {
      session: async () => {
        lookups++;
        return member;
      },
      apiKey: async () => null,
      serviceToken: async () => null,
    };
    const local = createServiceApp({ service: SERVICE, title: "t", logger: silentLogger() });
    local.get("/twice", async (c) => {
      await requireCaller(c, counting);
      await callerOf(c, counting);
      return c.json({ ok: true });
    });
    await local.request("/twice", { headers: { authorization: "Bearer t" } });
    expect(lookups).toBe(1);
  });
});

describe("credentials known already (ADR 0005)", () => {
  const asked: string[] = [];
  const knowing: CredentialResolvers = {
    session: async (token) => (asked.push(`session:${token}`), token === "known-session" || token === "unknown-valid" ? member : null),
    apiKey: async (key) => (asked.push(`apiKey:${key}`), keyHolder),
    serviceToken: async (jwt) => (asked.push(`serviceToken:${jwt.slice(0, 8)}`), { serviceId: "billing" }),
    known: {
      session: (token) => (token === "known-session" ? member : undefined),
      serviceToken: (jwt) => (jwt === KNOWN_JWT ? "billing" : undefined),
    },
  };
  const KNOWN_JWT = "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJiaWxsaW5nIn0.c2ln";
  const local = createServiceApp({ service: SERVICE, title: "t", logger: silentLogger() });
  // what the route sees right after asking, before any wait
  local.get("/settled-at-once", (c) => {
    const pending = callerOf(c, knowing);
    const settled = settledCallerOf(c);
    return pending.then((caller) => c.json({ settled: settled ?? "not yet", caller }));
  });
  const ask = async (headers: Record<string, string>) => {
    asked.length = 0;
    const res = await local.request("/settled-at-once", { headers });
    return (await res.json()) as { settled: unknown; caller: unknown };
  };

  it("settles a known session at once, without asking", async () => {
    const answer = await ask({ authorization: "Bearer known-session" });
    expect(answer.settled).toEqual({ kind: "principal", principal: member });
    expect(answer.caller).toEqual(answer.settled);
    expect(asked).toEqual([]);
  });

  it("settles a known service token at once, without asking", async () => {
    const answer = await ask({ authorization: `Bearer ${KNOWN_JWT}` });
    expect(answer.settled).toEqual({ kind: "service", serviceId: "billing" });
    expect(asked).toEqual([]);
  });

  it("asks about a credential it does not know, and only then settles it", async () => {
    const answer = await ask({ authorization: "Bearer unknown-valid" });
    expect(answer.settled).toBe("not yet");
    expect(answer.caller).toEqual({ kind: "principal", principal: member });
    expect(asked).toEqual(["session:unknown-valid"]);
  });

  it("always asks about an API key, even beside a known bearer (IAM counts keys per client)", async () => {
    const answer = await ask({ authorization: "Bearer known-session", "x-api-key": "some-key" });
    expect(answer.settled).toBe("not yet");
    expect(answer.caller).toEqual({ kind: "principal", principal: keyHolder });
    expect(asked).toEqual(["apiKey:some-key"]);
  });

  it("still refuses a credential it knows nothing of and IAM refuses: 401", async () => {
    const res = await local.request("/settled-at-once", { headers: { authorization: "Bearer wrong" } });
    expect(res.status).toBe(401);
  });

  describe("guardCaller, the registries' check as the kit's guard", () => {
    // whether the guard handed the kit something to wait for
    let waited: boolean | null = null;
    const guarded = createServiceApp({
      service: SERVICE,
      title: "t",
      logger: silentLogger(),
      guard: (c) => {
        const pending = guardCaller(c, knowing);
        waited = pending !== undefined;
        return pending;
      },
    });
    guarded.get("/who", async (c) => c.json(await requireCaller(c, knowing)));
    const call = async (headers: Record<string, string>) => {
      asked.length = 0;
      waited = null;
      const res = await guarded.request("/who", { headers });
      return { status: res.status, waited, asked: [...asked], body: (await res.json()) as any };
    };

    it("lets a known session or service token through at once, asking nothing", async () => {
      expect(await call({ authorization: "Bearer known-session" })).toEqual({ status: 200, waited: false, asked: [], body: { kind: "principal", principal: member } });
      expect(await call({ authorization: `Bearer ${KNOWN_JWT}` })).toMatchObject({ status: 200, waited: false, asked: [], body: { kind: "service", serviceId: "billing" } });
    });

    it("asks about a credential it does not know, and lets a valid one through after the wait", async () => {
      expect(await call({ authorization: "Bearer unknown-valid" })).toMatchObject({ status: 200, waited: true, asked: ["session:unknown-valid"] });
    });

    it("refuses a request without a credential with 401 before the route, and a wrong one after asking", async () => {
      expect(await call({})).toMatchObject({ status: 401, waited: true, asked: [], body: { error: { code: "UNAUTHENTICATED" } } });
      expect(await call({ authorization: "Bearer wrong" })).toMatchObject({ status: 401, waited: true, asked: ["session:wrong"] });
    });
  });
});

describe("IAM's session cookie on pages a browser opens (browserCallerOf, DESIGN §6.11)", () => {
  function pageApp() {
    const resolvers = resolversFor(iam.url);
    const page = createServiceApp({ service: SERVICE, title: "t", logger: silentLogger() });
    const handler = async (c: Parameters<typeof requireCaller>[0]) => {
      const browser = await browserCallerOf(c, resolvers);
      // the route's own check afterwards answers the same caller
      const again = browser ? await requireCaller(c, resolvers) : null;
      return c.json({ browser, same: browser === again || again === null });
    };
    page.get("/page", handler);
    page.post("/page", handler);
    return page;
  }
  const cookie = (value: string) => ({ cookie: `better-auth.session_token=${encodeURIComponent(value)}` });

  it("resolves the session token in the cookie (token.signature) with IAM, on GET only, as the request's caller", async () => {
    const page = pageApp();
    const res = await page.request("/page", { headers: cookie("session-token-1.c2lnbmF0dXJl+/=") });
    expect(await res.json()).toEqual({ browser: { kind: "principal", principal: member }, same: true });
    const secure = await page.request("/page", { headers: { cookie: `__Secure-better-auth.session_token=session-token-1.sig` } });
    expect(((await secure.json()) as { browser: { principal: Principal } }).browser.principal.userId).toBe("usr_m");
    // a cookie never authorizes a write
    const write = await page.request("/page", { method: "POST", headers: cookie("session-token-1.sig") });
    expect(await write.json()).toEqual({ browser: null, same: true });
  });

  it("takes an unknown, malformed or overlong cookie as no credential, and an explicit credential first", async () => {
    const page = pageApp();
    for (const value of ["unknown-token.sig", "bad token!.sig", `${"a".repeat(MAX_CREDENTIAL_LENGTH + 1)}.sig`, ""]) {
      expect(await (await page.request("/page", { headers: cookie(value) })).json(), value.slice(0, 20)).toEqual({ browser: null, same: true });
    }
    const bearer = await page.request("/page", { headers: { ...cookie("unknown-token.sig"), authorization: "Bearer session-token-1" } });
    expect(((await bearer.json()) as { browser: { principal: Principal } }).browser.principal).toEqual(member);
    expect((await page.request("/page", { headers: { ...cookie("session-token-1.sig"), authorization: "Bearer wrong" } })).status).toBe(401);
  });
});
