import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "@core/storage";
import { startStackRegistry, unique, type Headers, type StackRegistry } from "./support/stack-registry.js";

/** Every route of spec §4.5, and whether it reads or writes. */
interface Route {
  name: string;
  kind: "read" | "write";
  ok: number;
  request(t: { name: string }): { method: string; path: string; body?: unknown };
}

const ROUTES: Route[] = [
  { name: "GET /api/v1/stacks", kind: "read", ok: 200, request: () => ({ method: "GET", path: "/api/v1/stacks" }) },
  {
    name: "POST /api/v1/stacks",
    kind: "write",
    ok: 201,
    request: () => ({ method: "POST", path: "/api/v1/stacks", body: { name: unique("auth"), displayName: "D", description: "D" } }),
  },
  { name: "GET /api/v1/stacks/{name}", kind: "read", ok: 200, request: (t) => ({ method: "GET", path: `/api/v1/stacks/${t.name}` }) },
  {
    name: "PATCH /api/v1/stacks/{name}",
    kind: "write",
    ok: 200,
    request: (t) => ({ method: "PATCH", path: `/api/v1/stacks/${t.name}`, body: { description: "changed" } }),
  },
  { name: "GET /api/v1/stacks/{name}/versions", kind: "read", ok: 200, request: (t) => ({ method: "GET", path: `/api/v1/stacks/${t.name}/versions` }) },
  {
    name: "POST /api/v1/stacks/{name}/versions",
    kind: "write",
    ok: 201,
    request: (t) => ({
      method: "POST",
      path: `/api/v1/stacks/${t.name}/versions`,
      body: { version: `2.0.${Math.floor(Math.random() * 1e9)}`, stackDefinition: {}, coreSdkVersion: "1.0.0" },
    }),
  },
  { name: "GET /api/v1/stacks/{name}/{version}", kind: "read", ok: 200, request: (t) => ({ method: "GET", path: `/api/v1/stacks/${t.name}/1.0.0` }) },
  { name: "DELETE /api/v1/stacks/{name}/{version}", kind: "write", ok: 200, request: (t) => ({ method: "DELETE", path: `/api/v1/stacks/${t.name}/1.0.0` }) },
];

interface Caller {
  name: string;
  headers(r: StackRegistry): Promise<Headers> | Headers;
  expect: Record<Route["kind"], number | "ok">;
}

const CALLERS: Caller[] = [
  { name: "no credential", headers: () => ({}), expect: { read: 401, write: 401 } },
  { name: "an unknown session token", headers: () => ({ authorization: "Bearer not-a-session" }), expect: { read: 401, write: 401 } },
  { name: "an unknown API key", headers: () => ({ "x-api-key": "not-a-key" }), expect: { read: 401, write: 401 } },
  {
    name: "a service token for another service",
    headers: async (r) => ({ authorization: `Bearer ${await r.iam.mintServiceToken({ aud: "billing" })}` }),
    expect: { read: 401, write: 401 },
  },
  {
    name: "an expired service token",
    headers: async (r) => ({
      authorization: `Bearer ${await r.iam.mintServiceToken({ aud: "stack-registry", iat: Math.floor(Date.now() / 1000) - 400, exp: Math.floor(Date.now() / 1000) - 100 })}`,
    }),
    expect: { read: 401, write: 401 },
  },
  { name: "a tenant member", headers: (r) => r.as.member(["platform:read", "platform:write", "org:manage"]), expect: { read: "ok", write: 403 } },
  { name: "a tenant member holding stacks:publish by a stray grant", headers: (r) => r.as.member(["stacks:publish"]), expect: { read: "ok", write: 403 } },
  { name: "a tenant member's API key", headers: (r) => r.as.apiKey(), expect: { read: "ok", write: 403 } },
  { name: "an operator without stacks:publish", headers: (r) => r.as.operator(["platforms:manage", "platform:read"]), expect: { read: "ok", write: 403 } },
  { name: "an operator with stacks:publish", headers: (r) => r.as.operator(["stacks:publish"]), expect: { read: "ok", write: "ok" } },
  { name: "a service token", headers: (r) => r.as.service(), expect: { read: "ok", write: "ok" } },
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
  let r: StackRegistry;
  beforeAll(async () => {
    r = await startStackRegistry(database);
  });
  afterAll(async () => {
    await r?.close();
  });

  it.each(CASES)("$label", async ({ caller, route, status }) => {
    // every case on its own template with version 1.0.0, so writes never disturb each other
    const { name } = await r.createTemplate();
    await r.published(name, "1.0.0");
    const { method, path, body } = route.request({ name });
    const res = await r.call(method, path, { headers: await caller.headers(r), body });
    expect(res.status).toBe(status);
    if (CODES[status]) expect(res.body).toEqual({ error: { code: CODES[status], message: expect.any(String), requestId: expect.any(String), details: null } });
  });

  it("settles the caller before the input: no credential with an invalid body is 401, a tenant member's invalid body is 403", async () => {
    const bad = { name: "NOT VALID" };
    expect((await r.call("POST", "/api/v1/stacks", { body: bad })).status).toBe(401);
    expect((await r.call("POST", "/api/v1/stacks", { headers: r.as.member(), body: bad })).status).toBe(403);
    expect((await r.call("POST", "/api/v1/stacks/x/versions", { headers: r.as.member(), body: {} })).status).toBe(403);
    expect((await r.call("POST", "/api/v1/stacks", { headers: r.publisher, body: bad })).status).toBe(400);
  });
});
