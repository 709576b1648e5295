import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger, createServiceApp, HOT_BODY_BYTES, listen, readJsonBody, type RunningServer } from "@core/kit";
import { z } from "zod";

// A route with a hot answer, as IAM's validate-session has (ADR 0005). The full route says which
// path answered and echoes the body it read, so a test sees both which path ran and what reached it.
const lines: string[] = [];
const app = createServiceApp({
  service: "hot-test",
  title: "Hot routes test",
  logger: createLogger("hot-test", "info", { write: (line: string) => void lines.push(line) }),
});
// answered as IAM's validate-session answers: a JSON text with a plain header record
app.post("/lookup", (c) => {
  const body = readJsonBody(c, z.object({ key: z.string() }).passthrough());
  return c.body(JSON.stringify({ via: "full", body }), 200, { "content-type": "application/json" });
});
let failing = false;
app.hot({
  method: "POST",
  path: "/lookup",
  answer: (headers, body) => {
    if (failing) throw new Error("a bug in the hot route");
    if (body !== '{"key":"known"}') return undefined;
    // an answer after a wait (IAM reads a session it has not cached), or a refusal after one
    if (headers["x-flavour"] === "later") return new Promise((resolve) => setTimeout(() => resolve('{"via":"hot later"}'), 5));
    if (headers["x-flavour"] === "later declined") return Promise.resolve(undefined);
    if (headers["x-flavour"] === "later failing") return Promise.reject(new Error("the database is out of reach"));
    return headers["x-flavour"] !== "declined" ? '{"via":"hot"}' : undefined;
  },
});

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** the header names as written, in order */
  names: string[];
  body: any;
}

/** One request over a real socket with exactly these headers and bytes (fetch would set Host itself). */
function send(server: RunningServer, options: { path?: string; method?: string; headers?: Record<string, string>; body?: string | Buffer; chunked?: boolean }): Promise<Answer> {
  const { path = "/lookup", method = "POST", body = '{"key":"known"}' } = options;
  const headers: Record<string, string | number> = { host: "localhost:3001", "content-type": "application/json", ...options.headers };
  if (!options.chunked) headers["content-length"] = Buffer.byteLength(body);
  return new Promise((resolve, reject) => {
    const req = request(`${server.url}${path}`, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        const names = res.rawHeaders.filter((_, i) => i % 2 === 0);
        resolve({ status: res.statusCode!, headers: res.headers, names, body: text ? JSON.parse(text) : null });
      });
    });
    req.on("error", reject);
    if (options.chunked) {
      const bytes = Buffer.from(body);
      req.write(bytes.subarray(0, 3));
      req.end(bytes.subarray(3));
    } else req.end(body);
  });
}

const requestLines = () => lines.map((line) => JSON.parse(line)).filter((line) => line.msg === "request");
const counted = async () => (await app.metrics.registry.metrics()).match(/http_requests_total\{[^}]*route="\/lookup"[^}]*status="200"[^}]*\} (\d+)/)?.[1];

