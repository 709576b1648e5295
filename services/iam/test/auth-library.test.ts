import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { listen, type RunningServer } from "@core/kit";
import { rowsOf, testDatabases, type DatabaseHandle } from "@core/storage";
import {
  call,
  createIam,
  operator,
  PASSWORD,
  serviceToken,
  sessionCookieOf,
  signIn,
  signUp,
  uniqueEmail,
  type Iam,
} from "./support/harness.js";

/** The attributes of the session cookie in a `set-cookie` header, lower-cased. */
function cookieAttributes(setCookie: string | null) {
  const [pair, ...attributes] = (setCookie ?? "").split(";").map((part) => part.trim());
  const [name, value] = [pair!.slice(0, pair!.indexOf("=")), pair!.slice(pair!.indexOf("=") + 1)];
  return { name, value, attributes: attributes.map((a) => a.toLowerCase()) };
}

const post = (iam: Iam, path: string, body: unknown, headers: Record<string, string> = {}) =>
  call(iam, "POST", path, { headers: { origin: iam.origin, ...headers }, body });

describe.each(testDatabases())("auth library routes on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let service: string;

  beforeAll(async () => {
    database = await open();
    iam = await createIam(database);
    service = await serviceToken(iam);
  });
  afterAll(async () => {
    await database?.close();
  });

  const validate = (token: string) => call(iam, "POST", "/api/validate-session", { token: service, body: { token } });

  describe("sign-up", () => {
    it("signs up with email and password, answering a session token and the user, and setting the session cookie", async () => {
      const email = uniqueEmail("new");
      const r = await post(iam, "/api/auth/sign-up/email", { email, password: PASSWORD, name: "New Person" });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ token: expect.any(String), user: { id: expect.any(String), email, name: "New Person" } });
      expect(cookieAttributes(r.headers.get("set-cookie")).name).toBe("better-auth.session_token");
      expect((await validate(r.body.token)).body.principal).toMatchObject({ userId: r.body.user.id, email });
    });

    it("refuses a second sign-up with an email in use, keeping the first account's password", async () => {
      const ada = await signUp(iam);
      const r = await post(iam, "/api/auth/sign-up/email", { email: ada.email, password: "another-password-1", name: "Impostor" });
      expect(r.status).toBe(422);
      expect(r.body.code).toBe("USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL");
      expect((await signIn(iam, ada)).userId).toBe(ada.userId);
    });

    it("takes passwords of 8 and of 128 characters, and refuses 7 and 129", async () => {
      for (const [length, status] of [[8, 200], [128, 200], [7, 400], [129, 400]] as const) {
        const r = await post(iam, "/api/auth/sign-up/email", { email: uniqueEmail(`pw${length}`), password: "p".repeat(length), name: "P" });
        expect(r.status, `password of ${length}`).toBe(status);
      }
    });

    it("refuses an invalid email with 400", async () => {
      const r = await post(iam, "/api/auth/sign-up/email", { email: "not-an-email", password: PASSWORD, name: "X" });
      expect(r.status).toBe(400);
    });
  });

  describe("what IAM adds around the library", () => {
    let operatorToken: string;
    beforeAll(async () => {
      operatorToken = (await operator(iam)).token;
    });

    it.each([
      ["GET", "/api/auth/nope"],
      ["POST", "/api/auth/nope"],
      ["GET", "/api/auth/sign-in/email"],
      ["POST", "/api/auth/sign-in/social"],
      ["POST", "/api/auth/delete-user"],
      ["GET", "/api/auth/token"],
      ["GET", "/api/auth/reference"],
      ["GET", "/api/auth/open-api/generate-schema"],
    ])("answers %s %s, which the library does not serve, with the 404 envelope", async (method, path) => {
      const r = await call(iam, method, path, { headers: { origin: iam.origin }, body: method === "POST" ? {} : undefined });
      expect(r.status).toBe(404);
      expect(r.body.error).toMatchObject({ code: "NOT_FOUND", requestId: expect.any(String), details: null });
    });

    it("bounds the sign-up name as the profile does: 100 characters, not 101, and not empty", async () => {
      expect((await post(iam, "/api/auth/sign-up/email", { email: uniqueEmail("long"), password: PASSWORD, name: "n".repeat(100) })).status).toBe(200);
      for (const name of ["n".repeat(101), ""]) {
        const email = uniqueEmail("refused");
        const r = await post(iam, "/api/auth/sign-up/email", { email, password: PASSWORD, name });
        expect(r.status).toBe(400);
        expect(r.body.error).toMatchObject({ code: "VALIDATION_ERROR", details: [expect.objectContaining({ path: "name" })] });
        const taken = await post(iam, "/api/auth/sign-up/email", { email, password: PASSWORD, name: "Fine" });
        expect(taken.status, "the refused sign-up created nothing").toBe(200);
      }
    });

    it("prints nothing of the library's refusals to the console: they are answers, logged (structured) at debug", async () => {
      const printed: unknown[][] = [];
      const spies = (["log", "info", "warn", "error"] as const).map((method) => vi.spyOn(console, method).mockImplementation((...args) => void printed.push(args)));
      try {
        const ada = await signUp(iam);
        expect((await post(iam, "/api/auth/sign-in/email", { email: ada.email, password: "wrong-password-1" })).status).toBe(401);
        expect((await post(iam, "/api/auth/sign-in/magic-link", { email: ada.email, callbackURL: 42 })).status).toBe(400);
      } finally {
        for (const spy of spies) spy.mockRestore();
      }
      expect(printed.filter((args) => args.some((a) => String(a).includes("Better Auth")))).toEqual([]);
    });

    it("gives a refusal the library sends without a body the error envelope", async () => {
      const r = await call(iam, "POST", "/api/auth/organization/create", { headers: { origin: iam.origin }, body: { name: "x", slug: "x" } });
      expect(r.status).toBe(401);
      expect(r.body.error).toMatchObject({ code: "UNAUTHENTICATED", requestId: expect.any(String), details: null });
    });

    it.each([
      ["filterField=plt_x&filterValue=1", "filterField"],
      ["sortBy=nope", "sortBy"],
      ["offset=-1", "offset"],
      ["offset=1.5", "offset"],
      ["limit=0", "limit"],
      ["filterField=createdAt&filterValue=abc", "filterField"],
    ])("holds list-members' query to columns and numbers the database takes: %s is 400", async (query, field) => {
      const r = await call(iam, "GET", `/api/auth/organization/list-members?${query}`, { token: operatorToken });
      expect(r.status).toBe(400);
      expect(r.body.error).toMatchObject({ code: "VALIDATION_ERROR", details: [expect.objectContaining({ path: field })] });
    });

    it("holds api-key/list's sort to the key columns that exist: sortBy=nope is 400, sortBy=name works", async () => {
      const r = await call(iam, "GET", "/api/auth/api-key/list?sortBy=nope", { token: operatorToken });
      expect(r.status).toBe(400);
      expect(r.body.error.details).toEqual([expect.objectContaining({ path: "sortBy" })]);
      expect((await call(iam, "GET", "/api/auth/api-key/list?sortBy=name&sortDirection=desc", { token: operatorToken })).status).toBe(200);
    });

    it("answers list-members within the bounds", async () => {
      const r = await call(iam, "GET", "/api/auth/organization/list-members?limit=10&offset=0&sortBy=createdAt&filterField=role&filterValue=owner", { token: operatorToken });
      expect(r.status).toBe(200);
      expect(r.body.members).toHaveLength(1);
    });

    it("signs out a POST without any body (the body is optional), and answers a body that is not JSON with our 415 envelope", async () => {
      const ada = await signUp(iam);
      // over real HTTP, as a client sends it: no Content-Type, Content-Length 0
      const server = await listen(iam.app, 0, "127.0.0.1");
      try {
        const bare = await fetch(`${server.url}/api/auth/sign-out`, { method: "POST", headers: { authorization: `Bearer ${ada.token}` } });
        expect(bare.status).toBe(200);
        expect(await bare.json()).toEqual({ success: true });
      } finally {
        await server.close();
      }
      expect((await validate(ada.token)).body).toEqual({ valid: false });
      const bob = await signUp(iam);
      const typed = await call(iam, "POST", "/api/auth/sign-out", { token: bob.token, headers: { "content-type": "text/plain" }, body: "x" });
      expect(typed.status).toBe(415);
      expect(typed.body.error).toMatchObject({ code: "UNSUPPORTED_MEDIA_TYPE", requestId: expect.any(String) });
      expect((await validate(bob.token)).body.valid).toBe(true);
    });

    it.each([
      ["an object", { a: 1 }],
      ["a number", 7],
      ["a 2049-character address", `https://example.com/${"a".repeat(2029)}`],
    ])("refuses update-user's image as %s with 400 and keeps the image it had", async (_, image) => {
      const ada = await signUp(iam);
      expect((await call(iam, "POST", "/api/auth/update-user", { token: ada.token, headers: { origin: iam.origin }, body: { image: "https://example.com/a.png" } })).status).toBe(200);
      const r = await call(iam, "POST", "/api/auth/update-user", { token: ada.token, headers: { origin: iam.origin }, body: { image } });
      expect(r.status).toBe(400);
      expect(r.body.error).toMatchObject({ code: "VALIDATION_ERROR", details: [expect.objectContaining({ path: "image" })] });
      expect((await call(iam, "GET", "/api/auth/get-session", { token: ada.token })).body.user.image).toBe("https://example.com/a.png");
    });

    it("bounds the name of update-user too", async () => {
      const ada = await signUp(iam);
      const r = await call(iam, "POST", "/api/auth/update-user", { token: ada.token, headers: { origin: iam.origin }, body: { name: "n".repeat(101) } });
      expect(r.status).toBe(400);
      expect((await call(iam, "GET", "/api/core/session", { token: ada.token })).body.user.name).not.toBe("n".repeat(101));
    });

    it("describes what the library's routes answer: null where they answer null, a key's owner as referenceId", async () => {
      const doc = (await (await iam.app.request("/openapi.json")).json()) as { paths: Record<string, Record<string, any>>; components: { schemas: Record<string, any> } };
      const ada = await signUp(iam);
      // a session without an active organization
      const session = await call(iam, "GET", "/api/auth/get-session", { token: ada.token });
      expect(session.body.session.activeOrganizationId).toBeNull();
      expect(doc.components.schemas.AuthSession.properties.activeOrganizationId.type).toEqual(["string", "null"]);
      expect(doc.components.schemas.AuthListedSession.properties.activeOrganizationId.type).toEqual(["string", "null"]);
      // the organization routes answer a bare null without one
      for (const [method, path] of [["get", "/organization/get-full-organization"], ["get", "/organization/get-organization"], ["post", "/organization/set-active"]] as const) {
        const r = await call(iam, method.toUpperCase(), `/api/auth${path}`, { token: ada.token, headers: { origin: iam.origin }, body: method === "post" ? {} : undefined });
        expect([r.status, r.body], path).toEqual([200, null]);
        expect(doc.paths[`/api/auth${path}`]![method].responses["200"].content["application/json"].schema.anyOf, path).toContainEqual({ type: "null" });
      }
      expect(doc.components.schemas.AuthOrganization.properties.logo.type).toEqual(["string", "null"]);
      // API keys name their owner as referenceId, never userId
      expect((await call(iam, "POST", "/api/auth/api-key/create", { token: ada.token, headers: { origin: iam.origin }, body: { name: "k" } })).status).toBe(200);
      const [key] = (await call(iam, "GET", "/api/auth/api-key/list", { token: ada.token })).body.apiKeys;
      expect(key).toMatchObject({ referenceId: ada.userId, configId: expect.any(String) });
      expect(key).not.toHaveProperty("userId");
      const item = doc.paths["/api/auth/api-key/list"]!.get.responses["200"].content["application/json"].schema.properties.apiKeys.items;
      expect(item.required).toContain("referenceId");
      expect(item.required).not.toContain("userId");
      expect(Object.keys(item.properties)).toEqual(expect.arrayContaining(["referenceId", "configId"]));
      expect(item.properties).not.toHaveProperty("userId");
    });

    it("describes the library's routes in IAM's own description, with IAM's bounds and no 500", async () => {
      const doc = (await (await iam.app.request("/openapi.json")).json()) as { paths: Record<string, Record<string, any>>; components: { schemas: Record<string, unknown> } };
      for (const path of ["/api/auth/sign-up/email", "/api/auth/sign-in/email", "/api/auth/sign-in/magic-link", "/api/auth/sign-out", "/api/auth/api-key/create", "/api/auth/organization/accept-invitation"]) {
        expect(doc.paths[path]?.post, path).toBeDefined();
      }
      for (const path of ["/api/auth/get-session", "/api/auth/magic-link/verify", "/api/auth/api-key/list", "/api/auth/jwks"]) expect(doc.paths[path]?.get, path).toBeDefined();
      expect(doc.paths["/api/auth/sign-in/social"]).toBeUndefined();
      const signUpOp = doc.paths["/api/auth/sign-up/email"]!.post;
      expect(signUpOp.requestBody.content["application/json"].schema.properties.name).toMatchObject({ minLength: 1, maxLength: 100 });
      expect(signUpOp.security).toEqual([]);
      expect(Object.keys(signUpOp.responses)).not.toContain("500");
      expect(doc.paths["/api/auth/organization/remove-member"]!.post.responses["409"]).toBeDefined();
      // the library's components live beside IAM's under their own names
      expect(doc.components.schemas.AuthUser).toBeDefined();
      expect(doc.components.schemas.Invitation).toBeDefined();
      expect(JSON.stringify(doc.paths["/api/auth/get-session"])).not.toMatch(/"#\/components\/schemas\/(User|Session)"/);
    });
  });

  describe("sign-in", () => {
    it("answers a session token and sets an HttpOnly, SameSite=Lax cookie without Secure on localhost", async () => {
      const ada = await signUp(iam);
      const r = await post(iam, "/api/auth/sign-in/email", { email: ada.email, password: PASSWORD });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ token: expect.any(String), user: { id: ada.userId, email: ada.email } });
      const cookie = cookieAttributes(r.headers.get("set-cookie"));
      expect(cookie.name).toBe("better-auth.session_token");
      expect(cookie.value.startsWith(`${r.body.token}.`)).toBe(true);
      expect(cookie.attributes).toContain("httponly");
      expect(cookie.attributes).toContain("samesite=lax");
      expect(cookie.attributes).toContain("path=/");
      expect(cookie.attributes).not.toContain("secure");
    });

    it("opens a session usable by bearer token and by cookie alike", async () => {
      const ada = await signUp(iam);
      const r = await post(iam, "/api/auth/sign-in/email", { email: ada.email, password: PASSWORD });
      const byToken = await call(iam, "GET", "/api/core/session", { token: r.body.token });
      const byCookie = await call(iam, "GET", "/api/core/session", { cookie: sessionCookieOf(r) });
      expect(byToken.body.session.id).toBe(byCookie.body.session.id);
      expect(byToken.body.user.id).toBe(ada.userId);
    });

    it("refuses a wrong password and an unknown email with 401, opening no session", async () => {
      const ada = await signUp(iam);
      const wrong = await post(iam, "/api/auth/sign-in/email", { email: ada.email, password: `${PASSWORD}-wrong` });
      expect(wrong.status).toBe(401);
      expect(wrong.body.code).toBe("INVALID_EMAIL_OR_PASSWORD");
      expect(wrong.headers.get("set-cookie")).toBeNull();
      const unknown = await post(iam, "/api/auth/sign-in/email", { email: uniqueEmail("ghost"), password: PASSWORD });
      expect(unknown.status).toBe(401);
      expect((await call(iam, "GET", "/api/sessions", { token: ada.token })).body.data).toHaveLength(1);
    });

    it("answers the library's session through get-session", async () => {
      const ada = await signUp(iam);
      const r = await call(iam, "GET", "/api/auth/get-session", { token: ada.token });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ session: { token: ada.token, userId: ada.userId }, user: { id: ada.userId, email: ada.email } });
    });
  });

  describe("magic link", () => {
    const linkIn = (text: string) => new URL(/https?:\/\/\S+/.exec(text)![0]);

    it("mails a link that signs in: request, follow the verify URL, get a session", async () => {
      const email = uniqueEmail("magic");
      const r = await post(iam, "/api/auth/sign-in/magic-link", { email, callbackURL: "/" });
      expect(r.status).toBe(200);
      const mail = iam.mailer.sent.find((m) => m.to === email);
      expect(mail).toBeDefined();
      const link = linkIn(mail!.text);
      expect(`${link.origin}${link.pathname}`).toBe(`${iam.config.iamUrl}/api/auth/magic-link/verify`);
      expect(link.searchParams.get("token")).toEqual(expect.any(String));

      const followed = await iam.app.request(`${link.pathname}${link.search}`);
      expect(followed.status).toBe(302);
      const cookie = sessionCookieOf(followed);
      expect(cookie).toMatch(/^better-auth\.session_token=/);
      const session = await call(iam, "GET", "/api/core/session", { cookie });
      expect(session.status).toBe(200);
      expect(session.body.user.email).toBe(email);
    });

    it("signs an existing user into their own account", async () => {
      const ada = await signUp(iam);
      await post(iam, "/api/auth/sign-in/magic-link", { email: ada.email, callbackURL: "/" });
      const link = linkIn(iam.mailer.sent.findLast((m) => m.to === ada.email)!.text);
      const followed = await iam.app.request(`${link.pathname}${link.search}`);
      const session = await call(iam, "GET", "/api/core/session", { cookie: sessionCookieOf(followed) });
      expect(session.body.user.id).toBe(ada.userId);
    });

    it("stores the link's token hashed: the raw token is nowhere in iam.verification", async () => {
      const email = uniqueEmail("hashed");
      await post(iam, "/api/auth/sign-in/magic-link", { email, callbackURL: "/" });
      const token = linkIn(iam.mailer.sent.find((m) => m.to === email)!.text).searchParams.get("token")!;
      const rows = rowsOf<Record<string, unknown>>(await database.db.execute(sql`select * from iam.verification`));
      expect(rows.length).toBeGreaterThan(0);
      expect(JSON.stringify(rows)).not.toContain(token);
    });

    it("lets a link be used once", async () => {
      const email = uniqueEmail("once");
      await post(iam, "/api/auth/sign-in/magic-link", { email, callbackURL: "/" });
      const link = linkIn(iam.mailer.sent.find((m) => m.to === email)!.text);
      expect(sessionCookieOf(await iam.app.request(`${link.pathname}${link.search}`))).toMatch(/session_token=/);
      const again = await iam.app.request(`${link.pathname}${link.search}`);
      expect(sessionCookieOf(again)).not.toMatch(/session_token=[^;]+/);
    });

    it("opens no session for a made-up token", async () => {
      const r = await iam.app.request("/api/auth/magic-link/verify?token=made-up-token&callbackURL=%2F");
      expect(sessionCookieOf(r)).not.toMatch(/session_token=[^;]+/);
    });

    it("refuses an invalid email with 400 and sends nothing", async () => {
      const before = iam.mailer.sent.length;
      const r = await post(iam, "/api/auth/sign-in/magic-link", { email: "not-an-email", callbackURL: "/" });
      expect(r.status).toBe(400);
      expect(iam.mailer.sent.length).toBe(before);
    });
  });

  describe("sign-out", () => {
    it("revokes the session: validate-session answers valid: false at once, and IAM refuses the token", async () => {
      const ada = await signUp(iam);
      expect((await validate(ada.token)).body.valid).toBe(true);
      const r = await call(iam, "POST", "/api/auth/sign-out", { cookie: ada.cookie });
      expect(r.status).toBe(200);
      expect((await validate(ada.token)).body).toEqual({ valid: false });
      expect((await call(iam, "GET", "/api/core/session", { token: ada.token })).status).toBe(401);
      expect((await call(iam, "GET", "/api/auth/get-session", { token: ada.token })).body).toBeNull();
    });

    it("signs out a bearer-token session too", async () => {
      const ada = await signUp(iam);
      expect((await call(iam, "POST", "/api/auth/sign-out", { token: ada.token, headers: { origin: iam.origin } })).status).toBe(200);
      expect((await validate(ada.token)).body).toEqual({ valid: false });
    });

    it("refuses a cookie-carrying sign-out from an untrusted Origin, keeping the session", async () => {
      const ada = await signUp(iam);
      const r = await call(iam, "POST", "/api/auth/sign-out", { cookie: ada.cookie, headers: { origin: "https://evil.example" } });
      expect(r.status).toBe(403);
      expect((await validate(ada.token)).body.valid).toBe(true);
    });
  });
});

