import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "@core/storage";
import { startRegistry, unique, type Headers, type Platform, type Registry } from "./support/registry.js";

/** Every route of the registry bound to a platform, and whether it reads, writes or administers. */
interface Target {
  platformId: string;
  stackId: string;
}
interface Route {
  name: string;
  /** status: a platform's status, changed only by services (IAM relays POST /internal/platform-status) */
  kind: "read" | "write" | "admin" | "status";
  ok: number;
  request(t: Target): { method: string; path: string; body?: unknown };
}

const ROUTES: Route[] = [
  { name: "GET /platforms/:platformId", kind: "read", ok: 200, request: (t) => ({ method: "GET", path: `/platforms/${t.platformId}` }) },
  {
    name: "PATCH /platforms/:platformId (name)",
    kind: "write",
    ok: 200,
    request: (t) => ({ method: "PATCH", path: `/platforms/${t.platformId}`, body: { name: "Renamed" } }),
  },
  {
    name: "PATCH /platforms/:platformId (tier)",
    kind: "admin",
    ok: 200,
    request: (t) => ({ method: "PATCH", path: `/platforms/${t.platformId}`, body: { tier: "scale" } }),
  },
  {
    name: "PATCH /platforms/:platformId (status)",
    kind: "status",
    ok: 200,
    request: (t) => ({ method: "PATCH", path: `/platforms/${t.platformId}`, body: { status: "suspended" } }),
  },
  {
    name: "PATCH /platforms/:platformId (name with tier)",
    kind: "admin",
    ok: 200,
    request: (t) => ({ method: "PATCH", path: `/platforms/${t.platformId}`, body: { name: "Renamed", tier: "growth" } }),
  },
  {
    name: "POST /platforms",
    kind: "admin",
    ok: 201,
    request: () => ({ method: "POST", path: "/platforms", body: { name: "New", slug: unique("new"), tier: "starter" } }),
  },
  { name: "GET /platforms/:platformId/stacks", kind: "read", ok: 200, request: (t) => ({ method: "GET", path: `/platforms/${t.platformId}/stacks` }) },
  {
    name: "POST /platforms/:platformId/stacks",
    kind: "write",
    ok: 201,
    request: (t) => ({ method: "POST", path: `/platforms/${t.platformId}/stacks`, body: { tenantId: "tnt_1", name: unique("s") } }),
  },
  {
    name: "GET /platforms/:platformId/stacks/:stackId",
    kind: "read",
    ok: 200,
    request: (t) => ({ method: "GET", path: `/platforms/${t.platformId}/stacks/${t.stackId}` }),
  },
  {
    name: "PATCH /platforms/:platformId/stacks/:stackId",
    kind: "write",
    ok: 200,
    request: (t) => ({ method: "PATCH", path: `/platforms/${t.platformId}/stacks/${t.stackId}`, body: { isDefault: true } }),
  },
  {
    name: "DELETE /platforms/:platformId/stacks/:stackId",
    kind: "write",
    ok: 200,
    request: (t) => ({ method: "DELETE", path: `/platforms/${t.platformId}/stacks/${t.stackId}` }),
  },
];

/** A caller and what it may do on the target platform: the status of each kind of route. */
interface Caller {
  name: string;
  headers(r: Registry, target: Target): Promise<Headers> | Headers;
  /** expected status per kind; "ok" means the route's success status */
  expect: Record<Route["kind"], number | "ok">;
  code?: string;
}

