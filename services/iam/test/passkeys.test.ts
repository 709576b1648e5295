import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { libraryLogLine } from "../src/library-log.js";
import { SoftwareAuthenticator } from "./support/authenticator.js";
import { call, createIam, operator, signUp, tenantOrg, type Iam, type SignedUp } from "./support/harness.js";
import { session } from "../src/db/schema.js";
import { eq } from "drizzle-orm";
import { hiddenFields, PageBrowser, textOf } from "./support/pages.js";

/** Cookies kept across the requests of one ceremony (the plugin's challenge cookie, a session). */
class Jar {
  readonly cookies = new Map<string, string>();
  constructor(cookie?: string) {
    if (cookie) this.keep(cookie);
  }
  keep(setCookie: string) {
    const pair = setCookie.split(";")[0]!;
    const eq = pair.indexOf("=");
    const [name, value] = [pair.slice(0, eq).trim(), pair.slice(eq + 1).trim()];
    if (value === "" || /max-age=0/i.test(setCookie)) this.cookies.delete(name);
    else this.cookies.set(name, value);
  }
  get header() {
    return [...this.cookies].map(([n, v]) => `${n}=${v}`).join("; ");
  }
}

/** A request to the passkey plugin's routes as the browser's script sends it: cookies, and our own Origin. */
async function library(iam: Iam, jar: Jar, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const response = await iam.app.request(`/api/auth/passkey/${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { origin: iam.origin, ...(jar.cookies.size ? { cookie: jar.header } : {}), ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  for (const cookie of response.headers.getSetCookie()) jar.keep(cookie);
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : null };
}

describe.each(testDatabases())("passkeys on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;

  beforeAll(async () => {
    database = await open();
    iam = await createIam(database);
  });
  afterAll(async () => {
    await database?.close();
  });

  const authenticator = () => new SoftwareAuthenticator("localhost", iam.origin);
  const auditOf = async (action: string, actorId?: string) => (await iam.app.ctx.audit.list({ action, actorId, limit: 50 })).data;

  /** Adds a passkey made by `device` to `person`'s account, as the account page's script does. */
  async function addPasskey(person: SignedUp, device: SoftwareAuthenticator, name = "work laptop") {
    const jar = new Jar(person.cookie);
    const options = await library(iam, jar, "generate-register-options");
    expect(options.status).toBe(200);
    const added = await library(iam, jar, "verify-registration", { response: device.register(options.body), name });
    expect(added.status, JSON.stringify(added.body)).toBe(200);
    return added.body as { id: string; userId: string; name: string };
  }

  /** Signs in with `device` from a browser with no session; the answer and the browser's cookies. */
  async function signInWith(device: SoftwareAuthenticator, origin?: string) {
    const jar = new Jar();
    const options = await library(iam, jar, "generate-authenticate-options");
    expect(options.status).toBe(200);
    const answer = await library(iam, jar, "verify-authentication", { response: device.assert(options.body, origin) });
    return { ...answer, jar };
  }

  const passkeysOf = async (person: SignedUp) => (await library(iam, new Jar(person.cookie), "list-user-passkeys")).body as { id: string; name: string; userId: string }[];

  it("binds passkeys to IAM's own host name and origin", async () => {
    const ada = await signUp(iam);
    const jar = new Jar(ada.cookie);
    const options = await library(iam, jar, "generate-register-options");
    expect(options.body.rp).toEqual({ name: "Core", id: "localhost" });
    expect(options.body.user.name).toBe(ada.email);
    // a passkey made for another origin is refused even with our Origin header: the origin the browser signed is checked
    const device = new SoftwareAuthenticator("localhost", "http://localhost:9999");
    const refused = await library(iam, jar, "verify-registration", { response: device.register(options.body) });
    expect(refused.status).toBe(400);
    expect(refused.body.code).toBe("FAILED_TO_VERIFY_REGISTRATION");
    expect(await passkeysOf(ada)).toEqual([]);
  });

  it("adds a passkey to the signed-in user, lists it on /account, and signs in with it", async () => {
    const ada = await signUp(iam);
    const device = authenticator();
    const added = await addPasskey(ada, device);
    expect(added).toMatchObject({ userId: ada.userId, name: "work laptop", deviceType: "singleDevice", backedUp: false });

    const [audited] = await auditOf("passkey.add", ada.userId);
    expect(audited).toMatchObject({ outcome: "success", actorType: "user", targetType: "passkey", targetId: added.id, metadata: { path: "/passkey/verify-registration" } });

    const page = await new PageBrowser(iam, ada.cookie).get("/account");
    expect(page.status).toBe(200);
    expect(page.html).toContain(">Passkeys</h2>");
    const text = textOf(page.html);
    expect(text).toMatch(/work laptop added \d{4}-\d\d-\d\d · this device only · not backed up/);
    expect(hiddenFields(page.html, "/account/passkeys/rename")).toMatchObject({ id: added.id, csrf: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });
    expect(hiddenFields(page.html, "/account/passkeys/remove").id).toBe(added.id);
    expect(page.html).toContain('<script src="/assets/passkeys.js" defer=""></script>');
    expect(text).toContain("Adding a passkey needs JavaScript");

    const signedIn = await signInWith(device);
    expect(signedIn.status, JSON.stringify(signedIn.body)).toBe(200);
    expect(signedIn.body.user.id).toBe(ada.userId);
    const session = await call(iam, "GET", "/api/core/session", { headers: { cookie: signedIn.jar.header } });
    expect(session.status).toBe(200);
    expect(session.body.principal.userId).toBe(ada.userId);
    const [signInEvent] = await auditOf("auth.passkey_sign_in", ada.userId);
    expect(signInEvent).toMatchObject({ outcome: "success", actorType: "user", metadata: { path: "/passkey/verify-authentication" } });
    // no credential material in the audit log: not the credential id, not the public key
    expect(JSON.stringify([audited, signInEvent])).not.toContain(device.id);
  });

  it("a passkey sign-in is a passkey session, which meets an organization's two-factor policy; a password session does not", async () => {
    const org = await tenantOrg(iam, await operator(iam));
    const device = authenticator();
    await addPasskey(org.owner, device);
    const signedIn = await signInWith(device);
    expect(signedIn.status).toBe(200);
    const made = await database.db.select({ method: session.signInMethod }).from(session).where(eq(session.userId, org.owner.userId));
    expect(made.map((m) => m.method).sort()).toEqual(["passkey", "password"]);

    const require = (headers: Record<string, string>) => call(iam, "PUT", `/api/core/organizations/${org.orgId}/policy`, { headers, body: { requireTwoFactor: true, requireSso: false } });
    // the owner's password session would be locked out by it: refused
    expect((await require({ authorization: `Bearer ${org.owner.token}` })).status).toBe(409);
    expect((await require({ cookie: signedIn.jar.header, origin: iam.origin })).status).toBe(200);
    const passkeyBrowser = new PageBrowser(iam);
    for (const pair of signedIn.jar.header.split("; ")) passkeyBrowser.cookies.set(pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1));
    const passkeyPage = await passkeyBrowser.get("/account");
    expect(passkeyPage.status, passkeyPage.location ?? "").toBe(200);
    const heldBack = await new PageBrowser(iam, org.owner.cookie).get("/account");
    expect(heldBack.status).toBe(302);
    expect(heldBack.location).toMatch(/^\/account\/two-factor/);
  });

  it("refuses an assertion for a credential that is not registered, and audits the failure without the credential", async () => {
    const stranger = authenticator();
    const before = (await auditOf("auth.passkey_sign_in")).length;
    const refused = await signInWith(stranger);
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe("PASSKEY_NOT_FOUND");
    expect(refused.headers.getSetCookie().some((c) => c.includes("session_token="))).toBe(false);
    const events = await auditOf("auth.passkey_sign_in");
    expect(events).toHaveLength(before + 1);
    expect(events[0]).toMatchObject({ outcome: "failure", actorType: "anonymous", actorId: null, metadata: { path: "/passkey/verify-authentication", code: "PASSKEY_NOT_FOUND", status: 401 } });
    expect(JSON.stringify(events[0])).not.toContain(stranger.id);
  });

  it("refuses an assertion signed with another key for a registered credential, and a challenge used twice", async () => {
    const ada = await signUp(iam);
    const device = authenticator();
    await addPasskey(ada, device);
    const forged = new SoftwareAuthenticator("localhost", iam.origin, device.credentialId);
    const refused = await signInWith(forged);
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe("AUTHENTICATION_FAILED");
    expect((await auditOf("auth.passkey_sign_in"))[0]).toMatchObject({ outcome: "failure", metadata: { code: "AUTHENTICATION_FAILED" } });

    const jar = new Jar();
    const options = await library(iam, jar, "generate-authenticate-options");
    expect((await library(iam, jar, "verify-authentication", { response: device.assert(options.body) })).status).toBe(200);
    const replayed = await library(iam, jar, "verify-authentication", { response: device.assert(options.body) });
    expect(replayed.status).toBe(400);
    expect(replayed.body.code).toBe("CHALLENGE_NOT_FOUND");
  });

  it("keeps a passkey to its user: another user can neither rename nor remove it, by the library or the page", async () => {
    const ada = await signUp(iam);
    const bob = await signUp(iam);
    const adas = await addPasskey(ada, authenticator(), "ada's key");
    const bobJar = new Jar(bob.cookie);

    const renamed = await library(iam, bobJar, "update-passkey", { id: adas.id, name: "bob's now" });
    expect(renamed.status).toBe(401);
    const removed = await library(iam, bobJar, "delete-passkey", { id: adas.id });
    expect(removed.status).toBe(401);
    expect(await passkeysOf(bob)).toEqual([]);

    // bob's own page, with ada's passkey id put in its forms
    const browser = new PageBrowser(iam, bob.cookie);
    const page = await browser.get("/account");
    const csrf = hiddenFields(page.html, "/account/api-keys").csrf!;
    const pageRename = await browser.post("/account/passkeys/rename", { csrf, id: adas.id, name: "bob's now" });
    expect(pageRename.status).toBe(404);
    expect(textOf(pageRename.html)).toContain("That passkey is not one of yours, or it is removed already.");
    const pageRemove = await browser.post("/account/passkeys/remove", { csrf, id: adas.id });
    expect(pageRemove.status).toBe(404);

    expect(await passkeysOf(ada)).toEqual([expect.objectContaining({ id: adas.id, name: "ada's key", userId: ada.userId })]);
    const refusals = (await auditOf("passkey.remove", bob.userId)).concat(await auditOf("passkey.rename", bob.userId));
    expect(refusals.length).toBeGreaterThanOrEqual(4);
    expect(refusals.every((e) => e.outcome === "failure" && e.targetId === adas.id)).toBe(true);
  });

  it("adds a passkey to the signed-in user only: a challenge made for another user is refused", async () => {
    const ada = await signUp(iam);
    const bob = await signUp(iam);
    const adaJar = new Jar(ada.cookie);
    const options = await library(iam, adaJar, "generate-register-options");
    // bob's session with ada's challenge cookie
    const mixed = new Jar(bob.cookie);
    for (const [name, value] of adaJar.cookies) if (name.includes("passkey")) mixed.cookies.set(name, value);
    const refused = await library(iam, mixed, "verify-registration", { response: authenticator().register(options.body) });
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe("YOU_ARE_NOT_ALLOWED_TO_REGISTER_THIS_PASSKEY");
    expect(await passkeysOf(ada)).toEqual([]);
    expect(await passkeysOf(bob)).toEqual([]);

    const bobs = await addPasskey(bob, authenticator(), "bob's key");
    expect(bobs.userId).toBe(bob.userId);
    expect(await passkeysOf(ada)).toEqual([]);
  });

  it("keeps a signature counter past 2^31 (WebAuthn's is an unsigned 32-bit number)", async () => {
    const ada = await signUp(iam);
    const device = authenticator();
    device.counter = 3_000_000_000;
    await addPasskey(ada, device);
    const signedIn = await signInWith(device);
    expect(signedIn.status, JSON.stringify(signedIn.body)).toBe(200);
    expect((await library(iam, new Jar(ada.cookie), "list-user-passkeys")).body[0].counter).toBe(3_000_000_001);
  });

  it("makes no second session when a passkey is added, and bounds a passkey's name", async () => {
    const ada = await signUp(iam);
    const jar = new Jar(ada.cookie);
    const options = await library(iam, jar, "generate-register-options");
    const withSession = await library(iam, jar, "verify-registration", { response: authenticator().register(options.body), createSession: true });
    expect(withSession.status).toBe(400);
    expect(withSession.body.error.code).toBe("VALIDATION_ERROR");
    const long = await library(iam, jar, "verify-registration", { response: authenticator().register(options.body), name: "x".repeat(101) });
    expect(long.status).toBe(400);
    expect(await passkeysOf(ada)).toEqual([]);
  });

  it("renames and removes a passkey from the account page without script", async () => {
    const ada = await signUp(iam);
    const device = authenticator();
    const added = await addPasskey(ada, device);
    const browser = new PageBrowser(iam, ada.cookie);

    const tooLong = await browser.submit("/account", "/account/passkeys/rename", { name: "y".repeat(101) });
    expect(tooLong.status).toBe(400);
    expect(textOf(tooLong.html)).toContain("Give the passkey a name of 1 to 100 characters.");

    const renamed = await browser.submit("/account", "/account/passkeys/rename", { name: "desk key" });
    expect(renamed.status).toBe(303);
    expect(renamed.location).toBe("/account?saved=passkey#passkeys-heading");
    const after = await browser.get("/account?saved=passkey");
    expect(textOf(after.html)).toContain("The passkey is renamed.");
    expect(textOf(after.html)).toContain("desk key added");
    expect((await auditOf("passkey.rename", ada.userId))[0]).toMatchObject({ outcome: "success", targetId: added.id });

    // a form without the session's CSRF token changes nothing
    const forged = await browser.post("/account/passkeys/remove", { id: added.id, csrf: "x".repeat(43) });
    expect(forged.status).toBe(403);
    expect(await passkeysOf(ada)).toHaveLength(1);

    const removed = await browser.submit("/account", "/account/passkeys/remove", {});
    expect(removed.location).toBe("/account?revoked=passkey#passkeys-heading");
    expect(textOf((await browser.get("/account?revoked=passkey")).html)).toContain("The passkey is removed: it no longer signs you in. ");
    expect(await passkeysOf(ada)).toEqual([]);
    expect((await auditOf("passkey.remove", ada.userId))[0]).toMatchObject({ outcome: "success", targetId: added.id });
    // a removed passkey signs nobody in
    expect((await signInWith(device)).status).toBe(401);
  });

  it("answers what IAM's OpenAPI description says of each passkey route", async () => {
    const doc = (await (await iam.app.request("/openapi.json")).json()) as { paths: Record<string, Record<string, { security: unknown }>> };
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats.default(ajv);
    ajv.addSchema(doc, "iam");
    const pointer = (text: string) => text.replace(/~/g, "~0").replace(/\//g, "~1");
    const matches = (method: string, path: string, body: unknown) => {
      const validate = ajv.compile({ $ref: `iam#/paths/${pointer(`/api/auth/passkey/${path}`)}/${method}/responses/200/content/${pointer("application/json")}/schema` });
      return validate(body) ? [] : validate.errors;
    };
    const ada = await signUp(iam);
    const device = authenticator();
    const jar = new Jar(ada.cookie);
    const registerOptions = await library(iam, jar, "generate-register-options");
    expect(matches("get", "generate-register-options", registerOptions.body)).toEqual([]);
    // added without a name: the name is null
    const added = await library(iam, jar, "verify-registration", { response: device.register(registerOptions.body) });
    expect(added.body.name).toBeNull();
    expect(matches("post", "verify-registration", added.body)).toEqual([]);
    expect(matches("get", "list-user-passkeys", (await library(iam, jar, "list-user-passkeys")).body)).toEqual([]);
    expect(matches("post", "update-passkey", (await library(iam, jar, "update-passkey", { id: added.body.id, name: "renamed" })).body)).toEqual([]);
    const signedIn = new Jar();
    const authOptions = await library(iam, signedIn, "generate-authenticate-options");
    expect(matches("get", "generate-authenticate-options", authOptions.body)).toEqual([]);
    expect(matches("post", "verify-authentication", (await library(iam, signedIn, "verify-authentication", { response: device.assert(authOptions.body) })).body)).toEqual([]);
    expect(matches("post", "delete-passkey", (await library(iam, jar, "delete-passkey", { id: added.body.id })).body)).toEqual([]);
    // the two sign-in routes need no session; the others do
    expect(doc.paths["/api/auth/passkey/verify-authentication"]!.post!.security).toEqual([]);
    expect(doc.paths["/api/auth/passkey/delete-passkey"]!.post!.security).not.toEqual([]);
  });

  it("offers a passkey on the sign-in page, and serves the script from our own origin", async () => {
    const page = await new PageBrowser(iam).get("/sign-in?next=%2Fdevice");
    expect(page.html).toContain(">Or with a passkey</h2>");
    expect(page.html).toMatch(/<form id="passkey-sign-in" hidden=""><div class="alert error" id="passkey-sign-in-error"[^>]*><\/div><input type="hidden" name="next" value="\/device"\/>/);
    expect(textOf(page.html)).toContain("Signing in with a passkey needs JavaScript");
    expect(page.headers.get("content-security-policy")).toContain("script-src 'self'");

    const script = await iam.app.request("/assets/passkeys.js");
    expect(script.status).toBe(200);
    expect(script.headers.get("content-type")).toMatch(/^text\/javascript/);
    const source = await script.text();
    expect(source).toContain('"/api/auth/passkey/" + path');
    expect(() => new Function(source)).not.toThrow();
  });
});

