import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ApiError,
  createLogger,
  createServiceApp,
  errorResponses,
  isUnder,
  jsonBody,
  jsonContent,
  listen,
  readJsonBody,
  requestIdOf,
  ServiceMetrics,
  silentLogger,
  type ServiceAppOptions,
  type HealthCheck,
  type RunningServer,
} from "@core/kit";

const LIMIT = 1024;

/** A small service on the kit: one validated JSON route, one path-parameter route, and failing ones. */
function buildApp(healthChecks: HealthCheck[] = []) {
  const app = createServiceApp({
    service: "kit-test",
    title: "Kit test service",
    logger: silentLogger(),
    maxBodyBytes: LIMIT,
    healthChecks,
    omitsErrorDetails: (path) => path.endsWith("-without-details"),
  });
  app.openapi(
    createRoute({
      method: "post",
      path: "/items",
      summary: "Create an item",
      request: { body: jsonBody(z.object({ name: z.string().min(1).max(5), count: z.number().int() })) },
      responses: { 201: jsonContent(z.object({ name: z.string(), count: z.number() }), "The item"), ...errorResponses(400) },
    }),
    (c) => c.json(c.req.valid("json"), 201),
  );
  app.openapi(
    createRoute({
      method: "get",
      path: "/items/{itemId}",
      summary: "One item",
      request: { params: z.object({ itemId: z.string() }) },
      responses: { 200: jsonContent(z.object({ id: z.string() }), "The item") },
    }),
    (c) => c.json({ id: c.req.valid("param").itemId }, 200),
  );
  app.get("/boom", () => {
    throw new Error("connection to db.internal:5432 failed for password=hunter2");
  });
  app.get("/taken", () => {
    throw new ApiError(409, "SLUG_TAKEN", "The slug is taken", { slug: "acme" });
  });
  app.get("/taken-without-details", () => {
    throw new ApiError(409, "SLUG_TAKEN", "The slug is taken", { slug: "acme" });
  });
  return app;
}

const app = buildApp();

const postJson = (path: string, body: string, headers: Record<string, string> = {}) =>
  app.request(path, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe("error envelope", () => {
  it("answers an ApiError as { error: { code, message, requestId, details } } with its status", async () => {
    const res = await app.request("/taken", { headers: { "x-request-id": "req-envelope-1" } });
    expect(res.status).toBe(409);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await res.json()).toEqual({
      error: { code: "SLUG_TAKEN", message: "The slug is taken", requestId: "req-envelope-1", details: { slug: "acme" } },
    });
  });

  it("always carries details, null when there is nothing to add", async () => {
    const res = await app.request("/nowhere");
    const body = (await res.json()) as { error: Record<string, unknown> };
    expect(Object.keys(body.error).sort()).toEqual(["code", "details", "message", "requestId"]);
    expect(body.error.details).toBeNull();
  });

  it("drops details on the paths the service names, from the route's own errors", async () => {
    const res = await app.request("/taken-without-details", { headers: { "x-request-id": "req-nodetails" } });
    expect(res.status).toBe(409);
    expect(await res.json()).toEqual({
      error: { code: "SLUG_TAKEN", message: "The slug is taken", requestId: "req-nodetails" },
    });
  });

  it("drops details there also from the kit's own refusals before any route runs (413, 415, 400)", async () => {
    const cases = [
      { headers: { "content-type": "text/plain" }, body: "x", status: 415 },
      { headers: { "content-type": "application/json" }, body: `"${"x".repeat(LIMIT)}"`, status: 413 },
      { headers: { "content-type": "application/json" }, body: '{"a":"\\u0000"}', status: 400 },
    ];
    for (const { headers, body, status } of cases) {
      const res = await app.request("/taken-without-details", { method: "POST", headers, body });
      expect(res.status).toBe(status);
      expect(Object.keys(((await res.json()) as { error: object }).error).sort()).toEqual(["code", "message", "requestId"]);
    }
  });
});

