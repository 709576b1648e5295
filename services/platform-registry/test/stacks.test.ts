import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "@core/storage";
import { ISO_8601, startRegistry, unique, type Registry, type Stack } from "./support/registry.js";

const STACK_KEYS = ["createdAt", "id", "isDefault", "name", "platformId", "repoName", "status", "templateId", "tenantId", "updatedAt"];

describe.each(testDatabases())("workspace stacks on $name", (database) => {
  let r: Registry;
  beforeAll(async () => {
    r = await startRegistry(database);
  });
  afterAll(async () => {
    await r?.close();
  });

  const stacksOf = (platformId: string) => `/platforms/${platformId}/stacks`;
  const post = async (platformId: string, body: unknown) => r.call("POST", stacksOf(platformId), { headers: await r.as.service(), body });
  const get = async (platformId: string, stackId: string) => r.call<Stack>("GET", `${stacksOf(platformId)}/${stackId}`, { headers: await r.as.service() });
  const patch = async (platformId: string, stackId: string, body: unknown) =>
    r.call("PATCH", `${stacksOf(platformId)}/${stackId}`, { headers: await r.as.service(), body });
  const defaults = async (platformId: string) => {
    const { pages } = await r.allPages<Stack>(stacksOf(platformId), await r.as.service(), 100);
    return pages.flat().filter((s) => s.isDefault);
  };

  describe("POST /platforms/:platformId/stacks", () => {
    it("answers exactly the create-stack result of spec §2.10: id, name, status, isDefault, createdAt", async () => {
      const platform = await r.createPlatform();
      r.clock.advance(1);
      const res = await post(platform.id, { tenantId: "tnt_1", name: "web" });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({
        id: expect.stringMatching(/^stk_[0-9a-z]{20}$/),
        name: "web",
        status: "active",
        isDefault: false,
        createdAt: r.clock.now().toISOString(),
      });
      expect(res.body.createdAt).toMatch(ISO_8601);
    });

    it("stores the stack in the Stack shape of spec §2.10, optional fields null when absent", async () => {
      const platform = await r.createPlatform();
      const created = await r.createStack(platform.id, { tenantId: "tnt_9", name: "api" });
      const res = await get(platform.id, created.id);
      expect(res.status).toBe(200);
      expect(Object.keys(res.body).sort()).toEqual(STACK_KEYS);
      expect(res.body).toEqual({
        id: created.id,
        tenantId: "tnt_9",
        platformId: platform.id,
        name: "api",
        isDefault: false,
        templateId: null,
        repoName: null,
        status: "active",
        createdAt: created.createdAt,
        updatedAt: created.createdAt,
      });
    });

    it("keeps templateId and repoName when given", async () => {
      const platform = await r.createPlatform();
      const created = await r.createStack(platform.id, { templateId: "tpl_web", repoName: "acme/web" });
      expect((await get(platform.id, created.id)).body).toMatchObject({ templateId: "tpl_web", repoName: "acme/web" });
    });

    it("answers 404 for an unknown platform", async () => {
      const res = await post("plt_nope", { tenantId: "t", name: "n" });
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe("NOT_FOUND");
    });

    it("answers 409 STACK_NAME_TAKEN for a tenant's second stack of one name, and allows it for another tenant", async () => {
      const platform = await r.createPlatform();
      await r.createStack(platform.id, { tenantId: "tnt_a", name: "web" });
      const again = await post(platform.id, { tenantId: "tnt_a", name: "web" });
      expect(again.status).toBe(409);
      expect(again.body.error).toMatchObject({ code: "STACK_NAME_TAKEN", details: null });
      expect((await post(platform.id, { tenantId: "tnt_b", name: "web" })).status).toBe(201);
    });

    describe("validation (spec §2.10)", () => {
      const valid = () => ({ tenantId: "tnt_1", name: unique("s") });
      const limits: [string, unknown, unknown][] = [
        // field, just inside, just outside
        ["tenantId", "t", ""],
        ["tenantId", "t".repeat(128), "t".repeat(129)],
        ["name", "n", ""],
        ["templateId", "t", ""],
        ["templateId", "t".repeat(128), "t".repeat(129)],
        ["repoName", "r", ""],
        ["repoName", "r".repeat(256), "r".repeat(257)],
      ];
      it.each(limits)("accepts %s = %j and refuses just outside the limit", async (field, inside, outside) => {
        const platform = await r.createPlatform();
        expect((await post(platform.id, { ...valid(), [field]: inside })).status).toBe(201);
        const res = await post(platform.id, { ...valid(), [field]: outside });
        expect(res.status).toBe(400);
        expect(res.body.error.code).toBe("VALIDATION_ERROR");
        expect(res.body.error.details.map((d: { path: string }) => d.path)).toEqual([field]);
      });

      it("accepts a name of 128 characters and refuses 129", async () => {
        const platform = await r.createPlatform();
        expect((await post(platform.id, { tenantId: "t", name: "n".repeat(128) })).status).toBe(201);
        expect((await post(platform.id, { tenantId: "t", name: "m".repeat(129) })).status).toBe(400);
      });

      it("names every missing required field", async () => {
        const platform = await r.createPlatform();
        const res = await post(platform.id, {});
        expect(res.status).toBe(400);
        expect(res.body.error.details.map((d: { path: string }) => d.path).sort()).toEqual(["name", "tenantId"]);
      });

      it("refuses a non-boolean isDefault", async () => {
        const platform = await r.createPlatform();
        const res = await post(platform.id, { ...valid(), isDefault: "yes" });
        expect(res.status).toBe(400);
        expect(res.body.error.details).toEqual([expect.objectContaining({ path: "isDefault" })]);
      });
    });
  });

  describe("the default stack", () => {
    it("is at most one: creating a new default clears the old one", async () => {
      const platform = await r.createPlatform();
      const first = await r.createStack(platform.id, { isDefault: true });
      expect(first.isDefault).toBe(true);
      const second = await r.createStack(platform.id, { isDefault: true });
      expect(second.isDefault).toBe(true);
      expect((await get(platform.id, first.id)).body.isDefault).toBe(false);
      expect((await defaults(platform.id)).map((s) => s.id)).toEqual([second.id]);
    });

    it("moves when another stack is patched to be the default", async () => {
      const platform = await r.createPlatform();
      const first = await r.createStack(platform.id, { isDefault: true });
      const second = await r.createStack(platform.id);
      const res = await patch(platform.id, second.id, { isDefault: true });
      expect(res.status).toBe(200);
      expect(res.body.isDefault).toBe(true);
      expect((await defaults(platform.id)).map((s) => s.id)).toEqual([second.id]);
      expect((await get(platform.id, first.id)).body.isDefault).toBe(false);
    });

    it("is kept when the default stack is patched to be the default again", async () => {
      const platform = await r.createPlatform();
      const first = await r.createStack(platform.id, { isDefault: true });
      expect((await patch(platform.id, first.id, { isDefault: true })).body.isDefault).toBe(true);
      expect((await defaults(platform.id)).map((s) => s.id)).toEqual([first.id]);
    });

    it("belongs to each platform separately", async () => {
      const [a, b] = [await r.createPlatform(), await r.createPlatform()];
      const onA = await r.createStack(a.id, { isDefault: true });
      const onB = await r.createStack(b.id, { isDefault: true });
      expect((await defaults(a.id)).map((s) => s.id)).toEqual([onA.id]);
      expect((await defaults(b.id)).map((s) => s.id)).toEqual([onB.id]);
    });

    it("stays single when many defaults are created at once", async () => {
      const platform = await r.createPlatform();
      const headers = await r.as.service();
      const results = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          r.call("POST", stacksOf(platform.id), { headers, body: { tenantId: "tnt_race", name: `race-${i}`, isDefault: true } }),
        ),
      );
      expect(results.map((res) => res.status)).toEqual(Array(8).fill(201));
      expect(await defaults(platform.id)).toHaveLength(1);
    });

    it("stays single when many stacks are patched to be the default at once", async () => {
      const platform = await r.createPlatform();
      const stacks = [];
      for (let i = 0; i < 6; i++) stacks.push(await r.createStack(platform.id));
      const results = await Promise.all(stacks.map((s) => patch(platform.id, s.id, { isDefault: true })));
      expect(results.map((res) => res.status)).toEqual(Array(6).fill(200));
      expect(await defaults(platform.id)).toHaveLength(1);
    });
  });

  describe("GET /platforms/:platformId/stacks pages", () => {
    it("pages through a platform's stacks once each, in creation order, cursor null on the last page", async () => {
      const platform = await r.createPlatform();
      const mine: string[] = [];
      for (let i = 0; i < 5; i++) mine.push((await r.createStack(platform.id)).id);
      const { pages, cursors } = await r.allPages<Stack>(stacksOf(platform.id), await r.as.service(), 2);
      expect(pages.map((p) => p.length)).toEqual([2, 2, 1]);
      expect(pages.flat().map((s) => s.id)).toEqual(mine);
      expect(cursors).toEqual([expect.any(String), expect.any(String), null]);
    });

    it("answers a null cursor when the last page is exactly full", async () => {
      const platform = await r.createPlatform();
      for (let i = 0; i < 4; i++) await r.createStack(platform.id);
      const { pages, cursors } = await r.allPages<Stack>(stacksOf(platform.id), await r.as.service(), 2);
      expect(pages.map((p) => p.length)).toEqual([2, 2]);
      expect(cursors.at(-1)).toBeNull();
    });

    it("lists only the platform's own stacks, in the Stack shape", async () => {
      const [a, b] = [await r.createPlatform(), await r.createPlatform()];
      const onA = await r.createStack(a.id);
      await r.createStack(b.id);
      const res = await r.call("GET", stacksOf(a.id), { headers: await r.as.service() });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ data: [expect.objectContaining({ id: onA.id, platformId: a.id })], cursor: null });
      expect(Object.keys(res.body.data[0]).sort()).toEqual(STACK_KEYS);
    });

    it("answers an empty page for a platform without stacks, and 404 for an unknown platform", async () => {
      const platform = await r.createPlatform();
      expect((await r.call("GET", stacksOf(platform.id), { headers: await r.as.service() })).body).toEqual({ data: [], cursor: null });
      expect((await r.call("GET", stacksOf("plt_nope"), { headers: await r.as.service() })).status).toBe(404);
    });

    it("pages stacks created in the same millisecond without duplicates or gaps (ties broken by id)", async () => {
      const platform = await r.createPlatform();
      const headers = await r.as.service();
      const created = await Promise.all(
        Array.from({ length: 5 }, (_, i) => r.call("POST", stacksOf(platform.id), { headers, body: { tenantId: "t", name: `same-${i}` } })),
      );
      expect(new Set(created.map((c) => c.body.createdAt)).size).toBe(1);
      const { pages } = await r.allPages<Stack>(stacksOf(platform.id), headers, 2);
      expect(pages.flat().map((s) => s.id)).toEqual(created.map((c) => c.body.id as string).sort());
    });

    it("defaults to 50 a page and accepts 1 to 100, refusing 0 and 101", async () => {
      const platform = await r.createPlatform();
      const headers = await r.as.service();
      for (let i = 0; i < 51; i++) await r.createStack(platform.id);
      const first = await r.call("GET", stacksOf(platform.id), { headers });
      expect(first.body.data).toHaveLength(50);
      const rest = await r.call("GET", `${stacksOf(platform.id)}?cursor=${first.body.cursor}`, { headers });
      expect(rest.body.data).toHaveLength(1);
      expect(rest.body.cursor).toBeNull();
      expect((await r.call("GET", `${stacksOf(platform.id)}?limit=1`, { headers })).body.data).toHaveLength(1);
      expect((await r.call("GET", `${stacksOf(platform.id)}?limit=100`, { headers })).body.data).toHaveLength(51);
      for (const limit of [0, 101]) {
        const res = await r.call("GET", `${stacksOf(platform.id)}?limit=${limit}`, { headers });
        expect(res.status).toBe(400);
        expect(res.body.error.details).toEqual([expect.objectContaining({ path: "limit" })]);
      }
    });

    it("answers a tampered cursor with 400 BAD_REQUEST", async () => {
      const platform = await r.createPlatform();
      const res = await r.call("GET", `${stacksOf(platform.id)}?cursor=not-a-cursor`, { headers: await r.as.service() });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe("BAD_REQUEST");
    });
  });

  describe("GET, PATCH and DELETE /platforms/:platformId/stacks/:stackId", () => {
    it("answers 404 for a stack of another platform", async () => {
      const [a, b] = [await r.createPlatform(), await r.createPlatform()];
      const onA = await r.createStack(a.id);
      expect((await get(b.id, onA.id)).status).toBe(404);
      expect((await patch(b.id, onA.id, { name: "x" })).status).toBe(404);
      expect((await r.call("DELETE", `${stacksOf(b.id)}/${onA.id}`, { headers: await r.as.service() })).status).toBe(404);
      expect((await get(a.id, onA.id)).status).toBe(200);
    });

    it("changes the given fields, keeps the rest and moves updatedAt", async () => {
      const platform = await r.createPlatform();
      const created = await r.createStack(platform.id, { templateId: "tpl_1", repoName: "acme/a" });
      const before = (await get(platform.id, created.id)).body;
      r.clock.advance(5_000);
      const res = await patch(platform.id, created.id, { name: "renamed", templateId: null, status: "archived" });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ ...before, name: "renamed", templateId: null, status: "archived", updatedAt: r.clock.now().toISOString() });
      expect((await get(platform.id, created.id)).body).toEqual(res.body);
    });

    it("refuses an empty change, an unknown status and an empty name", async () => {
      const platform = await r.createPlatform();
      const created = await r.createStack(platform.id);
      for (const body of [{}, { status: "deleted" }, { name: "" }, { repoName: "" }]) {
        const res = await patch(platform.id, created.id, body);
        expect(res.status).toBe(400);
        expect(res.body.error.code).toBe("VALIDATION_ERROR");
      }
    });

    it.each([
      ["name", "n".repeat(128), "n".repeat(129)],
      ["templateId", "t".repeat(128), "t".repeat(129)],
      ["repoName", "r".repeat(256), "r".repeat(257)],
    ])("accepts a change of %s just inside its limit and refuses one just outside", async (field, inside, outside) => {
      const platform = await r.createPlatform();
      const created = await r.createStack(platform.id);
      expect((await patch(platform.id, created.id, { [field]: inside })).status).toBe(200);
      const res = await patch(platform.id, created.id, { [field]: outside });
      expect(res.status).toBe(400);
      expect(res.body.error.details).toEqual([expect.objectContaining({ path: field })]);
    });

    it("answers 409 STACK_NAME_TAKEN when renaming onto another stack of the tenant", async () => {
      const platform = await r.createPlatform();
      await r.createStack(platform.id, { tenantId: "tnt_x", name: "one" });
      const two = await r.createStack(platform.id, { tenantId: "tnt_x", name: "two" });
      const res = await patch(platform.id, two.id, { name: "one" });
      expect(res.status).toBe(409);
      expect(res.body.error.code).toBe("STACK_NAME_TAKEN");
    });

    it("deletes a stack, answering its id; it is gone afterwards", async () => {
      const platform = await r.createPlatform();
      const created = await r.createStack(platform.id, { isDefault: true });
      const res = await r.call("DELETE", `${stacksOf(platform.id)}/${created.id}`, { headers: await r.as.service() });
      expect(res).toEqual({ status: 200, body: { id: created.id } });
      expect((await get(platform.id, created.id)).status).toBe(404);
      expect((await r.call("DELETE", `${stacksOf(platform.id)}/${created.id}`, { headers: await r.as.service() })).status).toBe(404);
      expect(await defaults(platform.id)).toEqual([]);
    });
  });

  describe("on a suspended platform", () => {
    it("keeps stacks readable and refuses every change with 403 PLATFORM_SUSPENDED until the suspension is lifted", async () => {
      const platform = await r.createPlatform();
      const stack = await r.createStack(platform.id);
      const service = await r.as.service();
      await r.call("PATCH", `/platforms/${platform.id}`, { headers: service, body: { status: "suspended" } });

      expect((await r.call("GET", stacksOf(platform.id), { headers: service })).status).toBe(200);
      expect((await get(platform.id, stack.id)).status).toBe(200);
      const writes = [
        await r.call("POST", stacksOf(platform.id), { headers: service, body: { tenantId: "t", name: "new" } }),
        await r.call("PATCH", `${stacksOf(platform.id)}/${stack.id}`, { headers: service, body: { name: "x" } }),
        await r.call("DELETE", `${stacksOf(platform.id)}/${stack.id}`, { headers: service }),
        await r.call("POST", stacksOf(platform.id), { headers: r.as.operator(), body: { tenantId: "t", name: "new" } }),
      ];
      for (const res of writes) {
        expect(res.status).toBe(403);
        expect(res.body.error).toMatchObject({ code: "PLATFORM_SUSPENDED", details: null });
      }
      expect((await get(platform.id, stack.id)).body.name).toBe(stack.name);

      await r.call("PATCH", `/platforms/${platform.id}`, { headers: service, body: { status: "active" } });
      expect((await r.call("POST", stacksOf(platform.id), { headers: service, body: { tenantId: "t", name: "new" } })).status).toBe(201);
    });
  });
});
