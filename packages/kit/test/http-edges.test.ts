import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServiceApp, listen, silentLogger, withRequestId, type RunningServer } from "../src/index.js";

/** Raw HTTP/1.1 requests, so the headers on the wire are exactly the ones written here. */
function send(url: string, headers: Record<string, string>, body?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: "POST", headers }, (res) => {
      let text = "";
      res.on("data", (d) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode!, text }));
    });
    req.on("error", reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

describe("requests without a body over real HTTP", () => {
  let server: RunningServer;
  beforeAll(async () => {
    const app = createServiceApp({ service: "t", title: "t", logger: silentLogger() });
    app.post("/act", (c) => c.json({ ok: true }));
    server = await listen(app, 0, "127.0.0.1");
  });
  afterAll(() => server.close());

  it("accepts a POST with neither Content-Length nor a body (curl -X POST)", async () => {
    const r = await send(`${server.url}/act`, {});
    expect(r.status).toBe(200);
  });

  it("still refuses a chunked body that is not JSON with 415", async () => {
    const r = await send(`${server.url}/act`, { "transfer-encoding": "chunked", "content-type": "text/plain" }, "hello");
    expect(r.status).toBe(415);
    expect(JSON.parse(r.text).error.code).toBe("UNSUPPORTED_MEDIA_TYPE");
  });

  it("refuses a chunked body beyond the limit with 413", async () => {
    const r = await send(`${server.url}/act`, { "transfer-encoding": "chunked", "content-type": "application/json" }, `"${"x".repeat(1024 * 1024 + 10)}"`);
    expect(r.status).toBe(413);
  });
});

describe("the request id over real HTTP", () => {
  let server: RunningServer;
  beforeAll(async () => {
    const app = createServiceApp({ service: "t", title: "t", logger: silentLogger() });
    app.get("/json", (c) => c.json({ ok: true }));
    app.get("/own-headers", (c) => c.body("{}", 201, { "content-type": "application/json", "cache-control": "no-store" }));
    app.get("/foreign", (c) => withRequestId(c, new Response("made elsewhere", { headers: { "content-type": "text/plain" } })));
    app.get("/foreign-bare", () => new Response("made elsewhere"));
    app.get("/stream", (c) => c.body(new ReadableStream({ start: (controller) => (controller.enqueue(new TextEncoder().encode("a")), controller.close()) })));
    app.get("/fails", () => {
      throw new Error("boom");
    });
    server = await listen(app, 0, "127.0.0.1");
  });
  afterAll(() => server.close());

  // every answer carries exactly one x-request-id, the one the caller sent when it is sane
  it.each(["/json", "/own-headers", "/foreign", "/foreign-bare", "/stream", "/fails", "/nowhere"])("%s", async (path) => {
    const raw = await rawHeaders(`${server.url}${path}`, { "x-request-id": "trace-1" });
    expect(raw.filter((h) => h.toLowerCase() === "x-request-id")).toHaveLength(1);
    expect(raw[raw.findIndex((h) => h.toLowerCase() === "x-request-id") + 1]).toBe("trace-1");
  });

  it("makes one up when none is sent, the same in the header and in an error envelope", async () => {
    const res = await fetch(`${server.url}/nowhere`);
    const id = res.headers.get("x-request-id");
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(((await res.json()) as { error: { requestId: string } }).error.requestId).toBe(id);
  });
});

/** The response's header names and values as they came over the wire, duplicates kept. */
function rawHeaders(url: string, headers: Record<string, string>): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.rawHeaders));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("requests the HTTP parser refuses", () => {
  let server: RunningServer;
  beforeAll(async () => {
    const app = createServiceApp({ service: "t", title: "t", logger: silentLogger() });
    app.get("/ok", (c) => c.json({ ok: true }));
    server = await listen(app, 0, "127.0.0.1");
  });
  afterAll(() => server.close());

  it("answers a URL or headers beyond 16 KiB with 431 in the error envelope, not a bare status line", async () => {
    for (const url of [`${server.url}/ok?q=${"x".repeat(20_000)}`, `${server.url}/ok`]) {
      const headers: Record<string, string> = url.endsWith("/ok") ? { "x-padding": "p".repeat(20_000) } : {};
      const res = await fetch(url, { headers });
      expect(res.status).toBe(431);
      expect(await res.json()).toEqual({ error: { code: "HEADERS_TOO_LARGE", message: "The request line and headers exceed 16 KiB", requestId: expect.any(String), details: null } });
    }
    expect((await fetch(`${server.url}/ok?q=${"x".repeat(8_000)}`)).status).toBe(200);
  });

  it("keeps a route's no-details rule (spec §2.3) in the 431 the parser refuses, for a long query and for long headers", async () => {
    const app = createServiceApp({ service: "t", title: "t", logger: silentLogger(), omitsErrorDetails: (path) => path === "/bare" });
    app.post("/bare", (c) => c.json({ ok: true }));
    const bare = await listen(app, 0, "127.0.0.1");
    try {
      for (const [path, headers] of [
        [`/bare?q=${"x".repeat(20_000)}`, {}],
        ["/bare", { "x-padding": "p".repeat(40_000) }],
      ] as const) {
        const res = await fetch(`${bare.url}${path}`, { method: "POST", headers });
        expect(res.status).toBe(431);
        expect(await res.json()).toEqual({ error: { code: "HEADERS_TOO_LARGE", message: "The request line and headers exceed 16 KiB", requestId: expect.any(String) } });
      }
      const other = await fetch(`${bare.url}/elsewhere`, { headers: { "x-padding": "p".repeat(40_000) } });
      expect(((await other.json()) as { error: { details: unknown } }).error.details).toBeNull();
    } finally {
      await bare.close();
    }
  });

  it("answers bytes that are not HTTP with 400 in the error envelope", async () => {
    const { connect } = await import("node:net");
    const url = new URL(server.url);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(url.port), url.hostname, () => socket.write("GARBAGE \u0000 nonsense\r\n\r\n"));
      let text = "";
      socket.on("data", (d) => (text += d));
      socket.on("end", () => resolve(text));
      socket.on("error", reject);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)).error.code).toBe("BAD_REQUEST");
  });
});

describe("loggableError", () => {
  it("keeps a failed query's statement and the driver's message but never its parameters", async () => {
    const { loggableError } = await import("../src/app.js");
    const cause = new Error('duplicate key value violates unique constraint "x"');
    const err = Object.assign(new Error("Failed query: select * from iam.session where token = $1\nparams: secret-session-token"), {
      name: "DrizzleQueryError",
      cause,
    });
    const logged = JSON.stringify(loggableError(err));
    expect(logged).not.toContain("secret-session-token");
    expect(logged).toContain("select * from iam.session");
    expect(logged).toContain("duplicate key value");
  });
});

describe("validation details", () => {
  it("names each unknown field of a strict body in details", async () => {
    const { z, createRoute } = await import("@hono/zod-openapi");
    const { jsonBody } = await import("../src/index.js");
    const app = createServiceApp({ service: "t", title: "t", logger: silentLogger() });
    app.openapi(
      createRoute({ method: "post", path: "/strict", request: { body: jsonBody(z.object({ name: z.string() }).strict()) }, responses: { 200: { description: "ok" } } }),
      (c) => c.json({ ok: true }, 200),
    );
    const r = await app.request("/strict", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ name: "a", role: "x", admin: true }) });
    expect(r.status).toBe(400);
    const body = (await r.json()) as { error: { details: { path: string }[] } };
    expect(body.error.details.map((d) => d.path).sort()).toEqual(["admin", "role"]);
  });
});