describe("request id", () => {
  it("keeps a sane incoming x-request-id and echoes it in the header and the envelope", async () => {
    const res = await app.request("/nowhere", { headers: { "x-request-id": "abc.DEF_1:2-3" } });
    expect(res.headers.get("x-request-id")).toBe("abc.DEF_1:2-3");
    expect(((await res.json()) as { error: { requestId: string } }).error.requestId).toBe("abc.DEF_1:2-3");
  });

  it("keeps an incoming id of exactly 128 characters", async () => {
    const id = "a".repeat(128);
    const res = await app.request("/health", { headers: { "x-request-id": id } });
    expect(res.headers.get("x-request-id")).toBe(id);
  });

  it("replaces an incoming id of 129 characters", async () => {
    const res = await app.request("/health", { headers: { "x-request-id": "a".repeat(129) } });
    expect(res.headers.get("x-request-id")).toMatch(UUID);
  });

  it("replaces an id carrying characters that could forge log lines", async () => {
    const res = await app.request("/nowhere", { headers: { "x-request-id": "abc def\"}" } });
    const id = res.headers.get("x-request-id");
    expect(id).toMatch(UUID);
    expect(((await res.json()) as { error: { requestId: string } }).error.requestId).toBe(id);
  });

  it("generates a fresh id per request when none is given", async () => {
    const a = (await app.request("/health")).headers.get("x-request-id");
    const b = (await app.request("/health")).headers.get("x-request-id");
    expect(a).toMatch(UUID);
    expect(b).toMatch(UUID);
    expect(a).not.toBe(b);
  });
});

describe("request bodies", () => {
  it("accepts a valid JSON body", async () => {
    const res = await postJson("/items", JSON.stringify({ name: "abcde", count: 2 }));
    expect(res.status).toBe(201);
    expect(await res.json()).toEqual({ name: "abcde", count: 2 });
  });

  it("answers 400 VALIDATION_ERROR naming every failing field in details", async () => {
    const res = await postJson("/items", JSON.stringify({ name: "abcdef", count: 1.5 }), { "x-request-id": "req-val" });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: string; message: string; requestId: string; details: { path: string }[] } };
    expect(body.error.code).toBe("VALIDATION_ERROR");
    expect(body.error.requestId).toBe("req-val");
    expect(body.error.details.map((d) => d.path).sort()).toEqual(["count", "name"]);
    expect(body.error.message).toContain("name");
    expect(body.error.message).toContain("count");
  });

  it("names a missing required field", async () => {
    const res = await postJson("/items", JSON.stringify({ name: "a" }));
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: string; details: { path: string; code: string }[] } };
    expect(body.error.code).toBe("VALIDATION_ERROR");
    expect(body.error.details).toEqual([expect.objectContaining({ path: "count", code: "invalid_type" })]);
  });

  it("answers malformed JSON with 400 BAD_REQUEST in the envelope", async () => {
    const res = await postJson("/items", '{"name": "ab', { "x-request-id": "req-malformed" });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: string; requestId: string; details: unknown } };
    expect(body.error.code).toBe("BAD_REQUEST");
    expect(body.error.requestId).toBe("req-malformed");
    expect(body.error.details).toBeNull();
  });

  it("answers a body of another content type with 415 UNSUPPORTED_MEDIA_TYPE", async () => {
    const res = await app.request("/items", { method: "POST", headers: { "content-type": "text/plain" }, body: "name=a" });
    expect(res.status).toBe(415);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("UNSUPPORTED_MEDIA_TYPE");
  });

  it("answers a body without any content type with 415", async () => {
    const res = await app.request("/items", { method: "POST", body: new Uint8Array([123, 125]) });
    expect(res.status).toBe(415);
  });

  it("accepts a +json media type with parameters", async () => {
    const res = await app.request("/items", {
      method: "POST",
      headers: { "content-type": "application/merge-patch+json; charset=utf-8" },
      body: JSON.stringify({ name: "a", count: 1 }),
    });
    expect(res.status).toBe(201);
  });

  it("answers a POST without any body as a validation error naming the required fields", async () => {
    const res = await app.request("/items", { method: "POST" });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: string; details: { path: string }[] } };
    expect(body.error.code).toBe("VALIDATION_ERROR");
    expect(body.error.details.map((d) => d.path).sort()).toEqual(["count", "name"]);
  });

  it("accepts a body of exactly the limit", async () => {
    const body = JSON.stringify({ name: "a", count: 1, pad: "" });
    const exact = JSON.stringify({ name: "a", count: 1, pad: "x".repeat(LIMIT - body.length) });
    expect(Buffer.byteLength(exact)).toBe(LIMIT);
    const res = await postJson("/items", exact);
    expect(res.status).toBe(201);
  });

  it("answers a body one byte over the limit with 413 PAYLOAD_TOO_LARGE", async () => {
    const body = JSON.stringify({ name: "a", count: 1, pad: "" });
    const over = JSON.stringify({ name: "a", count: 1, pad: "x".repeat(LIMIT - body.length + 1) });
    expect(Buffer.byteLength(over)).toBe(LIMIT + 1);
    const res = await postJson("/items", over, { "x-request-id": "req-big" });
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual({
      error: { code: "PAYLOAD_TOO_LARGE", message: `Request body exceeds ${LIMIT} bytes`, requestId: "req-big", details: null },
    });
  });

  it("defaults the body limit to 1 MiB", async () => {
    const defaultApp = createServiceApp({ service: "kit-default", title: "t", logger: silentLogger() });
    defaultApp.post("/echo", (c) => c.json({ ok: true }));
    const send = (bytes: number) =>
      defaultApp.request("/echo", { method: "POST", headers: { "content-type": "application/json" }, body: `"${"x".repeat(bytes - 2)}"` });
    expect((await send(1024 * 1024)).status).toBe(200);
    expect((await send(1024 * 1024 + 1)).status).toBe(413);
  });
});

