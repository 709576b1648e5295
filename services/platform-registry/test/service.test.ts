import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadCommonConfig, silentLogger, type BuiltService } from "@core/kit";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { buildService, SERVICE_ID } from "../src/index.js";
import { deadUrl, principal, startFakeIam, type FakeIam } from "../../../packages/service-auth/test/support/fake-iam.js";
import { startRegistry, type Registry } from "./support/registry.js";

/** The registry as the launcher builds it (src/index.ts), on a database and an IAM address. */
function built(handle: DatabaseHandle, iamUrl: string, secret: string | null = "registry-secret"): Promise<BuiltService> {
  return buildService({
    name: SERVICE_ID,
    common: loadCommonConfig({ CORE_IAM_URL: iamUrl }),
    db: handle.db,
    pingDatabase: handle.ping,
    logger: silentLogger(),
    serviceCredentials: new Map(secret ? [[SERVICE_ID, secret]] : []),
    env: {},
  });
}

const EVERY_ROUTE = {
  "/platforms": ["get", "post"],
  "/platforms/{platformId}": ["get", "patch"],
  "/platforms/{platformId}/stacks": ["get", "post"],
  "/platforms/{platformId}/stacks/{stackId}": ["delete", "get", "patch"],
};

describe.each(testDatabases())("the platform registry service on $name", (database) => {
  let r: Registry;
  let iam: FakeIam;
  beforeAll(async () => {
    r = await startRegistry(database);
    iam = await startFakeIam();
    iam.serviceSecrets.set(SERVICE_ID, "registry-secret");
  });
  afterAll(async () => {
    await iam?.close();
    await r?.close();
  });

  it("describes every route in its OpenAPI 3.1 document", async () => {
    const res = await r.app.request("/openapi.json");
    const doc = (await res.json()) as { openapi: string; paths: Record<string, Record<string, unknown>> };
    expect(doc.openapi).toBe("3.1.0");
    const described = Object.fromEntries(
      Object.entries(doc.paths)
        .filter(([path]) => path.startsWith("/platforms"))
        .map(([path, ops]) => [path, Object.keys(ops).sort()]),
    );
    expect(described).toEqual(EVERY_ROUTE);
  });

  it("answers malformed JSON and other content types on its routes with the 4xx envelope", async () => {
    const headers = await r.as.service();
    const malformed = await r.app.request("/platforms", { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: "{" });
    expect(malformed.status).toBe(400);
    expect(((await malformed.json()) as { error: { code: string } }).error.code).toBe("BAD_REQUEST");
    const text = await r.app.request("/platforms", { method: "POST", headers: { ...headers, "content-type": "text/plain" }, body: "hi" });
    expect(text.status).toBe(415);
  });

  it("is healthy when its database and IAM answer", async () => {
    const service = await built(r.handle, iam.url);
    const res = await service.fetch(new Request("http://registry/health"));
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: "healthy", checks: { database: { status: "ok" }, iam: { status: "ok" } } });
  });

  it("is degraded (503) when IAM is down", async () => {
    const service = await built(r.handle, await deadUrl());
    const res = await service.fetch(new Request("http://registry/health"));
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ status: "degraded", checks: { database: { status: "ok" }, iam: { status: "fail" } } });
  });

  it("resolves sessions through IAM with its own service credential", async () => {
    const service = await built(r.handle, iam.url);
    iam.sessions.set("op-session", principal({ orgType: "core-operator", platformId: null, permissions: ["platforms:manage", "platform:read"] }));
    const res = await service.fetch(
      new Request("http://registry/platforms", {
        method: "POST",
        headers: { authorization: "Bearer op-session", "content-type": "application/json" },
        body: JSON.stringify({ name: "Wired", slug: "wired", tier: "starter" }),
      }),
    );
    expect(res.status).toBe(201);
    const tokenCall = iam.received.find((c) => c.route === "POST /api/core/service-token");
    expect(tokenCall?.authorization).toBe(`Basic ${Buffer.from(`${SERVICE_ID}:registry-secret`).toString("base64")}`);
  });

  it("refuses to start without a service credential of its own", async () => {
    await expect(built(r.handle, iam.url, null)).rejects.toMatchObject({ name: "ConfigError", message: expect.stringMatching(/No service credential for platform-registry: set CORE_SERVICE_CREDENTIALS/) });
  });
});
