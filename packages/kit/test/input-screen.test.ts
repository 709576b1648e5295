import { createRoute, z } from "@hono/zod-openapi";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request } from "node:http";
import {
  createServiceApp,
  jsonBody,
  jsonContent,
  listen,
  MAX_JSON_DEPTH,
  nestingBeyond,
  rawRequestOf,
  silentLogger,
  unkeepableText,
  type RunningServer,
} from "@core/kit";

/** A service with a validated JSON route, a path-parameter route, a form route and a library-style route reading the raw request. */
function buildApp() {
  const app = createServiceApp({
    service: "screen-test",
    title: "Input screen test",
    logger: silentLogger(),
    ownsBody: (path) => path.startsWith("/library/") || path === "/form",
  });
  app.openapi(
    createRoute({
      method: "post",
      path: "/things",
      request: { body: jsonBody(z.object({ name: z.string(), definition: z.record(z.string(), z.unknown()).optional() })) },
      responses: { 200: jsonContent(z.object({ name: z.string() }), "The thing") },
    }),
    (c) => c.json({ name: c.req.valid("json").name }, 200),
  );
  app.get("/things/:thingId/parts/:partId", (c) => c.json(c.req.param()));
  app.get("/search", (c) => c.json(c.req.query()));
  app.post("/form", async (c) => c.json(await c.req.parseBody()));
  // what a library does: read the request as it arrived
  app.post("/library/echo", async (c) => {
    const raw = await rawRequestOf(c);
    return c.json({ type: raw.headers.get("content-type"), text: await raw.text() });
  });
  return app;
}

const app = buildApp();
const postJson = (path: string, body: string | Uint8Array<ArrayBuffer>) =>
  app.request(path, { method: "POST", headers: { "content-type": "application/json" }, body });
const errorOf = async (res: Response) => ((await res.json()) as { error: { code: string; message: string; details: { path: string; message: string; code: string }[] } }).error;

const nested = (levels: number) => "{\"a\":".repeat(levels - 1) + "{}" + "}".repeat(levels - 1);

describe("U+0000 and lone surrogates in JSON bodies", () => {
  it("refuses a NUL in a field with 400 VALIDATION_ERROR naming the field", async () => {
    const res = await postJson("/things", JSON.stringify({ name: "a\u0000b" }));
    expect(res.status).toBe(400);
    const error = await errorOf(res);
    expect(error.code).toBe("VALIDATION_ERROR");
    expect(error.message).toBe("Invalid body: name");
    expect(error.details).toEqual([{ path: "name", message: "Must not contain the NUL character (U+0000)", code: "invalid_characters" }]);
  });

  it("names a NUL deep inside a free-form value by its dotted path", async () => {
    const res = await postJson("/things", JSON.stringify({ name: "ok", definition: { services: ["web", "d\u0000b"] } }));
    expect(res.status).toBe(400);
    expect((await errorOf(res)).details.map((d) => d.path)).toEqual(["definition.services.1"]);
  });

  it("refuses a NUL in a field name", async () => {
    const res = await postJson("/things", JSON.stringify({ name: "ok", definition: { "a\u0000": 1 } }));
    expect(res.status).toBe(400);
    expect((await errorOf(res)).details[0]).toMatchObject({ path: "definition.a\u0000", message: expect.stringMatching(/^Field name: /) });
  });

  it("refuses a lone surrogate, which would otherwise become U+FFFD on its way to the database", async () => {
    const res = await postJson("/things", '{"name":"x\\ud800y"}');
    expect(res.status).toBe(400);
    expect((await errorOf(res)).details[0]).toMatchObject({ path: "name", message: expect.stringContaining("well-formed Unicode") });
  });

  it("keeps a surrogate pair sent as escapes, and a backslash followed by the letters u0000", async () => {
    const pair = await postJson("/things", '{"name":"\\ud83d\\ude00"}');
    expect(pair.status).toBe(200);
    expect(await pair.json()).toEqual({ name: "😀" });
    const letters = await postJson("/things", '{"name":"\\\\u0000"}');
    expect(letters.status).toBe(200);
    expect(await letters.json()).toEqual({ name: "\\u0000" });
  });

  it("refuses a body that is not valid UTF-8 with 400 BAD_REQUEST instead of replacing bytes", async () => {
    const bytes = new Uint8Array([...Buffer.from('{"name":"'), 0xc3, 0x28, ...Buffer.from('"}')]);
    const res = await postJson("/things", bytes);
    expect(res.status).toBe(400);
    expect((await errorOf(res)).code).toBe("BAD_REQUEST");
  });

  it("still answers malformed JSON and schema mismatches as before", async () => {
    expect((await errorOf(await postJson("/things", '{"name":'))).code).toBe("BAD_REQUEST");
    const mismatch = await errorOf(await postJson("/things", '{"name":1}'));
    expect(mismatch.code).toBe("VALIDATION_ERROR");
    expect(mismatch.details.map((d) => d.path)).toEqual(["name"]);
  });
});