describe("the passkey plugin's log lines", () => {
  it("are refused input at info, without the verifier's text (origins, challenges)", () => {
    const line = libraryLogLine("error", "Failed to verify registration", [new Error('Unexpected registration response origin "http://localhost:9999", expected "http://localhost:4100"')]);
    expect(line).toEqual({ level: "info", message: "the passkey plugin refused a registration the client sent" });
    expect(libraryLogLine("error", "Failed to verify authentication", [new Error("signature")])?.level).toBe("info");
  });
});

describe.each(testDatabases())("passkey rate limits on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;

  beforeAll(async () => {
    database = await open();
    iam = await createIam(database, { config: { rateLimits: { enabled: true, passkey: 3 } } });
  });
  afterAll(async () => {
    await database?.close();
  });

  it("limits passkey sign-in attempts per client, counted in the database, and audits the limit", async () => {
    const jar = new Jar();
    const stranger = new SoftwareAuthenticator("localhost", iam.origin);
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) {
      const options = await library(iam, jar, "generate-authenticate-options");
      statuses.push(options.status);
      if (options.status === 429) {
        expect(options.headers.get("retry-after")).toMatch(/^\d+$/);
        break;
      }
      if (i === 0) expect((await library(iam, jar, "verify-authentication", { response: stranger.assert(options.body) })).status).toBe(401);
    }
    expect(statuses).toEqual([200, 200, 200, 429]);
    const limited = await iam.app.ctx.audit.list({ action: "auth.rate_limited", limit: 10 });
    expect(limited.data.some((e) => (e.metadata as { path?: string }).path === "/api/auth/passkey/generate-authenticate-options")).toBe(true);
    // the window is counted in the library's rate_limit table, so every replica sees it
    const rows = await database.db.execute(`select key from iam.rate_limit where key like '%passkey%'` as never);
    expect(JSON.stringify(rows)).toContain("/passkey/generate-authenticate-options");
  });
});