describe("unknown routes and unexpected failures", () => {
  it("answers an unknown route with a 404 NOT_FOUND envelope", async () => {
    const res = await app.request("/no/such/route", { headers: { "x-request-id": "req-404" } });
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await res.json()).toEqual({
      error: { code: "NOT_FOUND", message: "No route for GET /no/such/route", requestId: "req-404", details: null },
    });
  });

  it("answers an unexpected Error with 500 INTERNAL and leaks neither its message nor its stack", async () => {
    const res = await app.request("/boom", { headers: { "x-request-id": "req-500" } });
    expect(res.status).toBe(500);
    const text = await res.text();
    expect(JSON.parse(text)).toEqual({ error: { code: "INTERNAL", message: "Internal error", requestId: "req-500", details: null } });
    expect(text).not.toContain("hunter2");
    expect(text).not.toContain("db.internal");
    expect(text).not.toMatch(/at .*\.ts:\d+/);
    expect(res.headers.get("x-request-id")).toBe("req-500");
  });
});

describe("/health", () => {
  it("answers 200 healthy when every check passes", async () => {
    const healthy = buildApp([{ name: "database", check: async () => {} }]);
    const res = await healthy.request("/health");
    expect(res.status).toBe(200);
    const body = (await res.json()) as { status: string; checks: Record<string, { status: string }> };
    expect(body.status).toBe("healthy");
    expect(body.checks.database?.status).toBe("ok");
  });

  it("answers 503 degraded naming the failing check", async () => {
    const degraded = buildApp([
      { name: "database", check: async () => {} },
      {
        name: "iam",
        check: async () => {
          throw new Error("connect ECONNREFUSED");
        },
      },
    ]);
    const res = await degraded.request("/health");
    expect(res.status).toBe(503);
    const body = (await res.json()) as { status: string; checks: Record<string, { status: string; error?: string }> };
    expect(body.status).toBe("degraded");
    expect(body.checks.database?.status).toBe("ok");
    expect(body.checks.iam).toMatchObject({ status: "fail", error: "connect ECONNREFUSED" });
  });
});