describe.each(testDatabases())("clients without a browser on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let server: RunningServer;
  beforeAll(async () => {
    database = await open();
    iam = await createIam(database);
    server = await listen(iam.app, 0, "127.0.0.1");
  });
  afterAll(async () => {
    await server?.close();
    await database?.close();
  });

  // Node's fetch sends Sec-Fetch-Mode: cors and no Origin, as scripts and many HTTP clients do
  const send = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });

  it("signs up and in from a script without Origin or cookie, answering the session token", async () => {
    const email = uniqueEmail("script");
    const up = await send("/api/auth/sign-up/email", { email, password: PASSWORD, name: "Script" });
    expect(up.status).toBe(200);
    expect(((await up.json()) as { token: string }).token).toEqual(expect.any(String));
    const signedIn = await send("/api/auth/sign-in/email", { email, password: PASSWORD });
    expect(signedIn.status).toBe(200);
    expect(((await signedIn.json()) as { token: string }).token).toEqual(expect.any(String));
    const mobile = await send("/api/auth/sign-in/email", { email, password: PASSWORD }, { "sec-fetch-site": "none", "sec-fetch-mode": "navigate" });
    expect(mobile.status).toBe(200);
  });

  it("still refuses a foreign Origin, a null Origin and a cross-site browser request", async () => {
    const ada = await signUp(iam);
    const refused: Record<string, string>[] = [{ origin: "https://evil.example" }, { origin: "null" }, { "sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate" }];
    for (const headers of refused) {
      const r = await send("/api/auth/sign-in/email", { email: ada.email, password: PASSWORD }, headers);
      expect(r.status, JSON.stringify(headers)).toBe(403);
    }
  });

  it("still needs a trusted Origin for a write that carries a cookie", async () => {
    const ada = await signUp(iam);
    const refused = await send("/api/auth/sign-out", {}, { cookie: ada.cookie });
    expect(refused.status).toBe(403);
    expect((await call(iam, "GET", "/api/core/session", { token: ada.token })).status).toBe(200);
    const allowed = await send("/api/auth/sign-out", {}, { cookie: ada.cookie, origin: iam.origin });
    expect(allowed.status).toBe(200);
  });
});

