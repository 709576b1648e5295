import { createRoute, z } from "@hono/zod-openapi";
import { describe, expect, it } from "vitest";
import {
  ApiError,
  createServiceApp,
  decodeCursor,
  encodeCursor,
  jsonContent,
  limitParam,
  silentLogger,
  toPage,
} from "@core/kit";

const b64 = (text: string) => Buffer.from(text).toString("base64url");

describe("cursors", () => {
  it("round-trip a position through an opaque base64url string", () => {
    const cursor = encodeCursor({ k: "2026-01-01T00:00:00.000Z", id: "plt_abc" });
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeCursor(cursor)).toEqual({ k: "2026-01-01T00:00:00.000Z", id: "plt_abc" });
    expect(decodeCursor(encodeCursor({ k: 42, id: "x" }))).toEqual({ k: 42, id: "x" });
  });

  it("read an absent or empty cursor as the first page", () => {
    expect(decodeCursor(undefined)).toBeNull();
    expect(decodeCursor(null)).toBeNull();
    expect(decodeCursor("")).toBeNull();
  });

  it.each([
    ["not base64 JSON", "%%%not-a-cursor"],
    ["base64 of plain text", b64("hello")],
    ["JSON without an id", b64(JSON.stringify({ k: "2026-01-01T00:00:00.000Z" }))],
    ["JSON with a wrongly typed key", b64(JSON.stringify({ k: true, id: "x" }))],
    ["a JSON array", b64("[1,2]")],
  ])("refuse a tampered cursor (%s) with 400 BAD_REQUEST", (_, cursor) => {
    let thrown: unknown;
    try {
      decodeCursor(cursor);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ApiError);
    expect(thrown).toMatchObject({ status: 400, code: "BAD_REQUEST", details: { path: "cursor" } });
  });
});

describe("toPage", () => {
  const rows = [1, 2, 3, 4].map((n) => ({ id: `r${n}`, k: n }));
  const at = (r: { id: string; k: number }) => ({ k: r.k, id: r.id });

  it("returns a null cursor when the rows fit in the page", () => {
    expect(toPage(rows.slice(0, 3), 3, at)).toEqual({ data: rows.slice(0, 3), cursor: null });
    expect(toPage([], 3, at)).toEqual({ data: [], cursor: null });
  });

  it("cuts the extra row and points the cursor at the last row of the page", () => {
    const page = toPage(rows, 3, at);
    expect(page.data).toEqual(rows.slice(0, 3));
    expect(decodeCursor(page.cursor)).toEqual({ k: 3, id: "r3" });
  });
});

describe("limit query parameter", () => {
  const app = createServiceApp({ service: "kit-page", title: "t", logger: silentLogger() });
  app.openapi(
    createRoute({
      method: "get",
      path: "/things",
      request: { query: z.object({ limit: limitParam(50), cursor: z.string().optional() }) },
      responses: { 200: jsonContent(z.object({ limit: z.number(), after: z.string().nullable() }), "ok") },
    }),
    (c) => {
      const { limit, cursor } = c.req.valid("query");
      return c.json({ limit, after: decodeCursor(cursor)?.id ?? null }, 200);
    },
  );
  const get = async (query: string) => {
    const res = await app.request(`/things${query}`);
    return { status: res.status, body: (await res.json()) as { limit?: number; error?: { code: string; details: unknown } } };
  };

  it("defaults to 50", async () => {
    expect(await get("")).toEqual({ status: 200, body: { limit: 50, after: null } });
  });

  it("accepts 1 and 100", async () => {
    expect((await get("?limit=1")).body.limit).toBe(1);
    expect((await get("?limit=100")).body.limit).toBe(100);
  });

  it.each(["0", "101", "1.5", "abc", "-1"])("refuses limit=%s with 400 VALIDATION_ERROR", async (limit) => {
    const { status, body } = await get(`?limit=${limit}`);
    expect(status).toBe(400);
    expect(body.error?.code).toBe("VALIDATION_ERROR");
    expect(body.error?.details).toEqual([expect.objectContaining({ path: "limit" })]);
  });

  it("answers a tampered cursor with a 400 envelope, never a 500", async () => {
    const { status, body } = await get(`?cursor=${b64("{nope")}`);
    expect(status).toBe(400);
    expect(body.error).toMatchObject({ code: "BAD_REQUEST", details: { path: "cursor" } });
  });

  it("decodes a cursor it issued", async () => {
    const { body } = await get(`?cursor=${encodeCursor({ k: 1, id: "thing_7" })}`);
    expect(body).toEqual({ limit: 50, after: "thing_7" });
  });
});