describe("/metrics", () => {
  it("serves Prometheus text labelled by route pattern, never by raw path", async () => {
    const local = buildApp();
    await local.request("/items/item-42");
    await local.request("/items/item-43");
    await local.request("/no/such/route");
    const res = await local.request("/metrics");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    expect(text).toContain("# TYPE http_requests_total counter");
    expect(text).toMatch(/http_requests_total\{(?=[^}]*method="GET")(?=[^}]*route="\/items\/:itemId")(?=[^}]*status="200")(?=[^}]*service="kit-test")[^}]*\} 2/);
    expect(text).toMatch(/http_requests_total\{(?=[^}]*route="\(unmatched\)")(?=[^}]*status="404")[^}]*\} 1/);
    expect(text).toContain("http_request_duration_seconds_bucket");
    expect(text).not.toContain("item-42");
    expect(text).not.toContain("/no/such/route");
  });
});

/** A kit app whose log lines are kept, with the request lines read back as records. */
function loggedApp(service: string, options: Partial<ServiceAppOptions> = {}) {
  const lines: string[] = [];
  const app = createServiceApp({ service, title: "t", logger: createLogger(service, "info", { write: (line: string) => void lines.push(line) }), ...options });
  const records = () => lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((r) => r.msg === "request");
  return { app, records };
}

describe("the service's guard (in the kit's work, after the screen, ADR 0005)", () => {
  /** A service whose guard lets "let-me-in" through at once, "later" after a wait, and refuses the rest. */
  function guarded() {
    const ran: string[] = [];
    const { app, records } = loggedApp("guarded", {
      maxBodyBytes: LIMIT,
      guard: (c) => {
        const who = c.req.header("authorization");
        ran.push(`guard ${c.req.path}`);
        if (who === "let-me-in") return undefined;
        if (who === "later") return new Promise((resolve) => setTimeout(resolve, 5));
        if (who === "later-no") return Promise.reject(new ApiError(403, "FORBIDDEN", "Not you, after all"));
        if (who === "broken") throw new Error("guard bug, with a secret: s3cret");
        throw new ApiError(401, "UNAUTHENTICATED", "Who are you?");
      },
    });
    app.post("/things", async (c) => {
      ran.push("route");
      return c.json(await c.req.json(), 201);
    });
    return { app, ran, records };
  }
  const send = (app: ReturnType<typeof guarded>["app"], authorization: string, body = '{"a":1}', headers: Record<string, string> = {}) =>
    app.request("/things", { method: "POST", headers: { "content-type": "application/json", authorization, ...headers }, body });

  it("lets the route run when the guard settles at once, and when it settles after a wait", async () => {
    const { app, ran } = guarded();
    expect(await (await send(app, "let-me-in")).json()).toEqual({ a: 1 });
    expect(await (await send(app, "later")).json()).toEqual({ a: 1 });
    expect(ran).toEqual(["guard /things", "route", "guard /things", "route"]);
  });

  it("answers a refusal thrown at once, or a rejection after a wait, in the envelope, without running the route", async () => {
    const { app, ran } = guarded();
    const at = await send(app, "nobody");
    expect(at.status).toBe(401);
    expect(await at.json()).toEqual({ error: { code: "UNAUTHENTICATED", message: "Who are you?", requestId: at.headers.get("x-request-id"), details: null } });
    const after = await send(app, "later-no");
    expect(after.status).toBe(403);
    expect(((await after.json()) as { error: unknown }).error).toMatchObject({ code: "FORBIDDEN", message: "Not you, after all" });
    expect(ran).toEqual(["guard /things", "guard /things"]);
  });

  it("answers a guard's own bug with 500 INTERNAL, leaking nothing", async () => {
    const { app } = guarded();
    const res = await send(app, "broken");
    expect(res.status).toBe(500);
    const text = await res.text();
    expect(JSON.parse(text).error.code).toBe("INTERNAL");
    expect(text).not.toContain("s3cret");
  });

  it("screens the input before the guard runs: a NUL in the body or a wrong media type never reaches it", async () => {
    const { app, ran } = guarded();
    expect((await send(app, "let-me-in", '{"a":"x\\u0000"}')).status).toBe(400);
    expect((await send(app, "let-me-in", "a=1", { "content-type": "text/plain" })).status).toBe(415);
    expect(ran).toEqual([]);
  });

  it("counts and logs every request once with the status it got, under its route's pattern, refusals by the screen or the guard included", async () => {
    const { app, records } = guarded();
    await send(app, "let-me-in");
    await send(app, "nobody");
    await send(app, "later-no");
    await send(app, "let-me-in", "x".repeat(LIMIT + 1));
    await send(app, "let-me-in", "a=1", { "content-type": "text/plain" });
    expect(records().map((r) => r.status)).toEqual([201, 401, 403, 413, 415]);
    const text = await (await app.request("/metrics", { headers: { authorization: "let-me-in" } })).text();
    for (const status of [201, 401, 403, 413, 415]) {
      expect(text).toMatch(new RegExp(`http_requests_total\\{(?=[^}]*method="POST")(?=[^}]*route="/things")(?=[^}]*status="${status}")[^}]*\\} 1\n`));
    }
  });
});

