import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, iamWithOperator, signIn, signUp, tenantOrg, type Iam, type Operator } from "./support/harness.js";
import { pollToken, startDeviceLogin } from "./support/device.js";

/**
 * Issue 26: one stolen session must not give away the others (list-sessions answers no tokens), and
 * a CLI access token keeps the lifetime it was issued with (`core org switch` must not make a week
 * of an hour).
 */
describe.each(testDatabases())("session secrets and lifetimes on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let op: Operator;
  beforeAll(async () => {
    // browser sessions of a week, CLI access tokens of an hour: the library refreshes a week-long session a day old
    ({ database, iam, op } = await iamWithOperator(open, { config: { sessionSeconds: 7 * 86400, accessTokenSeconds: 3600 } }));
  });
  afterAll(() => database?.close());

  it("answers another session's list-sessions with no token of any session, the caller's own marked current", async () => {
    const first = await signUp(iam);
    const second = await signIn(iam, first);
    const listed = await call(iam, "GET", "/api/auth/list-sessions", { token: second.token });
    expect(listed.status).toBe(200);
    const text = JSON.stringify(listed.body);
    expect(text).not.toContain(first.token);
    expect(text).not.toContain(second.token);
    expect(listed.body).toHaveLength(2);
    for (const session of listed.body) expect(session).not.toHaveProperty("token");
    const current = listed.body.filter((s: { current: boolean }) => s.current);
    expect(current).toHaveLength(1);
    const own = await call(iam, "GET", "/api/core/session", { token: second.token });
    expect(current[0].id).toBe(own.body.session.id);

    // by cookie too (the browser's way)
    const byCookie = await call(iam, "GET", "/api/auth/list-sessions", { cookie: first.cookie });
    expect(JSON.stringify(byCookie.body)).not.toContain(second.token);
    expect(byCookie.body.map((s: { current: boolean }) => s.current).sort()).toEqual([false, true]);
  });

  it("revokes another session by id, and the caller's own by token through the library", async () => {
    const first = await signUp(iam);
    const second = await signIn(iam, first);
    const third = await signIn(iam, first);
    const listed = await call(iam, "GET", "/api/auth/list-sessions", { token: second.token });
    const other = listed.body.find((s: { current: boolean; id: string }) => !s.current && s.id !== undefined);
    const firstId = (await call(iam, "GET", "/api/core/session", { token: first.token })).body.session.id;
    expect(listed.body.map((s: { id: string }) => s.id)).toContain(firstId);
    expect(other).toBeDefined();
    expect((await call(iam, "DELETE", `/api/sessions/${firstId}`, { token: second.token })).status).toBe(200);
    expect((await call(iam, "GET", "/api/core/session", { token: first.token })).status).toBe(401);

    const revoked = await call(iam, "POST", "/api/auth/revoke-session", { token: third.token, body: { token: third.token } });
    expect(revoked.status).toBe(200);
    expect((await call(iam, "GET", "/api/core/session", { token: third.token })).status).toBe(401);
    expect((await call(iam, "GET", "/api/core/session", { token: second.token })).status).toBe(200);
  });

  it("keeps a CLI access token's expiry through an organization switch and other library calls", async () => {
    const ada = await signUp(iam);
    const one = await tenantOrg(iam, op, ada);
    const two = await tenantOrg(iam, op, ada);
    const started = await startDeviceLogin(iam);
    expect((await call(iam, "POST", "/oauth/device/authorize", { token: ada.token, body: { user_code: started.user_code } })).status).toBe(200);
    const issued = await pollToken(iam, started.device_code);
    expect(issued.body.expires_in).toBe(3600);
    const token = issued.body.access_token as string;
    const expiryOf = async () => {
      const r = await call(iam, "GET", "/api/core/session", { token });
      expect(r.status).toBe(200);
      return Date.parse(r.body.session.expiresAt);
    };
    const before = await expiryOf();
    expect(before - iam.clock.now().getTime()).toBeLessThanOrEqual(3600_000);

    for (const slug of [two.slug, one.slug]) {
      const switched = await call(iam, "POST", "/api/auth/organization/set-active", { token, body: { organizationSlug: slug } });
      expect(switched.status).toBe(200);
      expect(await expiryOf()).toBe(before);
    }
    expect((await call(iam, "GET", "/api/auth/get-session", { token })).status).toBe(200);
    expect((await call(iam, "GET", "/api/auth/organization/list", { token })).status).toBe(200);
    expect(await expiryOf()).toBe(before);

    // an hour after it was issued, it is over
    iam.clock.advance(3601_000);
    try {
      expect((await call(iam, "POST", "/api/v1/cli/whoami", { token })).status).toBe(401);
    } finally {
      iam.clock.advance(-3601_000);
    }
  });

  it("still lets the library refresh a browser session a day old (a week from now)", async () => {
    const ada = await signUp(iam);
    const expiry = async () => Date.parse((await call(iam, "GET", "/api/auth/get-session", { token: ada.token })).body.session.expiresAt);
    const first = await expiry();
    // the library refreshes by the database row's age: make the session a day and a minute old
    await database.db.execute(
      (await import("drizzle-orm")).sql`update iam.session set expires_at = expires_at - interval '1 day 1 minute' where token = ${ada.token}`,
    );
    expect(await expiry()).toBeGreaterThanOrEqual(first - 60_000);
  });
});