describe.each(testDatabases())("auth library limits and cookies on $name", ({ open }) => {
  let database: DatabaseHandle;

  beforeAll(async () => {
    database = await open();
  });
  afterAll(async () => {
    await database?.close();
  });

  it("answers the third sign-in within the window with 429 and Retry-After, on any replica, and audits it", async () => {
    const limits = { enabled: true, windowSeconds: 60, signIn: 2, signUp: 5, magicLink: 5, apiKeyFailures: 30 };
    // two replicas on one database share the counters
    const first = await createIam(database, { config: { rateLimits: limits } });
    const second = await createIam(database, { config: { rateLimits: limits } });
    const ada = await signUp(first);
    const signInTo = (iam: Iam) => post(iam, "/api/auth/sign-in/email", { email: ada.email, password: PASSWORD });
    expect((await signInTo(first)).status).toBe(200);
    expect((await signInTo(second)).status).toBe(200);
    const limited = await signInTo(first);
    expect(limited.status).toBe(429);
    const retryAfter = Number(limited.headers.get("retry-after"));
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect((await signInTo(second)).status).toBe(429);

    const unlimited = await createIam(database);
    const op = await operator(unlimited);
    const events = await call(unlimited, "GET", "/api/audit/events?action=auth.rate_limited", { token: op.token });
    expect(events.body.data.length).toBeGreaterThanOrEqual(2);
    expect(events.body.data[0]).toMatchObject({
      action: "auth.rate_limited",
      outcome: "failure",
      ip: "127.0.0.1",
      metadata: { path: "/api/auth/sign-in/email" },
    });
  });

  it("sets Secure cookies with the __Secure- prefix on a non-local address, and reads them back", async () => {
    const iamUrl = "https://iam.example.com";
    const secure = await createIam(database, { config: { iamUrl, trustedOrigins: [iamUrl], secureCookies: true } });
    const ada = await signUp(secure);
    expect(ada.cookie).toMatch(/^__Secure-better-auth\.session_token=/);
    const r = await post(secure, "/api/auth/sign-in/email", { email: ada.email, password: PASSWORD });
    const attributes = cookieAttributes(r.headers.get("set-cookie")).attributes;
    expect(attributes).toEqual(expect.arrayContaining(["secure", "httponly", "samesite=lax"]));
    const session = await call(secure, "GET", "/api/core/session", { cookie: sessionCookieOf(r) });
    expect(session.status).toBe(200);
    expect(session.body.user.id).toBe(ada.userId);
  });
});

