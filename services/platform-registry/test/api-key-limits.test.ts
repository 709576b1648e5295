import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, createApiKey, signUp, startIamAndRegistry, uniqueSlug } from "../../iam/test/support/harness.js";

/**
 * Wrong API keys sent to a registry are limited per client address, end to end through a real
 * IAM: one client guessing keys must not lock every other client of the registry out.
 */
describe.each(testDatabases())("API key limits through the registry on $name", ({ open }) => {
  let database: DatabaseHandle;
  let running: Awaited<ReturnType<typeof startIamAndRegistry>>;
  const trustProxy = process.env.CORE_TRUST_PROXY;
  beforeAll(async () => {
    database = await open();
    running = await startIamAndRegistry(database, {
      rateLimits: { enabled: true, windowSeconds: 60, signIn: 10, signUp: 50, magicLink: 5, apiKeyFailures: 3, userCodeFailures: 10, passkey: 20 },
    });
    // the registry sees every test request from 127.0.0.1; X-Forwarded-For tells the clients apart
    process.env.CORE_TRUST_PROXY = "1";
  });
  afterAll(async () => {
    if (trustProxy === undefined) delete process.env.CORE_TRUST_PROXY;
    else process.env.CORE_TRUST_PROXY = trustProxy;
    await running?.close();
    await database?.close();
  });

  async function keyOfAPlatformOwner() {
    const ada = await signUp(running.iam);
    const slug = uniqueSlug("keys");
    const setup = await call(running.iam, "POST", "/api/core/org-setup", { cookie: ada.cookie, body: { name: `Keys ${slug}`, slug } });
    expect(setup.status).toBe(201);
    return { key: (await createApiKey(running.iam, ada)).key, platformId: setup.body.platformId as string };
  }
  const getPlatform = (platformId: string, key: string, from: string) =>
    fetch(`${running.registryUrl}/platforms/${platformId}`, { headers: { "x-api-key": key, "x-forwarded-for": from } });

  it("answers 429 RATE_LIMITED with Retry-After to the client that sent too many wrong keys, and not to another", async () => {
    const { key, platformId } = await keyOfAPlatformOwner();
    for (let i = 0; i < 3; i++) expect((await getPlatform(platformId, `core_guess-${i}`, "198.51.100.1")).status).toBe(401);
    const limited = await getPlatform(platformId, `core_guess-4`, "198.51.100.1");
    expect(limited.status).toBe(429);
    expect(((await limited.json()) as { error: { code: string } }).error.code).toBe("RATE_LIMITED");
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);

    const other = await getPlatform(platformId, key, "198.51.100.2");
    expect(other.status).toBe(200);
  });

  it("counts a client behind the trusted proxy by the address the proxy wrote: a rotated leftmost entry dodges nothing", async () => {
    const { key, platformId } = await keyOfAPlatformOwner();
    // the client writes its own X-Forwarded-For; the proxy appends the address it saw
    const spoofed = (i: number) => `203.0.113.${i}, 198.51.100.4`;
    for (let i = 0; i < 3; i++) expect((await getPlatform(platformId, `core_rotated-${i}`, spoofed(i))).status).toBe(401);
    for (let i = 3; i < 6; i++) expect((await getPlatform(platformId, `core_rotated-${i}`, spoofed(i))).status).toBe(429);
    expect((await getPlatform(platformId, key, spoofed(99))).status).toBe(429);
    // the address a client writes is not its address: the one it claimed is not limited
    expect((await getPlatform(platformId, key, "203.0.113.1")).status).toBe(200);
  });

  it("lets no more wrong keys be tried than the limit when they arrive all at once", async () => {
    const { key, platformId } = await keyOfAPlatformOwner();
    const answers = await Promise.all(Array.from({ length: 24 }, (_, i) => getPlatform(platformId, `core_parallel-${i}`, "198.51.100.5")));
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses.filter((s) => s === 401)).toHaveLength(3);
    expect(statuses.filter((s) => s === 429)).toHaveLength(21);
    expect((await getPlatform(platformId, key, "198.51.100.5")).status).toBe(429);
  });

  it("lets the limited client in again once the window has passed", async () => {
    const { key, platformId } = await keyOfAPlatformOwner();
    for (let i = 0; i < 4; i++) await getPlatform(platformId, `core_guess-again-${i}`, "198.51.100.3");
    expect((await getPlatform(platformId, key, "198.51.100.3")).status).toBe(429);
    // IAM's clock only: the registry checks IAM's service tokens against real time, so it goes back after
    running.iam.clock.advance(60_000);
    try {
      expect((await getPlatform(platformId, key, "198.51.100.3")).status).toBe(200);
    } finally {
      running.iam.clock.advance(-60_000);
    }
  });
});