const CALLERS: Caller[] = [
  { name: "no credential", headers: () => ({}), expect: { read: 401, write: 401, admin: 401, status: 401 } },
  { name: "an unknown session token", headers: () => ({ authorization: "Bearer not-a-session" }), expect: { read: 401, write: 401, admin: 401, status: 401 } },
  { name: "an unknown API key", headers: () => ({ "x-api-key": "not-a-key" }), expect: { read: 401, write: 401, admin: 401, status: 401 } },
  {
    name: "a service token for another service",
    headers: async (r) => ({ authorization: `Bearer ${await r.iam.mintServiceToken({ aud: "billing" })}` }),
    expect: { read: 401, write: 401, admin: 401, status: 401 },
  },
  {
    name: "an expired service token",
    headers: async (r) => ({
      authorization: `Bearer ${await r.iam.mintServiceToken({ iat: Math.floor(Date.now() / 1000) - 400, exp: Math.floor(Date.now() / 1000) - 100 })}`,
    }),
    expect: { read: 401, write: 401, admin: 401, status: 401 },
  },
  {
    name: "a member of another platform",
    headers: (r) => r.as.member("plt_other", ["platform:read", "platform:write"]),
    expect: { read: 403, write: 403, admin: 403, status: 403 },
  },
  {
    name: "a member with platform:read only",
    headers: (r, t) => r.as.member(t.platformId, ["platform:read", "billing:read"]),
    expect: { read: "ok", write: 403, admin: 403, status: 403 },
  },
  {
    name: "a member with platform:read and platform:write",
    headers: (r, t) => r.as.member(t.platformId, ["platform:read", "platform:write"]),
    expect: { read: "ok", write: "ok", admin: 403, status: 403 },
  },
  {
    name: "a tenant member holding platforms:manage by a stray grant",
    headers: (r, t) => r.as.member(t.platformId, ["platform:read", "platforms:manage"]),
    expect: { read: "ok", write: 403, admin: 403, status: 403 },
  },
  {
    name: "an API key of a member with platform:read and platform:write",
    headers: (r, t) => r.as.apiKey(t.platformId, ["platform:read", "platform:write"]),
    expect: { read: "ok", write: "ok", admin: 403, status: 403 },
  },
  {
    name: "an operator with platform:read only",
    headers: (r) => r.as.operator(["platform:read", "audit:read"]),
    expect: { read: "ok", write: 403, admin: 403, status: 403 },
  },
  {
    name: "an operator with platforms:manage and platform:read",
    headers: (r) => r.as.operator(["platforms:manage", "platform:read"]),
    expect: { read: "ok", write: "ok", admin: "ok", status: 403 },
  },
  { name: "a service token", headers: (r) => r.as.service(), expect: { read: "ok", write: "ok", admin: "ok", status: "ok" } },
];

const CASES = CALLERS.flatMap((caller) =>
  ROUTES.map((route) => {
    const expected = caller.expect[route.kind];
    const status = expected === "ok" ? route.ok : expected;
    return { caller, route, status, label: `${caller.name} → ${status} on ${route.name}` };
  }),
);

const CODES: Record<number, string> = { 401: "UNAUTHENTICATED", 403: "FORBIDDEN" };

