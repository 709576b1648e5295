import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, createApiKey, createIam, iamWithOperator, signUp, type Iam, type Operator } from "./support/harness.js";
import { pollToken, startDeviceLogin } from "./support/device.js";

/** POST /api/v1/cli/whoami (spec §2.2, §2.3, §4.3). */
describe.each(testDatabases())("cli whoami on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let op: Operator;
  beforeAll(async () => ({ database, iam, op } = await iamWithOperator(open)));
  afterAll(() => database?.close());

  it("answers the identity response for a device-flow access token", async () => {
    const ada = await signUp(iam);
    const started = await startDeviceLogin(iam);
    await call(iam, "POST", "/oauth/device/authorize", { token: ada.token, body: { user_code: started.user_code } });
    const { access_token } = (await pollToken(iam, started.device_code)).body;
    const r = await call(iam, "POST", "/api/v1/cli/whoami", { token: access_token });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ email: ada.email, platformId: "", role: "", expiresAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/) });
  });

  it("names the platform and role of a member", async () => {
    const r = await call(iam, "POST", "/api/v1/cli/whoami", { token: op.token });
    expect(r.body).toMatchObject({ email: op.email, role: "owner" });
  });

  it.each([
    ["no token", undefined],
    ["an unknown token", "nope"],
  ])("answers 401 without details for %s", async (_label, token) => {
    const r = await call(iam, "POST", "/api/v1/cli/whoami", { token });
    expect(r.status).toBe(401);
    expect(Object.keys(r.body.error).sort()).toEqual(["code", "message", "requestId"]);
    expect(r.body.error.code).toBe("UNAUTHENTICATED");
  });

  it.each([
    ["415 for a body that is not JSON", { body: "who?", headers: { "content-type": "text/plain" } }, 415],
    ["413 for a body over the limit", { body: JSON.stringify({ pad: "x".repeat(1024 * 1024) }) }, 413],
    ["400 for a body holding U+0000", { body: { pad: "\u0000" } }, 400],
  ])("answers %s without details, as its 401 (spec §2.3)", async (_label, request, status) => {
    const r = await call(iam, "POST", "/api/v1/cli/whoami", { token: op.token, ...request });
    expect(r.status).toBe(status);
    expect(Object.keys(r.body.error).sort()).toEqual(["code", "message", "requestId"]);
  });

  it("answers 401 without details once the token has expired", async () => {
    const ada = await signUp(iam);
    const started = await startDeviceLogin(iam);
    await call(iam, "POST", "/oauth/device/authorize", { token: ada.token, body: { user_code: started.user_code } });
    const { access_token } = (await pollToken(iam, started.device_code)).body;
    iam.clock.advance(3_600_000);
    const r = await call(iam, "POST", "/api/v1/cli/whoami", { token: access_token });
    expect(r.status).toBe(401);
    expect(r.body.error).not.toHaveProperty("details");
    iam.clock.advance(-3_600_000);
  });
});

const whoamiWithKey = (iam: Iam, key: string) => call(iam, "POST", "/api/v1/cli/whoami", { headers: { "x-api-key": key } });

/** A CI job logs the CLI in with an API key, sent as `x-api-key` (DESIGN §4). */
describe.each(testDatabases())("cli whoami with an API key on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let op: Operator;
  beforeAll(async () => ({ database, iam, op } = await iamWithOperator(open)));
  afterAll(() => database?.close());

  it("names the key's owner, platform and role; expiresAt is empty for a key that does not expire", async () => {
    const key = await createApiKey(iam, op);
    const r = await whoamiWithKey(iam, key.key);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ email: op.email, platformId: "", role: "owner", expiresAt: "" });
  });

  it("gives the expiry of a key that expires", async () => {
    const key = await createApiKey(iam, op, { name: "expiring", expiresIn: 86_400 });
    const r = await whoamiWithKey(iam, key.key);
    expect(Date.parse(r.body.expiresAt) - iam.clock.now().getTime()).toBeGreaterThan(86_000_000);
  });

  it("answers 401 without details for an unknown, a deleted and an overlong key, and audits each", async () => {
    const key = await createApiKey(iam, op);
    const deleted = await call(iam, "POST", "/api/auth/api-key/delete", { token: op.token, headers: { origin: iam.origin }, body: { keyId: key.id } });
    expect(deleted.status).toBe(200);
    for (const wrong of ["core_nope", key.key, `core_${"x".repeat(600)}`]) {
      const r = await whoamiWithKey(iam, wrong);
      expect(r.status).toBe(401);
      expect(r.body.error).toEqual({ code: "UNAUTHENTICATED", message: "This API key is invalid, expired or revoked", requestId: expect.any(String) });
      expect(JSON.stringify(r.body)).not.toContain(wrong);
    }
    const audit = await call(iam, "GET", "/api/audit/events?action=apikey.validate", { token: op.token });
    const fromWhoami = audit.body.data.filter((event: { metadata: { route?: string } }) => event.metadata?.route === "cli/whoami");
    expect(fromWhoami.length).toBeGreaterThanOrEqual(3);
    expect(fromWhoami[0]).toMatchObject({ outcome: "failure", actorType: "anonymous" });
  });

  it("a session token still works beside it: x-api-key only when sent", async () => {
    expect((await call(iam, "POST", "/api/v1/cli/whoami", { token: op.token })).body.email).toBe(op.email);
  });
});

describe.each(testDatabases())("cli whoami API key limits on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  beforeAll(async () => {
    database = await open();
    iam = await createIam(database, { config: { rateLimits: { enabled: true, windowSeconds: 60, signIn: 10, signUp: 50, magicLink: 5, apiKeyFailures: 3 } } });
  });
  afterAll(() => database?.close());

  it("answers 429 with Retry-After after too many wrong keys from one address, even to a good key, until the window ends", async () => {
    const ada = await signUp(iam);
    const good = await createApiKey(iam, ada);
    for (let i = 0; i < 3; i++) expect((await whoamiWithKey(iam, `core_wrong-${i}`)).status).toBe(401);
    const limited = await whoamiWithKey(iam, good.key);
    expect(limited.status).toBe(429);
    expect(limited.body.error.code).toBe("RATE_LIMITED");
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    iam.clock.advance(60_000);
    expect((await whoamiWithKey(iam, good.key)).body.email).toBe(ada.email);
  });

  it("counts wrong keys sent to IAM's own routes with the same limit, and audits them", async () => {
    iam.clock.advance(60_000);
    const ada = await signUp(iam);
    const good = await createApiKey(iam, ada);
    const roles = (key: string) => call(iam, "GET", "/api/core/grants?orgId=org_x", { headers: { "x-api-key": key } });
    for (let i = 0; i < 3; i++) expect((await roles(`core_guess-${i}`)).status).toBe(401);
    const limited = await roles(good.key);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    // the same client's whoami is limited too: one count per client address at IAM
    expect((await whoamiWithKey(iam, good.key)).status).toBe(429);
    iam.clock.advance(60_000);
    expect((await roles(good.key)).status).toBe(403);
  });

  it("does not count good keys", async () => {
    iam.clock.advance(60_000);
    const ada = await signUp(iam);
    const good = await createApiKey(iam, ada);
    for (let i = 0; i < 5; i++) expect((await whoamiWithKey(iam, good.key)).status).toBe(200);
  });
});
