import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, createIam, signUp, type Iam, iamOn } from "./support/harness.js";
import { oauth, pollToken, refresh, startDeviceLogin } from "./support/device.js";

/** POST /oauth/token (refresh, RFC 6749 §6 with rotation, RFC 9700 §4.14) and POST /oauth/revoke (RFC 7009). */
describe.each(testDatabases())("token endpoint on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  beforeAll(async () => ({ database, iam } = await iamOn(open)));
  afterAll(() => database?.close());

  async function login() {
    const ada = await signUp(iam);
    const started = await startDeviceLogin(iam);
    await call(iam, "POST", "/oauth/device/authorize", { token: ada.token, body: { user_code: started.user_code } });
    const tokens = (await pollToken(iam, started.device_code)).body as { access_token: string; refresh_token: string };
    return { ada, tokens };
  }
  const alive = async (accessToken: string) => (await call(iam, "POST", "/api/v1/cli/whoami", { token: accessToken })).status === 200;

  it("exchanges a refresh token for a new access token and a new refresh token", async () => {
    const { tokens } = await login();
    const r = await refresh(iam, tokens.refresh_token);
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(["access_token", "expires_in", "refresh_token", "token_type"]);
    expect(r.body.refresh_token).not.toBe(tokens.refresh_token);
    expect(r.body.access_token).not.toBe(tokens.access_token);
    expect(r.headers.get("cache-control")).toBe("no-store");
    expect(await alive(r.body.access_token)).toBe(true);
  });

  it("rotates: a refresh token works once", async () => {
    const { tokens } = await login();
    const first = await refresh(iam, tokens.refresh_token);
    expect(first.status).toBe(200);
    const second = await refresh(iam, first.body.refresh_token);
    expect(second.status).toBe(200);
  });

  it("revokes the whole family when a spent refresh token comes back, and audits it", async () => {
    const { ada, tokens } = await login();
    const rotated = await refresh(iam, tokens.refresh_token);
    const reuse = await refresh(iam, tokens.refresh_token);
    expect(reuse).toMatchObject({ status: 400, body: { error: "invalid_grant" } });
    // the legitimate successor dies too, and so do the sessions of the family
    expect((await refresh(iam, rotated.body.refresh_token)).body.error).toBe("invalid_grant");
    expect(await alive(rotated.body.access_token)).toBe(false);
    expect(await alive(tokens.access_token)).toBe(false);
    // the person's browser session is not part of the family
    expect(await alive(ada.token)).toBe(true);
    const rows = await database.db.execute(`select action from iam.audit_events where actor_id = '${ada.userId}' and action = 'token.refresh_reuse'` as never);
    expect((rows as unknown as { rows: unknown[] }).rows.length).toBe(1);
  });

  it("refuses an expired refresh token with invalid_grant", async () => {
    const brief = await createIam(database, { config: { refreshTokenSeconds: 60 } });
    const ada = await signUp(brief);
    const started = await startDeviceLogin(brief);
    await call(brief, "POST", "/oauth/device/authorize", { token: ada.token, body: { user_code: started.user_code } });
    const tokens = (await pollToken(brief, started.device_code)).body;
    brief.clock.advance(60_000);
    expect((await refresh(brief, tokens.refresh_token)).body.error).toBe("invalid_grant");
  });

  it("answers invalid_grant for an unknown token, invalid_request for a missing one, and unsupported_grant_type", async () => {
    expect((await refresh(iam, "nope")).body.error).toBe("invalid_grant");
    expect((await oauth(iam, "/oauth/token", { grant_type: "refresh_token", client_id: "core-cli" })).body.error).toBe("invalid_request");
    expect((await oauth(iam, "/oauth/token", { grant_type: "client_credentials", client_id: "core-cli" })).body.error).toBe("unsupported_grant_type");
    const { tokens } = await login();
    // another client id is one of the authorization server's clients (oauth-provider.ts), to which a CLI refresh token is unknown
    expect((await oauth(iam, "/oauth/token", { grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: "x" })).body.error).toBe("invalid_grant");
  });

  it("also takes the device_code grant, so clients that know a single token endpoint log in", async () => {
    const ada = await signUp(iam);
    const started = await startDeviceLogin(iam);
    await call(iam, "POST", "/oauth/device/authorize", { token: ada.token, body: { user_code: started.user_code } });
    const r = await oauth(iam, "/oauth/token", { grant_type: "urn:ietf:params:oauth:grant-type:device_code", device_code: started.device_code, client_id: "core-cli" });
    expect(r.status).toBe(200);
    expect(r.body.token_type).toBe("bearer");
  });

  it("publishes RFC 8414 metadata naming its endpoints", async () => {
    const response = await iam.app.request("/.well-known/oauth-authorization-server");
    expect(await response.json()).toMatchObject({
      issuer: "http://localhost:4100",
      device_authorization_endpoint: "http://localhost:4100/oauth/device/code",
      token_endpoint: "http://localhost:4100/oauth/token",
      revocation_endpoint: "http://localhost:4100/oauth/revoke",
    });
  });

  it("accepts JSON bodies as well as forms", async () => {
    const { tokens } = await login();
    const r = await oauth(iam, "/oauth/token", { grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: "core-cli" }, { json: true });
    expect(r.status).toBe(200);
  });

  it("revokes a refresh token with its family and sessions (RFC 7009), answering 200 either way", async () => {
    const { tokens } = await login();
    const r = await oauth(iam, "/oauth/revoke", { token: tokens.refresh_token, token_type_hint: "refresh_token", client_id: "core-cli" });
    expect(r).toMatchObject({ status: 200, body: {} });
    expect(await alive(tokens.access_token)).toBe(false);
    expect((await refresh(iam, tokens.refresh_token)).body.error).toBe("invalid_grant");
    expect((await oauth(iam, "/oauth/revoke", { token: "unknown", client_id: "core-cli" })).status).toBe(200);
  });

  it("revokes an access token by ending its session", async () => {
    const { tokens } = await login();
    expect((await oauth(iam, "/oauth/revoke", { token: tokens.access_token, client_id: "core-cli" })).status).toBe(200);
    expect(await alive(tokens.access_token)).toBe(false);
  });
});
