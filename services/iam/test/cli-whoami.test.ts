import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, iamWithOperator, signUp, type Iam, type Operator } from "./support/harness.js";
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