describe("the kit's work around every route shape (its router, ADR 0005)", () => {
  /** One service with each shape: a lone handler, a validated route (a chain), a service's own middleware, and handlers that hand on. */
  function shapes(guard?: (c: Context) => Promise<unknown> | undefined) {
    const seen: string[] = [];
    const { app, records } = loggedApp("shapes", { guard });
    app.get("/lone/:id", (c) => c.json({ id: c.req.param("id") }));
    app.get("/later/:id", async (c) => {
      await new Promise((resolve) => setTimeout(resolve, 2));
      return c.json({ id: c.req.param("id") });
    });
    app.get("/rejects", async () => {
      throw new ApiError(409, "CLASH", "It clashes");
    });
    app.openapi(
      createRoute({
        method: "get",
        path: "/checked/{id}",
        request: { params: z.object({ id: z.string().max(3) }) },
        responses: { 200: jsonContent(z.object({ id: z.string() }), "The id") },
      }),
      (c) => c.json({ id: c.req.valid("param").id }, 200),
    );
    app.get(
      "/mine",
      async (c, next) => {
        seen.push(`service middleware saw ${requestIdOf(c)}`);
        await next();
      },
      (c) => c.json({ ok: true }),
    );
    app.get("/hands-on", (_c, next) => next());
    return { app, seen, records };
  }
  const get = (app: ReturnType<typeof shapes>["app"], path: string, id: string) => app.request(path, { headers: { "x-request-id": id } });

  it("answers a lone handler's answer made at once at once, without a promise, when nothing before it waits", async () => {
    const { app } = shapes(() => undefined);
    const answer = app.fetch(new Request("http://kit.test/lone/7", { headers: { "x-request-id": "at-once" } }));
    expect(answer).toBeInstanceOf(Response);
    const res = answer as Response;
    expect(res.status).toBe(200);
    expect(res.headers.get("x-request-id")).toBe("at-once");
    expect(await res.json()).toEqual({ id: "7" });
  });

  it("still waits for a guard that waits, then answers the same", async () => {
    const { app } = shapes(() => new Promise((resolve) => setTimeout(resolve, 2)));
    const answer = app.fetch(new Request("http://kit.test/lone/7"));
    expect(answer).toBeInstanceOf(Promise);
    expect(await (await answer).json()).toEqual({ id: "7" });
  });

  it("gives each shape its request id, its route's parameters, and one count under its route pattern", async () => {
    const { app, seen, records } = shapes();
    const answers = await Promise.all([
      get(app, "/lone/a1", "r-lone"),
      get(app, "/later/b2", "r-later"),
      get(app, "/checked/c3", "r-checked"),
      get(app, "/mine", "r-mine"),
    ]);
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect(answers.map((r) => r.headers.get("x-request-id"))).toEqual(["r-lone", "r-later", "r-checked", "r-mine"]);
    expect(await Promise.all(answers.map((r) => r.json()))).toEqual([{ id: "a1" }, { id: "b2" }, { id: "c3" }, { ok: true }]);
    // the kit runs before the service's own middleware
    expect(seen).toEqual(["service middleware saw r-mine"]);
    expect(records().map((r) => [r.requestId, r.path, r.status])).toEqual(
      expect.arrayContaining([
        ["r-lone", "/lone/a1", 200],
        ["r-later", "/later/b2", 200],
        ["r-checked", "/checked/c3", 200],
        ["r-mine", "/mine", 200],
      ]),
    );
    expect(records()).toHaveLength(4);
    const text = await (await app.request("/metrics")).text();
    for (const route of ["/lone/:id", "/later/:id", "/checked/:id", "/mine"]) {
      expect(text).toMatch(new RegExp(`http_requests_total\\{(?=[^}]*route="${route.replace(/\//g, "\\/")}")(?=[^}]*status="200")[^}]*\\} 1\n`));
    }
  });

  it("answers in the envelope what a lone handler rejects with, and a validator's refusal in a chain, each counted once", async () => {
    const { app, records } = shapes();
    const rejected = await get(app, "/rejects", "r-rejects");
    expect(rejected.status).toBe(409);
    expect(await rejected.json()).toEqual({ error: { code: "CLASH", message: "It clashes", requestId: "r-rejects", details: null } });
    const refused = await get(app, "/checked/toolong", "r-refused");
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: { code: string; requestId: string } }).error).toMatchObject({ code: "VALIDATION_ERROR", requestId: "r-refused" });
    expect(records().map((r) => [r.requestId, r.status])).toEqual([
      ["r-rejects", 409],
      ["r-refused", 400],
    ]);
  });

  it("answers a lone handler that hands on, and a path no route has, with the 404 envelope, counted as unmatched", async () => {
    const { app, records } = shapes();
    for (const [path, id] of [
      ["/hands-on", "r-hands-on"],
      ["/nowhere", "r-nowhere"],
    ] as const) {
      const res = await get(app, path, id);
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ error: { code: "NOT_FOUND", message: `No route for GET ${path}`, requestId: id, details: null } });
    }
    expect(records().map((r) => r.status)).toEqual([404, 404]);
    const text = await (await app.request("/metrics")).text();
    expect(text).toMatch(/http_requests_total\{(?=[^}]*route="\(unmatched\)")(?=[^}]*status="404")[^}]*\} 2\n/);
  });

  it("counts a refusal by the guard under the route it was refused on, and one on a path no route has as unmatched", async () => {
    const { app } = shapes((c) => {
      if (c.req.header("authorization") !== "ok") throw new ApiError(401, "UNAUTHENTICATED", "Who are you?");
      return undefined;
    });
    for (const path of ["/lone/1", "/checked/ab", "/nowhere"]) expect((await app.request(path)).status).toBe(401);
    const text = await (await app.request("/metrics", { headers: { authorization: "ok" } })).text();
    for (const route of ["/lone/:id", "/checked/:id", "(unmatched)"]) {
      const pattern = route.replace(/[()/]/g, "\\$&");
      expect(text).toMatch(new RegExp(`http_requests_total\\{(?=[^}]*route="${pattern}")(?=[^}]*status="401")[^}]*\\} 1\n`));
    }
    expect(text).not.toContain('route="/*"');
  });

  it("answers HEAD on a lone GET handler with its status and request id and no body", async () => {
    const { app } = shapes();
    const res = await app.request("/lone/9", { method: "HEAD", headers: { "x-request-id": "r-head" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-request-id")).toBe("r-head");
    expect(await res.text()).toBe("");
  });
});

describe("isUnder (a guard's scope)", () => {
  it("takes the prefix itself and paths below it, not a longer name that starts the same", () => {
    expect(["/platforms", "/platforms/", "/platforms/p1/stacks"].map((p) => isUnder(p, "/platforms"))).toEqual([true, true, true]);
    expect(["/platformsx", "/platform", "/", "/api/platforms"].map((p) => isUnder(p, "/platforms"))).toEqual([false, false, false, false]);
  });
});

describe("readJsonBody (the hot routes' body, read without waiting)", () => {
  const hot = createServiceApp({ service: "t", title: "t", logger: silentLogger() });
  const Input = z.object({ token: z.string().min(1) });
  hot.post("/hot", (c) => c.json(readJsonBody(c, Input)));
  const post = (body: string | undefined, headers: Record<string, string> = { "content-type": "application/json" }) =>
    hot.request("/hot", { method: "POST", headers, body });

  it("answers from the body the kit screened", async () => {
    const res = await post(JSON.stringify({ token: "abc" }));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ token: "abc" });
  });

  it.each([
    ["no body", undefined],
    ["an empty body", ""],
    ["malformed JSON", "{"],
  ])("refuses %s with 400 BAD_REQUEST", async (_, body) => {
    const res = await post(body);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("BAD_REQUEST");
  });

  it("refuses a body the schema does not take with 400 VALIDATION_ERROR naming the field", async () => {
    const res = await post(JSON.stringify({ token: 42 }));
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: { code: string; details: { path: string }[] } };
    expect(error.code).toBe("VALIDATION_ERROR");
    expect(error.details.map((d) => d.path)).toEqual(["token"]);
  });

  it("never sees what the screen refuses: a NUL in a string is 400 before the route", async () => {
    const res = await post('{"token":"a\\u0000b"}');
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { details: { path: string }[] } }).error.details[0]!.path).toBe("token");
  });
});

