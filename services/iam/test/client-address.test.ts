import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, createApiKey, createIam, PASSWORD, signUp, type Iam } from "./support/harness.js";

/**
 * DESIGN §10: behind `CORE_TRUST_PROXY=<n>` proxies the client address is the one the first proxy
 * wrote, counted from the right, so a client that writes its own X-Forwarded-For entries cannot
 * spread its attempts over made-up addresses; and every limit counts atomically, so attempts sent
 * all at once cannot pass a check before any of them is counted.
 */
describe.each(testDatabases())("client addresses and atomic limits on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  const trustProxy = process.env.CORE_TRUST_PROXY;
  beforeAll(async () => {
    database = await open();
    iam = await createIam(database, { config: { rateLimits: { enabled: true, signIn: 4, signUp: 100, apiKeyFailures: 5, userCodeFailures: 3 } } });
    process.env.CORE_TRUST_PROXY = "1";
  });
  afterAll(async () => {
    if (trustProxy === undefined) delete process.env.CORE_TRUST_PROXY;
    else process.env.CORE_TRUST_PROXY = trustProxy;
    await database?.close();
  });

  const signIn = (email: string, password: string, forwardedFor: string) =>
    call(iam, "POST", "/api/auth/sign-in/email", { headers: { origin: iam.origin, "x-forwarded-for": forwardedFor }, body: { email, password } });

  it("limits sign-ins by the address the proxy wrote, however the client rotates the entries left of it", async () => {
    const ada = await signUp(iam);
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push((await signIn(ada.email, `wrong-${i}`, `10.${i}.0.1, 192.0.2.${i}, 198.51.100.20`)).status);
    expect(statuses.slice(0, 4)).toEqual([401, 401, 401, 401]);
    expect(statuses.slice(4)).toEqual([429, 429, 429, 429]);
    // the right password from the same client waits too; another client signs in
    expect((await signIn(ada.email, PASSWORD, "203.0.113.200, 198.51.100.20")).status).toBe(429);
    expect((await signIn(ada.email, PASSWORD, "198.51.100.21")).status).toBe(200);
  });

  it("limits checks of a password as it limits sign-ins: verify-password answers whether one is right", async () => {
    const eve = await signUp(iam);
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      statuses.push((await call(iam, "POST", "/api/auth/verify-password", { token: eve.token, headers: { "x-forwarded-for": "198.51.100.30" }, body: { password: `guess-${i}` } })).status);
    }
    expect(statuses.slice(0, 4).every((s) => s !== 429), String(statuses)).toBe(true);
    expect(statuses.slice(4)).toEqual([429, 429]);
  });

  it("lets no more sign-ins through than the limit when they arrive all at once", async () => {
    const bob = await signUp(iam);
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => signIn(bob.email, `wrong-${i}`, `10.0.${i}.9, 198.51.100.22`)));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s !== 429)).toHaveLength(4);
    expect(statuses.filter((s) => s === 429)).toHaveLength(16);
  });

  it("lets no more wrong API keys be tried at IAM than the limit when they arrive all at once, nor a rotated entry dodge it", async () => {
    const cy = await signUp(iam);
    const { key } = await createApiKey(iam, cy);
    const whoami = (apiKey: string, forwardedFor: string) => call(iam, "POST", "/api/v1/cli/whoami", { headers: { "x-api-key": apiKey, "x-forwarded-for": forwardedFor } });
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => whoami(`core_guess-${i}`, `10.1.${i}.1, 198.51.100.23`)));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 401)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(15);
    expect((await whoami(key, "10.9.9.9, 198.51.100.23")).status).toBe(429);
    // a valid key does not use up the client's failures
    for (let i = 0; i < 8; i++) expect((await whoami(key, "198.51.100.24")).status).toBe(200);
    expect((await whoami("core_guess-after", "198.51.100.24")).status).toBe(401);
  });

  it("lets no more wrong user codes be tried than the limit when they arrive all at once", async () => {
    const dee = await signUp(iam);
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) => call(iam, "POST", "/oauth/device/authorize", { token: dee.token, body: { user_code: `WXYZ-${String(1000 + i)}` } })),
    );
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 404)).toHaveLength(3);
    expect(statuses.filter((s) => s === 429)).toHaveLength(9);
  });
});
