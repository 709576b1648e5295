import * as client from "openid-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, type RunningServer } from "@core/kit";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, createIam, freePort, signUp, type Iam } from "./support/harness.js";

/**
 * The whole grant through a standard OAuth client library (openid-client), over real HTTP: if it
 * logs in, any RFC 8628 client can (issue 3).
 */
describe.each(testDatabases())("a standard RFC 8628 client on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let server: RunningServer;
  let config: client.Configuration;

  beforeAll(async () => {
    database = await open();
    const port = await freePort();
    const iamUrl = `http://127.0.0.1:${port}`;
    iam = await createIam(database, { config: { iamUrl, trustedOrigins: [iamUrl], deviceIntervalSeconds: 1 } });
    server = await listen(iam.app, port, "127.0.0.1");
    // discovery through RFC 8414 metadata, as a client that knows only the issuer would do
    config = await client.discovery(new URL(iamUrl), "core-cli", undefined, client.None(), {
      algorithm: "oauth2",
      execute: [client.allowInsecureRequests],
    });
  });
  afterAll(async () => {
    await server?.close();
    await database?.close();
  });

  it("logs in with the device grant, refreshes with rotation and revokes", async () => {
    const ada = await signUp(iam);
    const device = await client.initiateDeviceAuthorization(config, {});
    expect(device.user_code).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
    expect(device.verification_uri_complete).toContain(device.user_code);

    const tokensPromise = client.pollDeviceAuthorizationGrant(config, device);
    // approve a little later, while the client polls
    await new Promise((r) => setTimeout(r, 300));
    const approved = await call(iam, "POST", "/oauth/device/authorize", { token: ada.token, body: { user_code: device.user_code } });
    expect(approved.status).toBe(200);
    iam.clock.advance(60_000);
    const tokens = await tokensPromise;
    expect(tokens.token_type).toBe("bearer");
    expect(tokens.refresh_token).toBeTruthy();

    const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token!);
    expect(refreshed.refresh_token).not.toBe(tokens.refresh_token);
    await expect(client.refreshTokenGrant(config, tokens.refresh_token!)).rejects.toMatchObject({ error: "invalid_grant" });

    await client.tokenRevocation(config, refreshed.access_token);
    expect((await call(iam, "POST", "/api/v1/cli/whoami", { token: refreshed.access_token })).status).toBe(401);
  }, 30_000);

  it("surfaces access_denied to the client when the user denies", async () => {
    const ada = await signUp(iam);
    const device = await client.initiateDeviceAuthorization(config, {});
    const tokensPromise = client.pollDeviceAuthorizationGrant(config, device);
    await call(iam, "POST", "/oauth/device/deny", { token: ada.token, body: { user_code: device.user_code } });
    await expect(tokensPromise).rejects.toMatchObject({ error: "access_denied" });
  }, 30_000);
});