describe("ServiceMetrics", () => {
  it("exposes counts by status and cumulative duration buckets with their sum and count", async () => {
    const metrics = new ServiceMetrics("svc");
    metrics.record("GET", "/items/:itemId", 200, 0.0004);
    metrics.record("GET", "/items/:itemId", 200, 0.003);
    metrics.record("GET", "/items/:itemId", 404, 0.005);
    metrics.record("POST", "/items", 201, 7);
    const text = await metrics.registry.metrics();
    const line = (name: string, labels: string) => new RegExp(`^${name}\\{${labels}\\} (\\S+)$`, "m").exec(text)?.[1];
    expect(text).toContain("# TYPE http_requests_total counter");
    expect(text).toContain("# TYPE http_request_duration_seconds histogram");
    expect(line("http_requests_total", 'method="GET",route="/items/:itemId",status="200",service="svc"')).toBe("2");
    expect(line("http_requests_total", 'method="GET",route="/items/:itemId",status="404",service="svc"')).toBe("1");
    expect(line("http_requests_total", 'method="POST",route="/items",status="201",service="svc"')).toBe("1");
    const bucket = (le: string) => line("http_request_duration_seconds_bucket", `le="${le}",method="GET",route="/items/:itemId",service="svc"`);
    // a value on a bound counts in that bucket (le: less than or equal)
    expect([bucket("0.001"), bucket("0.0025"), bucket("0.005"), bucket("0.01"), bucket("2.5"), bucket("\\+Inf")]).toEqual(["1", "1", "3", "3", "3", "3"]);
    expect(Number(line("http_request_duration_seconds_sum", 'method="GET",route="/items/:itemId",service="svc"'))).toBeCloseTo(0.0084, 10);
    expect(line("http_request_duration_seconds_count", 'method="GET",route="/items/:itemId",service="svc"')).toBe("3");
    expect(line("http_request_duration_seconds_bucket", 'le="2.5",method="POST",route="/items",service="svc"')).toBe("0");
    expect(line("http_request_duration_seconds_bucket", 'le="\\+Inf",method="POST",route="/items",service="svc"')).toBe("1");
    metrics.registry.resetMetrics();
    expect(await metrics.registry.metrics()).not.toContain("route=");
  });

  it("keeps process metrics beside the request metrics when asked", async () => {
    const text = await new ServiceMetrics("svc", { processMetrics: true }).registry.metrics();
    expect(text).toContain("process_cpu_seconds_total");
    expect(text).toContain("# TYPE http_requests_total counter");
  });
});

