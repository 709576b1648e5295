import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, createIam, signUp, type Iam, iamOn } from "./support/harness.js";
import { DEVICE_GRANT, oauth, pollToken, startDeviceLogin } from "./support/device.js";

/** POST /oauth/device/token and the decision routes (RFC 8628 §3.3-3.5, RFC 6749 §5). */
describe.each(testDatabases())("device token endpoint on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  beforeAll(async () => ({ database, iam } = await iamOn(open)));
  afterAll(() => database?.close());

  const approve = (token: string, user_code: string) => call(iam, "POST", "/oauth/device/authorize", { token, body: { user_code } });
  const deny = (token: string, user_code: string) => call(iam, "POST", "/oauth/device/deny", { token, body: { user_code } });

  it("answers authorization_pending while the user has not answered", async () => {
    const started = await startDeviceLogin(iam);
    const r = await pollToken(iam, started.device_code);
    expect(r).toMatchObject({ status: 400, body: { error: "authorization_pending" } });
    expect(r.headers.get("cache-control")).toBe("no-store");
  });

  it("yields the spec's token response once approved, with an access token every service accepts", async () => {
    const ada = await signUp(iam);
    const started = await startDeviceLogin(iam);
    expect((await approve(ada.token, started.user_code)).body).toEqual({ ok: true });
    const r = await pollToken(iam, started.device_code);
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(["access_token", "expires_in", "refresh_token", "token_type"]);
    expect(r.body).toMatchObject({ token_type: "bearer", expires_in: 3600 });
    expect(r.headers.get("cache-control")).toBe("no-store");
    const session = await call(iam, "GET", "/api/core/session", { token: r.body.access_token });
    expect(session.body.user.email).toBe(ada.email);
    const sessions = await call(iam, "GET", "/api/sessions", { token: r.body.access_token });
    expect(sessions.body.data.some((s: { current: boolean }) => s.current)).toBe(true);
  });

  it("consumes the code: it yields tokens once, then invalid_grant", async () => {
    const ada = await signUp(iam);
    const started = await startDeviceLogin(iam);
    await approve(ada.token, started.user_code);
    expect((await pollToken(iam, started.device_code)).status).toBe(200);
    expect((await pollToken(iam, started.device_code)).body.error).toBe("invalid_grant");
  });

  it("gives tokens to exactly one of two concurrent polls", async () => {
    const ada = await signUp(iam);
    const started = await startDeviceLogin(iam);
    await approve(ada.token, started.user_code);
    const results = await Promise.all([pollToken(iam, started.device_code), pollToken(iam, started.device_code)]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 400]);
  });

  it("answers access_denied once the user denies", async () => {
    const ada = await signUp(iam);
    const started = await startDeviceLogin(iam);
    expect((await deny(ada.token, started.user_code)).body).toEqual({ ok: true });
    expect((await pollToken(iam, started.device_code)).body.error).toBe("access_denied");
  });

  it("answers slow_down to a client polling faster than the interval, and keeps the longer interval", async () => {
    const fast = await createIam(database, { config: { deviceIntervalSeconds: 1 } });
    const started = await startDeviceLogin(fast);
    expect((await pollToken(fast, started.device_code)).body.error).toBe("authorization_pending");
    const tooSoon = await pollToken(fast, started.device_code);
    expect(tooSoon.body.error).toBe("slow_down");
    // the interval grew by 5 s (RFC 8628 §3.5): waiting the old 1 s is still too fast …
    fast.clock.advance(1_100);
    expect((await pollToken(fast, started.device_code)).body.error).toBe("slow_down");
    // … and waiting the new 11 s (1 + 5 + 5) is not
    fast.clock.advance(11_000);
    expect((await pollToken(fast, started.device_code)).body.error).toBe("authorization_pending");
  });

  it("answers expired_token once the code's lifetime has passed, and not a moment before", async () => {
    const brief = await createIam(database, { config: { deviceCodeSeconds: 1, deviceIntervalSeconds: 1 } });
    const started = await startDeviceLogin(brief);
    brief.clock.advance(999);
    expect((await pollToken(brief, started.device_code)).body.error).toBe("authorization_pending");
    brief.clock.advance(1);
    expect((await pollToken(brief, started.device_code)).body.error).toBe("expired_token");
    const ada = await signUp(brief);
    const late = await call(brief, "POST", "/oauth/device/authorize", { token: ada.token, body: { user_code: started.user_code } });
    expect(late.status).toBe(404);
  });

  it("answers invalid_grant for an unknown device code", async () => {
    expect((await pollToken(iam, "not-a-device-code")).body.error).toBe("invalid_grant");
  });

  it("answers invalid_client for another client's poll and invalid_request for missing parameters", async () => {
    const started = await startDeviceLogin(iam);
    expect((await pollToken(iam, started.device_code, "other")).body.error).toBe("invalid_client");
    for (const missing of ["grant_type", "device_code", "client_id"]) {
      const params: Record<string, string> = { grant_type: DEVICE_GRANT, device_code: started.device_code, client_id: "core-cli" };
      delete params[missing];
      const r = await oauth(iam, "/oauth/device/token", params);
      expect(r).toMatchObject({ status: 400, body: { error: "invalid_request" } });
      expect(r.body.error_description).toContain(missing);
    }
  });

  it("answers unsupported_grant_type for any other grant", async () => {
    const r = await oauth(iam, "/oauth/device/token", { grant_type: "password", device_code: "x", client_id: "core-cli" });
    expect(r.body.error).toBe("unsupported_grant_type");
  });

  it("accepts the user code in any case, with or without the dash", async () => {
    const ada = await signUp(iam);
    for (const shape of [(c: string) => c.toLowerCase(), (c: string) => c.replace("-", ""), (c: string) => ` ${c.replace("-", " ").toLowerCase()} `]) {
      const started = await startDeviceLogin(iam);
      expect((await approve(ada.token, shape(started.user_code))).status).toBe(200);
      expect((await pollToken(iam, started.device_code)).status).toBe(200);
    }
  });

  it("refuses approval without a session (401), with a wrong code (404), and twice (404)", async () => {
    const ada = await signUp(iam);
    const started = await startDeviceLogin(iam);
    expect((await call(iam, "POST", "/oauth/device/authorize", { body: { user_code: started.user_code } })).status).toBe(401);
    expect((await approve(ada.token, "BCDF-GHJK")).status).toBe(404);
    expect((await approve(ada.token, "not a code")).status).toBe(404);
    expect((await approve(ada.token, started.user_code)).status).toBe(200);
    expect((await approve(ada.token, started.user_code)).status).toBe(404);
    expect((await call(iam, "POST", "/oauth/device/authorize", { token: ada.token, body: {} })).status).toBe(400);
  });

  it("rate limits wrong user codes per user with 429 and Retry-After", async () => {
    const limited = await createIam(database, { config: { rateLimits: { enabled: true, userCodeFailures: 3 } } });
    const ada = await signUp(limited);
    for (let i = 0; i < 3; i++) expect((await call(limited, "POST", "/oauth/device/authorize", { token: ada.token, body: { user_code: "BCDF-GHJK" } })).status).toBe(404);
    const refused = await call(limited, "POST", "/oauth/device/authorize", { token: ada.token, body: { user_code: "BCDF-GHJK" } });
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
  });

  it("records approvals, denials and token issues in the audit log", async () => {
    const ada = await signUp(iam);
    const started = await startDeviceLogin(iam);
    await approve(ada.token, started.user_code);
    await pollToken(iam, started.device_code);
    const rows = await database.db.execute(`select action, outcome from iam.audit_events where actor_id = '${ada.userId}'` as never);
    const actions = ((rows as unknown as { rows: { action: string }[] }).rows ?? []).map((r) => r.action);
    expect(actions).toEqual(expect.arrayContaining(["device.approve", "device.token"]));
  });
});
