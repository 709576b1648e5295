import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { createIam, type Iam, iamOn } from "./support/harness.js";
import { oauth, startDeviceLogin } from "./support/device.js";

/** POST /oauth/device/code (RFC 8628 §3.1-3.2; spec §2.2, §4.3; DESIGN §5). */
describe.each(testDatabases())("device authorization endpoint on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  beforeAll(async () => ({ database, iam } = await iamOn(open)));
  afterAll(() => database?.close());

  it("answers the spec's device code response with verification_uri_complete, and no-store", async () => {
    const r = await oauth(iam, "/oauth/device/code", { client_id: "core-cli" });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(["device_code", "expires_in", "interval", "user_code", "verification_uri", "verification_uri_complete"]);
    expect(r.body).toMatchObject({ verification_uri: "http://localhost:4100/device", expires_in: 600, interval: 5 });
    expect(r.body.verification_uri_complete).toBe(`http://localhost:4100/device?user_code=${r.body.user_code}`);
    expect(r.headers.get("cache-control")).toBe("no-store");
  });

  it("issues an XXXX-XXXX user code from the 20 consonants of RFC 8628 §6.1", async () => {
    for (let i = 0; i < 20; i++) {
      const { user_code } = await startDeviceLogin(iam);
      expect(user_code).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
    }
  });

  it("issues device codes of at least 128 random bits, different every time", async () => {
    const codes = new Set<string>();
    for (let i = 0; i < 10; i++) codes.add((await startDeviceLogin(iam)).device_code);
    expect(codes.size).toBe(10);
    for (const code of codes) expect(Buffer.from(code, "base64url").length).toBeGreaterThanOrEqual(16);
  });

  it("stores the device code hashed, never as given", async () => {
    const { device_code } = await startDeviceLogin(iam);
    const rows = await database.db.execute(`select device_code_hash from iam.device_codes` as never);
    const hashes = ((rows as unknown as { rows: { device_code_hash: string }[] }).rows ?? []).map((r) => r.device_code_hash);
    expect(hashes.length).toBeGreaterThan(0);
    expect(hashes).not.toContain(device_code);
  });

  it("accepts the parameters as JSON as well as a form", async () => {
    const r = await oauth(iam, "/oauth/device/code", { client_id: "core-cli" }, { json: true });
    expect(r.status).toBe(200);
  });

  it("refuses another client with invalid_client", async () => {
    const r = await oauth(iam, "/oauth/device/code", { client_id: "someone-else" });
    expect(r).toMatchObject({ status: 400, body: { error: "invalid_client" } });
    expect(typeof r.body.error_description).toBe("string");
  });

  it("refuses a missing client_id with invalid_request", async () => {
    const r = await oauth(iam, "/oauth/device/code", {});
    expect(r).toMatchObject({ status: 400, body: { error: "invalid_request" } });
  });

  it("refuses a body that is neither a form nor JSON with invalid_request", async () => {
    const response = await iam.app.request("/oauth/device/code", { method: "POST", headers: { "content-type": "text/plain" }, body: "client_id=core-cli" });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: "invalid_request" });
  });

  it("takes its lifetime and interval from the configuration", async () => {
    const quick = await createIam(database, { config: { deviceCodeSeconds: 2, deviceIntervalSeconds: 1, activationUrl: "https://login.example/activate" } });
    const started = await startDeviceLogin(quick);
    expect(started).toMatchObject({ expires_in: 2, interval: 1, verification_uri: "https://login.example/activate" });
  });
});