describe("API description", () => {
  it("serves an OpenAPI 3.1 document listing the declared routes", async () => {
    const res = await app.request("/openapi.json");
    expect(res.status).toBe(200);
    const doc = (await res.json()) as { openapi: string; info: { title: string }; paths: Record<string, Record<string, unknown>> };
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.info.title).toBe("Kit test service");
    expect(doc.paths["/items"]?.post).toBeDefined();
    expect(doc.paths["/items/{itemId}"]?.get).toBeDefined();
  });

  it("lists on every operation the statuses the kit answers before any route: 400 and 431; 413 and 415 where a body can come; 401 where a credential is needed; 429 where an API key is", async () => {
    const described = createServiceApp({ service: "described", title: "t", logger: silentLogger() });
    described.openapi(
      createRoute({ method: "get", path: "/open", responses: { 200: jsonContent(z.object({}), "ok") } }),
      (c) => c.json({}, 200),
    );
    described.openapi(
      createRoute({ method: "delete", path: "/guarded/{id}", security: [{ bearer: [] }], request: { params: z.object({ id: z.string() }) }, responses: { 200: jsonContent(z.object({}), "ok"), ...errorResponses(404) } }),
      (c) => c.json({}, 200),
    );
    described.openapi(
      createRoute({ method: "get", path: "/keyed", security: [{ bearer: [] }, { apiKey: [] }], responses: { 200: jsonContent(z.object({}), "ok") } }),
      (c) => c.json({}, 200),
    );
    const doc = (await (await described.request("/openapi.json")).json()) as { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> };
    expect(Object.keys(doc.paths["/open"]!.get!.responses).sort()).toEqual(["200", "400", "431"]);
    expect(Object.keys(doc.paths["/guarded/{id}"]!.delete!.responses).sort()).toEqual(["200", "400", "401", "404", "413", "415", "431"]);
    expect(Object.keys(doc.paths["/keyed"]!.get!.responses).sort()).toEqual(["200", "400", "401", "429", "431"]);
    expect(doc.paths["/guarded/{id}"]!.delete!.responses["415"]).toMatchObject({ content: { "application/json": { schema: { $ref: "#/components/schemas/ErrorEnvelope" } } } });
    // what the description promises holds
    expect((await described.request("/guarded/x", { method: "DELETE", headers: { "content-type": "text/plain" }, body: "x" })).status).toBe(415);
    expect((await described.request("/open?x=%00")).status).toBe(400);
  });

  it("serves /docs as an HTML page naming the routes", async () => {
    const res = await app.request("/docs");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    const page = await res.text();
    expect(page).toMatch(/^<!doctype html>/i);
    expect(page).toContain("Kit test service");
    expect(page).toContain("/items/{itemId}");
  });
});

