import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeCursor } from "@core/kit";
import { rowsOf, testDatabases } from "@core/storage";
import { ISO_8601, startRegistry, unique, type Platform, type Registry } from "./support/registry.js";

const PLATFORM_KEYS = ["createdAt", "hostAccountId", "id", "name", "repoName", "slug", "status", "tier", "updatedAt"];

describe.each(testDatabases())("platforms on $name", (database) => {
  let r: Registry;
  beforeAll(async () => {
    r = await startRegistry(database);
  });
  afterAll(async () => {
    await r?.close();
  });

  const post = async (body: unknown) => r.call("POST", "/platforms", { headers: await r.as.service(), body });
  const valid = () => ({ name: "Acme", slug: unique("acme"), tier: "starter" });

  describe("POST /platforms", () => {
    it("creates a platform and answers it in the Platform shape of spec §2.10", async () => {
      r.clock.advance(1);
      const slug = unique("shape");
      const res = await post({ name: "Acme Corp", slug, tier: "growth", hostAccountId: "acct_1", repoName: "acme/infra" });
      expect(res.status).toBe(201);
      expect(Object.keys(res.body).sort()).toEqual(PLATFORM_KEYS);
      expect(res.body).toEqual({
        id: expect.stringMatching(/^plt_[0-9a-z]{20}$/),
        name: "Acme Corp",
        slug,
        status: "active",
        tier: "growth",
        hostAccountId: "acct_1",
        repoName: "acme/infra",
        createdAt: r.clock.now().toISOString(),
        updatedAt: r.clock.now().toISOString(),
      });
      expect(res.body.createdAt).toMatch(ISO_8601);
    });

    it("answers null for the optional links when they are not given", async () => {
      const res = await post(valid());
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({ hostAccountId: null, repoName: null });
    });

    it("stores what it answers: GET returns the same platform", async () => {
      const created = await r.createPlatform({ name: "Stored" });
      const res = await r.call("GET", `/platforms/${created.id}`, { headers: await r.as.service() });
      expect(res).toEqual({ status: 200, body: created });
    });

    it("answers 409 SLUG_TAKEN for a slug already in use", async () => {
      const slug = unique("taken");
      expect((await post({ ...valid(), slug })).status).toBe(201);
      const res = await post({ ...valid(), name: "Other", slug });
      expect(res.status).toBe(409);
      expect(res.body.error).toEqual({
        code: "SLUG_TAKEN",
        message: `The slug "${slug}" is taken`,
        requestId: expect.any(String),
        details: null,
      });
    });

    describe("validation (spec §2.10, §8)", () => {
      const limits: [string, unknown, unknown][] = [
        // field, just inside, just outside
        ["name", "A", ""],
        ["name", "n".repeat(100), "n".repeat(101)],
        ["tier", "s", ""],
        ["tier", "t".repeat(64), "t".repeat(65)],
        ["hostAccountId", "h", ""],
        ["hostAccountId", "h".repeat(256), "h".repeat(257)],
        ["repoName", "r", ""],
        ["repoName", "r".repeat(256), "r".repeat(257)],
      ];
      it.each(limits)("accepts %s = %j and refuses just outside the limit", async (field, inside, outside) => {
        expect((await post({ ...valid(), [field]: inside })).status).toBe(201);
        const res = await post({ ...valid(), [field]: outside });
        expect(res.status).toBe(400);
        expect(res.body.error.code).toBe("VALIDATION_ERROR");
        expect(res.body.error.details.map((d: { path: string }) => d.path)).toEqual([field]);
      });

      it("accepts a slug of 1 and of 63 characters, refuses 0 and 64", async () => {
        const base = unique("s").replace(/-/g, "");
        // each database of this suite is fresh, so the one-letter slug is free
        expect((await post({ ...valid(), slug: "q" })).status).toBe(201);
        expect((await post({ ...valid(), slug: base.padEnd(63, "x") })).status).toBe(201);
        const empty = await post({ ...valid(), slug: "" });
        expect(empty.status).toBe(400);
        expect(new Set(empty.body.error.details.map((d: { path: string }) => d.path))).toEqual(new Set(["slug"]));
        expect((await post({ ...valid(), slug: base.padEnd(64, "x") })).status).toBe(400);
      });

      it.each(["Acme", "acme_corp", "acme corp", "acmé", "acme.io"])("refuses the slug %j outside ^[a-z0-9-]+$", async (slug) => {
        const res = await post({ ...valid(), slug });
        expect(res.status).toBe(400);
        expect(res.body.error.details).toEqual([expect.objectContaining({ path: "slug" })]);
      });

      it("accepts a slug of lowercase letters, digits and hyphens", async () => {
        expect((await post({ ...valid(), slug: `${unique("a-1")}-z9` })).status).toBe(201);
      });

      it("names every missing required field", async () => {
        const res = await post({});
        expect(res.status).toBe(400);
        expect(res.body.error.details.map((d: { path: string }) => d.path).sort()).toEqual(["name", "slug", "tier"]);
      });
    });
  });

  describe("GET /platforms/:platformId", () => {
    it("answers 404 NOT_FOUND for an unknown platform", async () => {
      const res = await r.call("GET", "/platforms/plt_nope", { headers: await r.as.service() });
      expect(res.status).toBe(404);
      expect(res.body.error).toMatchObject({ code: "NOT_FOUND", details: null });
    });

    it("refuses a path id longer than 128 characters and accepts 128", async () => {
      expect((await r.call("GET", `/platforms/${"p".repeat(128)}`, { headers: await r.as.service() })).status).toBe(404);
      const res = await r.call("GET", `/platforms/${"p".repeat(129)}`, { headers: await r.as.service() });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe("VALIDATION_ERROR");
    });
  });

  describe("PATCH /platforms/:platformId", () => {
    const patch = async (id: string, body: unknown) => r.call("PATCH", `/platforms/${id}`, { headers: await r.as.service(), body });

    it("changes the given fields, keeps the rest, and moves updatedAt only", async () => {
      const created = await r.createPlatform({ hostAccountId: "acct_old", repoName: "old/repo" });
      r.clock.advance(60_000);
      const res = await patch(created.id, { name: "Renamed", tier: "scale", repoName: null });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        ...created,
        name: "Renamed",
        tier: "scale",
        repoName: null,
        updatedAt: r.clock.now().toISOString(),
      });
      expect((await r.call("GET", `/platforms/${created.id}`, { headers: await r.as.service() })).body).toEqual(res.body);
    });

    it("refuses an empty change with 400", async () => {
      const created = await r.createPlatform();
      const res = await patch(created.id, {});
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe("VALIDATION_ERROR");
    });

    it("refuses a status other than active or suspended", async () => {
      const created = await r.createPlatform();
      const res = await patch(created.id, { status: "deleted" });
      expect(res.status).toBe(400);
      expect(res.body.error.details).toEqual([expect.objectContaining({ path: "status" })]);
    });

    it("refuses a name of 0 or 101 characters and accepts 1 and 100", async () => {
      const created = await r.createPlatform();
      expect((await patch(created.id, { name: "" })).status).toBe(400);
      expect((await patch(created.id, { name: "n".repeat(101) })).status).toBe(400);
      expect((await patch(created.id, { name: "n" })).status).toBe(200);
      expect((await patch(created.id, { name: "n".repeat(100) })).status).toBe(200);
    });

    it.each([
      ["tier", "t".repeat(64), "t".repeat(65)],
      ["hostAccountId", "h".repeat(256), "h".repeat(257)],
      ["repoName", "r".repeat(256), "r".repeat(257)],
      ["repoName", "r", ""],
    ])("accepts a change of %s just inside its limit and refuses one just outside", async (field, inside, outside) => {
      const created = await r.createPlatform();
      expect((await patch(created.id, { [field]: inside })).status).toBe(200);
      const res = await patch(created.id, { [field]: outside });
      expect(res.status).toBe(400);
      expect(res.body.error.details).toEqual([expect.objectContaining({ path: field })]);
    });

    it("answers 404 for an unknown platform", async () => {
      expect((await patch("plt_nope", { name: "x" })).status).toBe(404);
    });
  });

  describe("GET /platforms pages", () => {
    const list = async (query = "") => r.call("GET", `/platforms${query}`, { headers: await r.as.service() });

    it("pages through every platform once, in creation order, with a null cursor on the last page", async () => {
      const mine: string[] = [];
      for (let i = 0; i < 5; i++) mine.push((await r.createPlatform()).id);
      const { pages, cursors } = await r.allPages<Platform>("/platforms", await r.as.service(), 2);
      const ids = pages.flat().map((p) => p.id);
      expect(new Set(ids).size).toBe(ids.length);
      const [row] = rowsOf<{ n: number }>(await r.db.execute(sql`select count(*)::int as n from registry.platforms`));
      expect(ids).toHaveLength(row!.n);
      expect(ids.filter((id) => mine.includes(id))).toEqual(mine);
      expect(pages.slice(0, -1).every((p) => p.length === 2)).toBe(true);
      expect(cursors.at(-1)).toBeNull();
      expect(cursors.slice(0, -1).every((c) => typeof c === "string" && c.length > 0)).toBe(true);
      // each page continues where the previous one ended: creation order throughout
      const times = pages.flat().map((p) => `${p.createdAt} ${p.id}`);
      expect([...times].sort()).toEqual(times);
    });

    it("answers a null cursor when the last page is exactly full", async () => {
      const { pages } = await r.allPages<Platform>("/platforms", await r.as.service(), 100);
      const total = pages.flat().length;
      expect(total).toBeLessThanOrEqual(100); // one page must be able to hold them all
      const full = await list(`?limit=${total}`);
      expect(full.body.data).toHaveLength(total);
      expect(full.body.cursor).toBeNull();
      const short = await list(`?limit=${total - 1}`);
      expect(short.body.data).toHaveLength(total - 1);
      expect(short.body.cursor).toEqual(expect.any(String));
    });

    it("answers { data, cursor } with data in the Platform shape", async () => {
      await r.createPlatform();
      const res = await list("?limit=1");
      expect(Object.keys(res.body).sort()).toEqual(["cursor", "data"]);
      expect(Object.keys(res.body.data[0]).sort()).toEqual(PLATFORM_KEYS);
    });

    it("defaults the page size to 50", async () => {
      const { pages } = await r.allPages<Platform>("/platforms", await r.as.service(), 100);
      for (let i = pages.flat().length; i <= 50; i++) await r.createPlatform();
      const res = await list();
      expect(res.status).toBe(200);
      expect(res.body.data).toHaveLength(50);
      expect(res.body.cursor).toEqual(expect.any(String));
    });

    it("accepts limit 1 and 100, refuses 0 and 101", async () => {
      expect((await list("?limit=1")).body.data).toHaveLength(1);
      expect((await list("?limit=100")).status).toBe(200);
      for (const limit of ["0", "101"]) {
        const res = await list(`?limit=${limit}`);
        expect(res.status).toBe(400);
        expect(res.body.error).toMatchObject({ code: "VALIDATION_ERROR", details: [expect.objectContaining({ path: "limit" })] });
      }
    });

    it("finds one platform by its slug, answers none for an unknown one, and refuses a slug that cannot exist", async () => {
      const created = await r.createPlatform({ name: "By slug" });
      expect((await list(`?slug=${created.slug}`)).body).toEqual({ data: [created], cursor: null });
      expect((await list(`?slug=${unique("nobody")}`)).body).toEqual({ data: [], cursor: null });
      for (const slug of ["UPPER", "a".repeat(64), "with space", ""]) {
        const res = await list(`?slug=${encodeURIComponent(slug)}`);
        expect(res.status, slug).toBe(400);
        expect(res.body.error).toMatchObject({ code: "VALIDATION_ERROR", details: [expect.objectContaining({ path: "slug" })] });
      }
    });

    it("answers a tampered cursor with 400, never 500", async () => {
      const edited = (position: string) => Buffer.from(position).toString("base64url");
      for (const cursor of [
        "garbage!",
        Buffer.from("{").toString("base64url"),
        edited('{"k":"not a date","id":"x"}'),
        edited('{"k":"+275760-09-13T00:00:00.000Z","id":"x"}'),
        edited('{"k":9223372036854775807,"id":"x"}'),
        edited('{"k":"2026-01-01T00:00:00.000Z","id":"a\\u0000"}'),
        encodeCursor({ k: new Date(), id: "x".repeat(129) }),
      ]) {
        const res = await list(`?cursor=${encodeURIComponent(cursor)}`);
        expect(res.status).toBe(400);
        expect(res.body.error).toMatchObject({ code: "BAD_REQUEST", details: { path: "cursor" } });
      }
    });

    it("pages platforms created in the same millisecond without duplicates or gaps (ties broken by id)", async () => {
      const headers = await r.as.service();
      const created = await Promise.all(
        Array.from({ length: 4 }, () => r.call<Platform>("POST", "/platforms", { headers, body: valid() })),
      );
      const mine = created.map((c) => c.body.id);
      expect(new Set(created.map((c) => c.body.createdAt)).size).toBe(1);
      const { pages } = await r.allPages<Platform>("/platforms", headers, 1);
      const ids = pages.flat().map((p) => p.id);
      expect(new Set(ids).size).toBe(ids.length);
      expect(ids.filter((id) => mine.includes(id))).toEqual([...mine].sort());
    });
  });

  describe("suspension", () => {
    it("keeps a suspended platform readable and refuses changes with 403 PLATFORM_SUSPENDED", async () => {
      const platform = await r.createPlatform();
      const service = await r.as.service();
      const suspended = await r.call("PATCH", `/platforms/${platform.id}`, { headers: service, body: { status: "suspended" } });
      expect(suspended.status).toBe(200);
      expect(suspended.body.status).toBe("suspended");

      expect((await r.call("GET", `/platforms/${platform.id}`, { headers: service })).body.status).toBe("suspended");
      const rename = await r.call("PATCH", `/platforms/${platform.id}`, { headers: service, body: { name: "New" } });
      expect(rename.status).toBe(403);
      expect(rename.body.error).toMatchObject({ code: "PLATFORM_SUSPENDED", details: null });
      const retier = await r.call("PATCH", `/platforms/${platform.id}`, { headers: r.as.operator(), body: { tier: "scale" } });
      expect(retier.status).toBe(403);
      expect(retier.body.error.code).toBe("PLATFORM_SUSPENDED");
    });

    it("lets a service (billing) set the tier of a suspended platform, and nothing else, since a suspended platform can still pay", async () => {
      const platform = await r.createPlatform();
      const service = await r.as.service();
      await r.call("PATCH", `/platforms/${platform.id}`, { headers: service, body: { status: "suspended" } });
      const retier = await r.call("PATCH", `/platforms/${platform.id}`, { headers: service, body: { tier: "growth" } });
      expect(retier.status).toBe(200);
      expect(retier.body).toMatchObject({ tier: "growth", status: "suspended" });
      const withName = await r.call("PATCH", `/platforms/${platform.id}`, { headers: service, body: { tier: "scale", name: "Sneaky" } });
      expect(withName.status).toBe(403);
    });

    it("answers 200 and changes nothing when a suspended platform is suspended again", async () => {
      const platform = await r.createPlatform();
      const service = await r.as.service();
      const first = await r.call("PATCH", `/platforms/${platform.id}`, { headers: service, body: { status: "suspended" } });
      const again = await r.call("PATCH", `/platforms/${platform.id}`, { headers: service, body: { status: "suspended" } });
      expect(again.status).toBe(200);
      expect(again.body).toEqual(first.body);
      const withRename = await r.call("PATCH", `/platforms/${platform.id}`, { headers: service, body: { status: "suspended", name: "Sneaky" } });
      expect(withRename.status).toBe(403);
    });

    it("lets a service lift the suspension, after which changes work again", async () => {
      const platform = await r.createPlatform();
      const service = await r.as.service();
      await r.call("PATCH", `/platforms/${platform.id}`, { headers: service, body: { status: "suspended" } });
      const lifted = await r.call("PATCH", `/platforms/${platform.id}`, { headers: service, body: { status: "active" } });
      expect(lifted.status).toBe(200);
      expect(lifted.body.status).toBe("active");
      const rename = await r.call("PATCH", `/platforms/${platform.id}`, { headers: service, body: { name: "Back" } });
      expect(rename.status).toBe(200);
      expect(rename.body.name).toBe("Back");
    });

    it("sends an operator to IAM to change a status, so IAM and the registry never disagree (spec §3)", async () => {
      const platform = await r.createPlatform();
      const operator = r.as.operator();
      const refused = await r.call("PATCH", `/platforms/${platform.id}`, { headers: operator, body: { status: "suspended" } });
      expect(refused.status).toBe(403);
      expect(refused.body.error).toMatchObject({ code: "FORBIDDEN", message: expect.stringContaining("POST /internal/platform-status") });
      expect((await r.call("GET", `/platforms/${platform.id}`, { headers: operator })).body.status).toBe("active");
      expect((await r.call("PATCH", `/platforms/${platform.id}`, { headers: operator, body: { tier: "scale" } })).status).toBe(200);
    });
  });
});