describe("nesting limit", () => {
  it(`accepts ${MAX_JSON_DEPTH} levels and refuses ${MAX_JSON_DEPTH + 1} with 400 naming the limit`, async () => {
    const inside = await postJson("/things", `{"name":"ok","definition":${nested(MAX_JSON_DEPTH - 1)}}`);
    expect(inside.status).toBe(200);
    const outside = await postJson("/things", `{"name":"ok","definition":${nested(MAX_JSON_DEPTH)}}`);
    expect(outside.status).toBe(400);
    const error = await errorOf(outside);
    expect(error.code).toBe("VALIDATION_ERROR");
    expect(error.details).toEqual([{ path: "(body)", message: `JSON may nest at most ${MAX_JSON_DEPTH} levels deep`, code: "too_deep" }]);
  });

  it("refuses 5,000 levels (about 30 KB) with 400, not a stack overflow", async () => {
    const body = `{"name":"ok","definition":${nested(5000)}}`;
    expect(body.length).toBeGreaterThan(25_000);
    const res = await postJson("/things", body);
    expect(res.status).toBe(400);
  });

  it("counts brackets outside strings only", () => {
    expect(nestingBeyond(`{"a":"${"[".repeat(100)}"}`, 2)).toBe(false);
    expect(nestingBeyond(`{"a":"\\"[[[["}`, 1)).toBe(false);
    expect(nestingBeyond("[[[]]]", 3)).toBe(false);
    expect(nestingBeyond("[[[[]]]]", 3)).toBe(true);
  });
});

describe("U+0000 in paths and query strings", () => {
  it("refuses it in a path parameter, naming the parameter", async () => {
    const res = await app.request("/things/t1/parts/a%00b");
    expect(res.status).toBe(400);
    const error = await errorOf(res);
    expect(error).toMatchObject({ code: "VALIDATION_ERROR", message: "Invalid path: partId" });
    expect(error.details[0]).toMatchObject({ path: "partId" });
  });

  it("refuses it on a path no route matches, naming the path", async () => {
    const res = await app.request("/nowhere/a%00b");
    expect(res.status).toBe(400);
    expect((await errorOf(res)).details[0]!.path).toBe("(path)");
  });

  it("refuses it in a query value, naming the parameter, and leaves other queries alone", async () => {
    const res = await app.request("/search?orgId=ok&action=a%00b");
    expect(res.status).toBe(400);
    expect(await errorOf(res)).toMatchObject({ message: "Invalid query: action", details: [{ path: "action" }] });
    const fine = await app.request("/search?action=a%01b");
    expect(fine.status).toBe(200);
    expect(await fine.json()).toEqual({ action: "a\u0001b" });
  });
});

describe("form bodies and libraries that read the raw request", () => {
  const form = (body: string) =>
    app.request("/form", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body });

  it("refuses a NUL in a form field, naming it, and passes a clean form to the route", async () => {
    const res = await form("email=a%40b.c&name=x%00y");
    expect(res.status).toBe(400);
    expect(await errorOf(res)).toMatchObject({ message: "Invalid body: name", details: [{ path: "name" }] });
    const fine = await form("email=a%40b.c&name=xy");
    expect(await fine.json()).toEqual({ email: "a@b.c", name: "xy" });
  });

  it("hands a library the JSON body exactly as it was sent", async () => {
    const body = '{ "name" : "Ada",\n "nested": {"x": [1, 2.50, "é"]} }';
    const res = await app.request("/library/echo", { method: "POST", headers: { "content-type": "application/json" }, body });
    expect(await res.json()).toEqual({ type: "application/json", text: body });
  });

  it("refuses a NUL on a library route before the library sees it", async () => {
    const res = await app.request("/library/echo", { method: "POST", headers: { "content-type": "application/json" }, body: '{"name":"a\\u0000"}' });
    expect(res.status).toBe(400);
    expect((await errorOf(res)).details[0]!.path).toBe("name");
  });
});

describe("unkeepableText", () => {
  it("names NUL and lone surrogates, and passes everything else", () => {
    expect(unkeepableText("plain")).toBeNull();
    expect(unkeepableText("tab\tand\u0001control")).toBeNull();
    expect(unkeepableText("\u0000")).toMatch(/NUL/);
    expect(unkeepableText("\udc00x")).toMatch(/surrogate/);
    expect(unkeepableText("x\ud800")).toMatch(/surrogate/);
    expect(unkeepableText("\ud83d\ude00")).toBeNull();
  });
});

describe("over real HTTP", () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await listen(app, 0, "127.0.0.1");
  });
  afterAll(() => server.close());

  const send = (path: string, headers: Record<string, string>, body: string) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = request(`${server.url}${path}`, { method: "POST", headers }, (res) => {
        let text = "";
        res.on("data", (d) => (text += d));
        res.on("end", () => resolve({ status: res.statusCode!, text }));
      });
      req.on("error", reject);
      req.end(body);
    });

  it("screens a chunked body too, and the route still reads it", async () => {
    const nul = await send("/things", { "transfer-encoding": "chunked", "content-type": "application/json" }, '{"name":"\\u0000"}');
    expect(nul.status).toBe(400);
    const fine = await send("/things", { "transfer-encoding": "chunked", "content-type": "application/json" }, '{"name":"ok"}');
    expect(fine).toEqual({ status: 200, text: '{"name":"ok"}' });
  });

  it("still refuses a chunked body beyond the limit with 413", async () => {
    const r = await send("/things", { "transfer-encoding": "chunked", "content-type": "application/json" }, `"${"x".repeat(1024 * 1024 + 10)}"`);
    expect(r.status).toBe(413);
  });
});