describe("over a real socket", () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await listen(app, 0, "127.0.0.1");
  });
  afterAll(async () => {
    await server.close();
  });

  it("binds a free port when given port 0 and reports its URL", () => {
    expect(server.port).toBeGreaterThan(0);
    expect(server.url).toBe(`http://127.0.0.1:${server.port}`);
  });

  it("answers a valid request end to end", async () => {
    const res = await fetch(`${server.url}/items`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "ab", count: 1 }),
    });
    expect(res.status).toBe(201);
  });

  it("refuses a real oversized body with a content-length with 413 PAYLOAD_TOO_LARGE", async () => {
    const res = await fetch(`${server.url}/items`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": "req-socket-big" },
      body: JSON.stringify({ name: "a", count: 1, pad: "x".repeat(64 * LIMIT) }),
    });
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ error: { code: "PAYLOAD_TOO_LARGE", requestId: "req-socket-big", details: null } });
  });

  it("refuses a real oversized chunked body without a content-length with 413", async () => {
    const chunk = new TextEncoder().encode("x".repeat(512));
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= 8) return controller.close();
        sent++;
        controller.enqueue(chunk);
      },
    });
    const res = await fetch(`${server.url}/items`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: stream,
      duplex: "half",
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("PAYLOAD_TOO_LARGE");
  });
});
