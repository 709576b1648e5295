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

const BY_TIME = { key: "timestamp", tie: "id" } as const;
const BY_SECOND = { key: "seconds", tie: "sequence" } as const;

/** What decodeCursor threw, or undefined. */
function thrownBy(decode: () => unknown): unknown {
  try {
    decode();
  } catch (err) {
    return err;
  }
  return undefined;
}

describe("cursors", () => {
  it("round-trip a position through an opaque base64url string, as the listing's kinds of key", () => {
    const cursor = encodeCursor({ k: new Date("2026-01-01T00:00:00.000Z"), id: "plt_abc" });
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeCursor(cursor, BY_TIME)).toEqual({ k: new Date("2026-01-01T00:00:00.000Z"), id: "plt_abc" });
    expect(decodeCursor(encodeCursor({ k: 42, id: 7 }), BY_SECOND)).toEqual({ k: 42, id: 7 });
  });

  it("read an absent or empty cursor as the first page", () => {
    expect(decodeCursor(undefined, BY_TIME)).toBeNull();
    expect(decodeCursor(null, BY_TIME)).toBeNull();
    expect(decodeCursor("", BY_TIME)).toBeNull();
  });

  const edited = (k: unknown, id: unknown = "x") => b64(JSON.stringify({ k, id }));
  it.each([
    ["not base64 JSON", BY_TIME, "%%%not-a-cursor"],
    ["base64 of plain text", BY_TIME, b64("hello")],
    ["JSON without an id", BY_TIME, b64(JSON.stringify({ k: "2026-01-01T00:00:00.000Z" }))],
    ["JSON with a wrongly typed key", BY_TIME, edited(true)],
    ["a JSON array", BY_TIME, b64("[1,2]")],
    ["JSON null", BY_TIME, b64("null")],
    ["a key that is not a date", BY_TIME, edited("not a date")],
    ["a date out of range", BY_TIME, edited("+275760-09-13T00:00:00.000Z")],
    ["a date before 1970", BY_TIME, edited("1969-12-31T23:59:59.999Z")],
    ["a date after 9999", BY_TIME, edited("10000-01-01T00:00:00.000Z")],
    ["a date that does not exist", BY_TIME, edited("2026-02-31T00:00:00.000Z")],
    ["a number where a date belongs", BY_TIME, edited(1700000000)],
    ["an id holding U+0000", BY_TIME, edited("2026-01-01T00:00:00.000Z", "a\u0000b")],
    ["an id of 129 characters", BY_TIME, edited("2026-01-01T00:00:00.000Z", "x".repeat(129))],
    ["a key that is not a number", BY_SECOND, edited("abc", 1)],
    ["a key of 1e300", BY_SECOND, edited(1e300, 1)],
    ["a key of 2^63-1", BY_SECOND, b64('{"k":9223372036854775807,"id":1}')],
    ["a negative key", BY_SECOND, edited(-1, 1)],
    ["a fractional key", BY_SECOND, edited(1.5, 1)],
    ["a sequence of 0", BY_SECOND, edited(1, 0)],
    ["a sequence beyond 2^53", BY_SECOND, edited(1, 2 ** 60)],
    ["a string where a sequence belongs", BY_SECOND, edited(1, "1")],
    ["a cursor over 1024 characters", BY_TIME, "A".repeat(1025)],
  ])("refuse an edited cursor (%s) with 400 BAD_REQUEST", (_, keyset, cursor) => {
    const thrown = thrownBy(() => decodeCursor(cursor, keyset));
    expect(thrown).toBeInstanceOf(ApiError);
    expect(thrown).toMatchObject({ status: 400, code: "BAD_REQUEST", details: { path: "cursor" } });
  });

  it("accepts the edges of each kind", () => {
    expect(decodeCursor(edited("1970-01-01T00:00:00.000Z"), BY_TIME)?.k).toEqual(new Date(0));
    expect(decodeCursor(edited("9999-12-31T23:59:59.999Z"), BY_TIME)?.k.getUTCFullYear()).toBe(9999);
    expect(decodeCursor(edited(0, 1), BY_SECOND)).toEqual({ k: 0, id: 1 });
    expect(decodeCursor(edited(99_999_999_999, Number.MAX_SAFE_INTEGER), BY_SECOND)).toEqual({ k: 99_999_999_999, id: Number.MAX_SAFE_INTEGER });
    expect(thrownBy(() => decodeCursor(edited(100_000_000_000, 1), BY_SECOND))).toBeInstanceOf(ApiError);
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
    expect(decodeCursor(page.cursor, { key: "seconds", tie: "id" })).toEqual({ k: 3, id: "r3" });
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
      return c.json({ limit, after: decodeCursor(cursor, { key: "seconds", tie: "id" })?.id ?? null }, 200);
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
