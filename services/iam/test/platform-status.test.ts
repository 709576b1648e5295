import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import {
  call,
  failingFields,
  joinOrg,
  operator,
  principalOf,
  serviceToken,
  signUp,
  startIamAndRegistry,
  uniqueSlug,
  type Iam,
} from "./support/harness.js";

describe.each(testDatabases())("platform status on $name", ({ open }) => {
  let database: DatabaseHandle;
  let stack: Awaited<ReturnType<typeof startIamAndRegistry>>;
  let iam: Iam;
  let op: Awaited<ReturnType<typeof operator>>;
  let service: string;

  beforeAll(async () => {
    database = await open();
    stack = await startIamAndRegistry(database);
    iam = stack.iam;
    op = await operator(iam);
    service = await serviceToken(iam);
  });
  afterAll(async () => {
    await stack?.close();
    await database?.close();
  });

  /** A tenant with its platform, made through org-setup as a customer would. */
  async function tenant() {
    const owner = await signUp(iam);
    const r = await call(iam, "POST", "/api/core/org-setup", { cookie: owner.cookie, body: { name: "Acme", slug: uniqueSlug("acme") } });
    if (r.status !== 201) throw new Error(`org-setup failed: ${r.status} ${JSON.stringify(r.body)}`);
    return { owner, orgId: r.body.orgId as string, platformId: r.body.platformId as string };
  }

  const setStatus = (as: { token?: string }, body: unknown) => call(iam, "POST", "/internal/platform-status", { ...as, body });

  /** The registry, as the tenant's owner sees it. */
  const registry = async (method: "GET" | "PATCH", platformId: string, token: string, body?: unknown) => {
    const response = await fetch(`${stack.registryUrl}/platforms/${platformId}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { "content-type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: response.status, body: (await response.json()) as any };
  };

  it("lets an operator suspend a platform: principals carry it and the registry refuses writes with 403 PLATFORM_SUSPENDED", async () => {
    const { owner, platformId } = await tenant();
    expect((await principalOf(iam, owner)).platformStatus).toBe("active");
    const r = await setStatus({ token: op.token }, { platformId, status: "suspended" });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ platformId, status: "suspended" });
    expect(await principalOf(iam, owner)).toMatchObject({ platformId, platformStatus: "suspended" });

    const write = await registry("PATCH", platformId, owner.token, { name: "Renamed" });
    expect(write.status).toBe(403);
    expect(write.body.error.code).toBe("PLATFORM_SUSPENDED");
    // reads go on
    const read = await registry("GET", platformId, owner.token);
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ id: platformId, status: "suspended", name: "Acme" });
  });

  it("lets an operator activate it again: writes are allowed once more", async () => {
    const { owner, platformId } = await tenant();
    await setStatus({ token: op.token }, { platformId, status: "suspended" });
    const r = await setStatus({ token: op.token }, { platformId, status: "active" });
    expect(r).toMatchObject({ status: 200, body: { platformId, status: "active" } });
    expect((await principalOf(iam, owner)).platformStatus).toBe("active");
    const write = await registry("PATCH", platformId, owner.token, { name: "Renamed" });
    expect(write.status).toBe(200);
    expect(write.body).toMatchObject({ name: "Renamed", status: "active" });
  });

  it("lets a service suspend and activate", async () => {
    const { owner, platformId } = await tenant();
    expect((await setStatus({ token: service }, { platformId, status: "suspended" })).status).toBe(200);
    expect((await principalOf(iam, owner)).platformStatus).toBe("suspended");
    expect((await setStatus({ token: service }, { platformId, status: "active" })).status).toBe(200);
    expect((await principalOf(iam, owner)).platformStatus).toBe("active");
  });

  it("answers 200 to a suspension of a platform suspended already", async () => {
    const { owner, platformId } = await tenant();
    for (let i = 0; i < 2; i++) {
      expect(await setStatus({ token: op.token }, { platformId, status: "suspended" })).toMatchObject({ status: 200, body: { platformId, status: "suspended" } });
    }
    expect((await principalOf(iam, owner)).platformStatus).toBe("suspended");
  });

  it("is the only way to a status: the registry sends an operator here, so principals and the registry never disagree", async () => {
    const { owner, platformId } = await tenant();
    const direct = await registry("PATCH", platformId, op.token, { status: "suspended" });
    expect(direct.status).toBe(403);
    expect(direct.body.error.message).toContain("POST /internal/platform-status");
    expect((await registry("GET", platformId, owner.token)).body.status).toBe("active");
    expect((await setStatus({ token: op.token }, { platformId, status: "suspended" })).status).toBe(200);
    expect((await principalOf(iam, owner)).platformStatus).toBe("suspended");
    expect((await registry("GET", platformId, owner.token)).body.status).toBe("suspended");
  });

  it("refuses the tenant's owner, a tenant member and a plain operator member with 403, leaving the platform active", async () => {
    const { owner, orgId, platformId } = await tenant();
    const member = await joinOrg(iam, orgId, owner);
    const opMember = await joinOrg(iam, op.orgId, op);
    for (const who of [owner, member, opMember]) {
      const r = await setStatus({ token: who.token }, { platformId, status: "suspended" });
      expect(r.status).toBe(403);
      expect(r.body.error.code).toBe("FORBIDDEN");
    }
    expect((await principalOf(iam, owner)).platformStatus).toBe("active");
    expect((await registry("GET", platformId, owner.token)).body.status).toBe("active");
  });

  it("refuses a request without credentials or with a wrong one with 401", async () => {
    const { platformId } = await tenant();
    expect((await setStatus({}, { platformId, status: "suspended" })).status).toBe(401);
    expect((await setStatus({ token: "wrong" }, { platformId, status: "suspended" })).status).toBe(401);
  });

  it("answers 404 for an unknown platform", async () => {
    const r = await setStatus({ token: op.token }, { platformId: "plt_nosuchplatform000000", status: "suspended" });
    expect(r.status).toBe(404);
    expect(r.body.error.code).toBe("NOT_FOUND");
  });

  it.each([
    ["status unknown", { status: "paused" }, "status"],
    ["status missing", { status: undefined }, "status"],
    ["platformId empty", { platformId: "" }, "platformId"],
    ["platformId missing", { platformId: undefined }, "platformId"],
  ])("answers 400 VALIDATION_ERROR for %s", async (_label, change, field) => {
    const r = await setStatus({ token: op.token }, { platformId: "plt_any", status: "suspended", ...change });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe("VALIDATION_ERROR");
    expect(failingFields(r.body)).toContain(field);
  });

  it("writes each change to the audit log", async () => {
    const { platformId } = await tenant();
    await setStatus({ token: op.token }, { platformId, status: "suspended" });
    const r = await call(iam, "GET", "/api/audit/events?action=platform.status", { token: op.token });
    const event = r.body.data.find((e: { targetId: string }) => e.targetId === platformId);
    expect(event).toMatchObject({
      action: "platform.status",
      outcome: "success",
      actorType: "user",
      actorId: op.userId,
      targetType: "platform",
      targetId: platformId,
      metadata: { status: "suspended" },
    });
  });
});