describe.each(testDatabases())("authorization on $name", (database) => {
  let r: Registry;
  beforeAll(async () => {
    r = await startRegistry(database);
  });
  afterAll(async () => {
    await r?.close();
  });

  for (const { caller, route, status, label } of CASES) {
    it(label, async () => {
      // a platform and a stack of its own for each case, so writes never disturb another case
      const platform = await r.createPlatform();
      const stack = await r.createStack(platform.id);
      const target = { platformId: platform.id, stackId: stack.id };
      const { method, path, body } = route.request(target);
      const res = await r.call(method, path, { headers: await caller.headers(r, target), body });
      expect(res.status).toBe(status);
      if (CODES[status]) expect(res.body.error).toMatchObject({ code: CODES[status], details: null });
      // a refused write changed nothing
      if (status >= 400 && route.kind !== "read") {
        const service = await r.as.service();
        expect((await r.call("GET", `/platforms/${platform.id}`, { headers: service })).body).toEqual(platform);
        expect((await r.call("GET", `/platforms/${platform.id}/stacks/${stack.id}`, { headers: service })).status).toBe(200);
      }
    });
  }

  it.each([
    ["POST", "/platforms", { slug: "NOT VALID" }],
    ["POST", "/platforms/plt_x/stacks", { tenantId: "" }],
    ["PATCH", "/platforms/plt_x", {}],
  ])("settles the caller before the input: %s %s with a bad body and no credential is 401", async (method, path, body) => {
    const res = await r.call(method, path, { body });
    expect(res.status).toBe(401);
    const wrong = await r.call(method, path, { body, headers: { authorization: "Bearer nope" } });
    expect(wrong.status).toBe(401);
  });

  describe("GET /platforms", () => {
    let own: Platform;
    let other: Platform;
    beforeAll(async () => {
      own = await r.createPlatform();
      other = await r.createPlatform();
    });
    const listed = async (headers: Headers) => {
      const { pages } = await r.allPages<Platform>("/platforms", headers, 100);
      return pages.flat().map((p) => p.id);
    };

    it("answers 401 without a credential and with a wrong one", async () => {
      expect((await r.call("GET", "/platforms")).status).toBe(401);
      expect((await r.call("GET", "/platforms", { headers: { authorization: "Bearer nope" } })).status).toBe(401);
    });

    it("shows a member their own platform only", async () => {
      expect(await listed(r.as.member(own.id, ["platform:read"]))).toEqual([own.id]);
    });

    it("refuses a member without platform:read with 403", async () => {
      const res = await r.call("GET", "/platforms", { headers: r.as.member(own.id, ["billing:read"]) });
      expect(res.status).toBe(403);
      expect(res.body.error.code).toBe("FORBIDDEN");
    });

    it("shows operators and services every platform", async () => {
      for (const headers of [r.as.operator(["platform:read"]), r.as.operator(["platforms:manage"]), await r.as.service()]) {
        const ids = await listed(headers);
        expect(ids).toContain(own.id);
        expect(ids).toContain(other.id);
      }
    });
  });

  it("lets a member change a platform's name and links but not its tier or status", async () => {
    const platform = await r.createPlatform();
    const member = r.as.member(platform.id, ["platform:read", "platform:write"]);
    const named = await r.call("PATCH", `/platforms/${platform.id}`, { headers: member, body: { name: "Mine", repoName: "me/repo" } });
    expect(named.status).toBe(200);
    expect(named.body).toMatchObject({ name: "Mine", repoName: "me/repo" });
    for (const body of [{ tier: "scale" }, { status: "suspended" }, { status: "active" }]) {
      const res = await r.call("PATCH", `/platforms/${platform.id}`, { headers: member, body });
      expect(res.status).toBe(403);
    }
    expect((await r.call("GET", `/platforms/${platform.id}`, { headers: member })).body).toMatchObject({ tier: platform.tier, status: "active" });
  });

  it("keeps a suspended platform suspended for its own members, who still read it", async () => {
    const platform = await r.createPlatform();
    await r.call("PATCH", `/platforms/${platform.id}`, { headers: await r.as.service(), body: { status: "suspended" } });
    const member = r.as.member(platform.id, ["platform:read", "platform:write"]);
    expect((await r.call("GET", `/platforms/${platform.id}`, { headers: member })).status).toBe(200);
    expect((await r.call("PATCH", `/platforms/${platform.id}`, { headers: member, body: { status: "active" } })).status).toBe(403);
    const rename = await r.call("PATCH", `/platforms/${platform.id}`, { headers: member, body: { name: "x" } });
    expect(rename.status).toBe(403);
    expect(rename.body.error.code).toBe("PLATFORM_SUSPENDED");
  });

  it("answers 503 UPSTREAM_UNAVAILABLE when IAM cannot check a session", async () => {
    const platform = await r.createPlatform();
    r.iam.failWith = 500;
    try {
      const res = await r.call("GET", `/platforms/${platform.id}`, { headers: { authorization: `Bearer ${unique("fresh-session")}` } });
      expect(res.status).toBe(503);
      expect(res.body.error.code).toBe("UPSTREAM_UNAVAILABLE");
    } finally {
      r.iam.failWith = undefined;
    }
  });
});
