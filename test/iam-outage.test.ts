import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openFreshPostgres } from "@core/storage";
import { POSITIVE_TTL_MS } from "@core/service-auth";
import { launch, replicaPorts, until, type Launched } from "./support/launched.js";

/**
 * IAM out of reach from the registries (DESIGN §4): IAM and the two registries as separate
 * processes, as an operator runs them (`npm start -- --only <name>`), and IAM stopped. What a
 * registry holds in its cache goes on working for the cache's life; everything that needs IAM is
 * 503 UPSTREAM_UNAVAILABLE, never a 500 and never a wrong 401; IAM back, everything works again.
 */
const url = process.env.TEST_DATABASE_URL;
const PASSWORD = "correct-horse-battery";

describe.skipIf(!url)("IAM unreachable from the registries", { timeout: 120_000 }, () => {
  let database: Awaited<ReturnType<typeof openFreshPostgres>>;
  let iam: Launched;
  let registries: Launched[];
  let env: NodeJS.ProcessEnv;
  let at: Awaited<ReturnType<typeof replicaPorts>>["url"];
  const dataDir = mkdtempSync(join(tmpdir(), "core-iam-outage-"));

  beforeAll(async () => {
    database = await openFreshPostgres(url!);
    const ports = await replicaPorts(1);
    at = ports.url;
    env = {
      ...ports.env,
      DATABASE_URL: database.url,
      CORE_DATA_DIR: dataDir,
      CORE_IAM_URL: at("iam", 0),
      CORE_PLATFORM_REGISTRY_URL: at("platform-registry", 0),
      CORE_SERVICE_CREDENTIALS: "platform-registry:registry-secret-0123456789abcdef,stack-registry:stacks-secret-0123456789abcdef",
      CORE_RATE_LIMIT: "off",
      LOG_LEVEL: "warn",
    };
    iam = launch(env, ["--only", "iam"]);
    await iam.running;
    registries = [launch(env, ["--only", "platform-registry"]), launch(env, ["--only", "stack-registry"])];
    await Promise.all(registries.map((r) => r.running));
  });
  afterAll(async () => {
    await Promise.all([iam, ...(registries ?? [])].map((p) => p?.stop()));
    await database?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("serves cached principals for the cache's life, answers the rest 503, and recovers when IAM is back", async () => {
    const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${at("iam", 0)}${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
    const signUp = async (email: string) => {
      const response = await post("/api/auth/sign-up/email", { email, password: PASSWORD, name: "Person" });
      return { token: ((await response.json()) as { token: string }).token, cookie: (response.headers.get("set-cookie") ?? "").split(";")[0]! };
    };
    const owner = await signUp("owner@outage.example");
    const other = await signUp("other@outage.example");
    const setup = (await (await post("/api/core/org-setup", { name: "Outage", slug: "outage" }, { cookie: owner.cookie, origin: at("iam", 0) })).json()) as { platformId: string };
    const key = (await (await post("/api/auth/api-key/create", { name: "outage" }, { authorization: `Bearer ${owner.token}` })).json()) as { key: string };

    const read = async (headers: Record<string, string>) => {
      const response = await fetch(`${at("platform-registry", 0)}/platforms/${setup.platformId}/stacks`, { headers, signal: AbortSignal.timeout(15_000) });
      const body = (await response.json()) as { error?: { code: string } };
      return { status: response.status, code: body.error?.code };
    };
    const stacks = async (headers: Record<string, string>) => {
      const response = await fetch(`${at("stack-registry", 0)}/api/v1/stacks`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify({ name: "x", displayName: "X", description: "X" }) });
      const body = (await response.json()) as { error?: { code: string } };
      return { status: response.status, code: body.error?.code };
    };
    const bearer = { authorization: `Bearer ${owner.token}` };
    // warm: the registry has the owner's session and key in its cache
    expect(await read(bearer)).toEqual({ status: 200, code: undefined });
    expect(await read({ "x-api-key": key.key })).toEqual({ status: 200, code: undefined });

    // IAM gone at once, as a crash or a partition takes it
    iam.child.kill("SIGKILL");
    await iam.exited;
    // within the cache's life, the cached principals read on
    expect(await read(bearer)).toEqual({ status: 200, code: undefined });
    expect(await read({ "x-api-key": key.key })).toEqual({ status: 200, code: undefined });
    const unavailable = { status: 503, code: "UPSTREAM_UNAVAILABLE" };
    // anything IAM must answer: a session or key the registry has not seen, at either registry
    expect(await read({ authorization: `Bearer ${other.token}` })).toEqual(unavailable);
    expect(await read({ "x-api-key": "core_not_a_key_the_registry_has_seen" })).toEqual(unavailable);
    expect(await stacks({ authorization: `Bearer ${other.token}` })).toEqual(unavailable);
    // past the cache's life, the owner too: 503, not a 401 that would sign a client out
    for (const headers of [bearer, { "x-api-key": key.key }]) {
      await until(async () => (await read(headers)).status !== 200, "the cached principal to expire", POSITIVE_TTL_MS + 3_000);
      expect(await read(headers)).toEqual(unavailable);
    }
    // the registries kept running and say what is missing
    const health = (await (await fetch(`${at("platform-registry", 0)}/health`)).json()) as { status: string; checks: Record<string, { status: string }> };
    expect(health.status).toBe("degraded");
    expect(health.checks.iam?.status).toBe("fail");
    expect(health.checks.database?.status).toBe("ok");

    iam = launch(env, ["--only", "iam"]);
    await iam.running;
    expect(await read(bearer)).toEqual({ status: 200, code: undefined });
    expect(await read({ "x-api-key": key.key })).toEqual({ status: 200, code: undefined });
    expect(await stacks({ authorization: `Bearer ${other.token}` })).toEqual({ status: 403, code: "FORBIDDEN" });
    for (const registry of registries) expect(registry.child.exitCode).toBeNull();
  });
});