describe("hot routes (answered before the app)", () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await listen(app, 0, "127.0.0.1");
  });
  afterAll(async () => {
    await server.close();
  });

  it("answers from memory with the headers the full path sends, and counts and logs the request", async () => {
    lines.length = 0;
    const before = Number((await counted()) ?? 0);
    const hot = await send(server, { headers: { "x-request-id": "req-hot-1" } });
    expect(hot).toMatchObject({ status: 200, body: { via: "hot" } });
    expect(hot.headers).toMatchObject({ "content-type": "application/json", "content-length": String('{"via":"hot"}'.length), "x-request-id": "req-hot-1" });
    const full = await send(server, { body: '{"key":"other"}' });
    expect(full).toMatchObject({ status: 200, body: { via: "full" } });
    // the same header fields either way (names are case-blind; Node may write them in another order)
    const fields = (answer: Answer) => answer.names.map((name) => name.toLowerCase()).sort();
    expect(fields(hot)).toEqual(fields(full));
    expect(full.headers["content-type"]).toBe(hot.headers["content-type"]);
    expect(Number(await counted())).toBe(before + 2);
    expect(requestLines()).toEqual([
      expect.objectContaining({ requestId: "req-hot-1", method: "POST", path: "/lookup", status: 200, ms: expect.any(Number) }),
      expect.objectContaining({ method: "POST", path: "/lookup", status: 200 }),
    ]);
  });

  it("gives a request a new id when it brings none or an unusable one, as the kit does", async () => {
    const none = await send(server, {});
    expect(none.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
    const unusable = await send(server, { headers: { "x-request-id": "has spaces and ;" } });
    expect(unusable.body).toEqual({ via: "hot" });
    expect(unusable.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("hands a declined request to the full path with the body it read", async () => {
    const declined = await send(server, { headers: { "x-flavour": "declined" } });
    expect(declined).toMatchObject({ status: 200, body: { via: "full", body: { key: "known" } } });
    // a body the app's screen refuses is refused as before: the full path read what the hot one had read
    const nul = await send(server, { body: '{"key":"a\\u0000b"}' });
    expect(nul).toMatchObject({ status: 400, body: { error: { code: "VALIDATION_ERROR" } } });
    const malformed = await send(server, { body: '{"key":' });
    expect(malformed).toMatchObject({ status: 400, body: { error: { code: "BAD_REQUEST" } } });
  });

  it("leaves to the full path what it does not read: other methods and paths, a query, chunked, large, non-JSON bodies, odd hosts", async () => {
    const full = { status: 200, body: { via: "full" } };
    expect(await send(server, { path: "/lookup?x=1" })).toMatchObject(full);
    expect(await send(server, { chunked: true })).toMatchObject(full);
    expect(await send(server, { body: `{"key":"known","pad":"${"x".repeat(HOT_BODY_BYTES)}"}` })).toMatchObject(full);
    expect(await send(server, { headers: { "content-type": "text/plain" } })).toMatchObject({ status: 415, body: { error: { code: "UNSUPPORTED_MEDIA_TYPE" } } });
    expect(await send(server, { method: "PUT" })).toMatchObject({ status: 404 });
    expect(await send(server, { path: "/lookup/" })).toMatchObject({ status: 404 });
    // a Host @hono/node-server would parse (and may refuse) is left to it
    expect(await send(server, { headers: { host: "Example.COM" } })).toMatchObject(full);
    expect(await send(server, { headers: { host: "127.0.0.1:60001" } })).toMatchObject({ status: 200, body: { via: "hot" } });
    expect(await send(server, { headers: { host: "127.0.0.1:70000" } })).not.toMatchObject({ body: { via: "hot" } });
  });

  it("never answers a body that is not UTF-8: the full path refuses it", async () => {
    const bytes = Buffer.concat([Buffer.from('{"key":"'), Buffer.from([0xff]), Buffer.from('"}')]);
    expect(await send(server, { body: bytes })).toMatchObject({ status: 400, body: { error: { code: "BAD_REQUEST", message: expect.stringContaining("UTF-8") } } });
  });

  it("answers after a wait when the hot route has to look first, and hands on what it declines or fails then", async () => {
    const later = await send(server, { headers: { "x-flavour": "later", "x-request-id": "req-later" } });
    expect(later).toMatchObject({ status: 200, body: { via: "hot later" }, headers: { "x-request-id": "req-later", "content-type": "application/json" } });
    expect(await send(server, { headers: { "x-flavour": "later declined" } })).toMatchObject({ status: 200, body: { via: "full", body: { key: "known" } } });
    expect(await send(server, { headers: { "x-flavour": "later failing" } })).toMatchObject({ status: 200, body: { via: "full", body: { key: "known" } } });
  });

  it("lets the full path answer when the hot route fails", async () => {
    failing = true;
    try {
      expect(await send(server, {})).toMatchObject({ status: 200, body: { via: "full", body: { key: "known" } } });
    } finally {
      failing = false;
    }
  });

  it("is not used for requests made in process: app.request always takes the full path", async () => {
    const res = await app.request("/lookup", { method: "POST", headers: { "content-type": "application/json" }, body: '{"key":"known"}' });
    expect(await res.json()).toMatchObject({ via: "full" });
  });
});
