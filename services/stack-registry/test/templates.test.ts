import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "@core/storage";
import { expectError, START_SECONDS, startStackRegistry, unique, type StackRegistry, type StackTemplate } from "./support/stack-registry.js";

const base = { displayName: "Web app", description: "A web application stack" };

describe.each(testDatabases())("stack templates on $name", (database) => {
  let r: StackRegistry;
  beforeAll(async () => {
    r = await startStackRegistry(database);
  });
  afterAll(async () => {
    await r?.close();
  });

  const create = (body: Record<string, unknown>) => r.call("POST", "/api/v1/stacks", { headers: r.publisher, body });
  const detail = (name: string) => r.call<{ template: StackTemplate; latestVersion: unknown }>("GET", `/api/v1/stacks/${name}`, { headers: r.as.member() });
  const patch = (name: string, body: unknown) => r.call("PATCH", `/api/v1/stacks/${name}`, { headers: r.publisher, body });

  it("creates a template and answers { id }; the detail shows it in the spec §2.8 shape with Unix-second timestamps", async () => {
    const name = unique("web");
    const res = await create({ name, ...base, icon: "https://cdn.example/web.svg", domain: "web" });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ id: expect.stringMatching(/^tpl_/) });
    const got = await detail(name);
    expect(got.status).toBe(200);
    expect(got.body).toEqual({
      template: {
        id: res.body.id,
        name,
        display_name: "Web app",
        description: "A web application stack",
        icon: "https://cdn.example/web.svg",
        domain: "web",
        latest_version: "",
        status: "active",
        created_at: START_SECONDS,
        updated_at: START_SECONDS,
      },
      latestVersion: null,
    });
  });

  it("leaves icon and domain as empty strings when not given", async () => {
    const { name } = await r.createTemplate();
    expect((await detail(name)).body.template).toMatchObject({ icon: "", domain: "" });
  });

  it("refuses a name that is taken with 409 TEMPLATE_EXISTS", async () => {
    const { name } = await r.createTemplate();
    expectError(await create({ name, ...base }), 409, "TEMPLATE_EXISTS");
  });

  it("keeps exactly one of two concurrent creations of one name", async () => {
    const name = unique("race");
    const answers = await Promise.all([create({ name, ...base }), create({ name, ...base })]);
    expect(answers.map((a) => a.status).sort()).toEqual([201, 409]);
  });

  describe("limits (spec §8 and ADR 0010), just inside and just outside", () => {
    const cases: [string, Record<string, unknown>, boolean][] = [
      ["name of 1 character", { name: "a" }, true],
      ["name of 64 characters", { name: "n".repeat(64) }, true],
      ["name of 65 characters", { name: "m".repeat(65) }, false],
      ["empty name", { name: "" }, false],
      ["name with an upper-case letter", { name: "Web" }, false],
      ["name with an underscore", { name: "web_app" }, false],
      ["name with a space", { name: "web app" }, false],
      ["displayName of 1 character", { displayName: "W" }, true],
      ["displayName of 128 characters", { displayName: "d".repeat(128) }, true],
      ["displayName of 129 characters", { displayName: "d".repeat(129) }, false],
      ["empty displayName", { displayName: "" }, false],
      ["description of 1 character", { description: "x" }, true],
      ["description of 1024 characters", { description: "x".repeat(1024) }, true],
      ["description of 1025 characters", { description: "x".repeat(1025) }, false],
      ["empty description", { description: "" }, false],
      ["icon of 2048 characters", { icon: "i".repeat(2048) }, true],
      ["icon of 2049 characters", { icon: "i".repeat(2049) }, false],
      ["domain of 128 characters", { domain: "o".repeat(128) }, true],
      ["domain of 129 characters", { domain: "o".repeat(129) }, false],
      ["icon that is not a string", { icon: 7 }, false],
      ["an unknown field", { colour: "red" }, false],
    ];
    it.each(cases)("%s (accepted: %s)", async (_label, override, accepted) => {
      const field = Object.keys(override)[0]!;
      const body = { name: unique("lim"), ...base, ...override };
      const res = await create(body);
      if (accepted) {
        expect(res.status).toBe(201);
      } else {
        const error = expectError(res, 400, "VALIDATION_ERROR");
        expect(error.details.map((d: { path: string }) => d.path)).toContain(field);
      }
    });

    it("requires name, displayName and description", async () => {
      const error = expectError(await create({}), 400, "VALIDATION_ERROR");
      expect(error.details.map((d: { path: string }) => d.path).sort()).toEqual(["description", "displayName", "name"]);
    });
  });

  it("lists only active templates, by name, with total and latest_version", async () => {
    const before = (await r.call<{ data: StackTemplate[]; total: number }>("GET", "/api/v1/stacks", { headers: r.as.member() })).body;
    const a = await r.createTemplate({ name: `zz-${unique("b")}` });
    const b = await r.createTemplate({ name: `zz-${unique("a")}` });
    await r.published(a.name, "1.0.0");
    expect((await patch(b.name, { status: "deprecated" })).status).toBe(200);
    const res = await r.call<{ data: StackTemplate[]; total: number }>("GET", "/api/v1/stacks", { headers: r.as.member() });
    expect(res.status).toBe(200);
    expect(res.body.total).toBe(res.body.data.length);
    expect(res.body.total).toBe(before.total + 1);
    const names = res.body.data.map((t) => t.name);
    expect(names).toEqual([...names].sort());
    expect(names).not.toContain(b.name);
    expect(res.body.data.find((t) => t.name === a.name)).toMatchObject({ latest_version: "1.0.0", status: "active" });
    expect(res.body.data.every((t) => t.status === "active")).toBe(true);
  });

  it("moves a template to deprecated and back; a deprecated template stays readable", async () => {
    const { name } = await r.createTemplate();
    r.clock.advance(5000);
    expect(await patch(name, { status: "deprecated" })).toEqual({ status: 200, body: { ok: true } });
    expect((await detail(name)).body.template).toMatchObject({ status: "deprecated", updated_at: expect.any(Number) });
    expect(await patch(name, { status: "deprecated" })).toEqual({ status: 200, body: { ok: true } });
    expect(await patch(name, { status: "active" })).toEqual({ status: 200, body: { ok: true } });
    const t = (await detail(name)).body.template;
    expect(t.status).toBe("active");
    expect(t.updated_at - t.created_at).toBe(5);
  });

  it("changes displayName, description and icon; an empty icon clears it", async () => {
    const { name } = await r.createTemplate({ icon: "old" });
    expect((await patch(name, { displayName: "New name", description: "New text", icon: "new" })).status).toBe(200);
    expect((await detail(name)).body.template).toMatchObject({ display_name: "New name", description: "New text", icon: "new" });
    await patch(name, { icon: "" });
    expect((await detail(name)).body.template.icon).toBe("");
  });

  it("keeps the name immutable: PATCH refuses name (and domain, or any unknown field) with VALIDATION_ERROR", async () => {
    const { name } = await r.createTemplate();
    for (const field of ["name", "domain", "id"]) {
      const error = expectError(await patch(name, { [field]: "other" }), 400, "VALIDATION_ERROR");
      expect(error.details.map((d: { path: string }) => d.path)).toContain(field);
    }
    expect((await detail(name)).body.template.name).toBe(name);
  });

  describe("PATCH limits, just inside and just outside", () => {
    const cases: [string, Record<string, unknown>, boolean][] = [
      ["displayName of 1 character", { displayName: "d" }, true],
      ["displayName of 128 characters", { displayName: "d".repeat(128) }, true],
      ["displayName of 129 characters", { displayName: "d".repeat(129) }, false],
      ["empty displayName", { displayName: "" }, false],
      ["description of 1024 characters", { description: "x".repeat(1024) }, true],
      ["description of 1025 characters", { description: "x".repeat(1025) }, false],
      ["empty description", { description: "" }, false],
      ["icon of 2048 characters", { icon: "i".repeat(2048) }, true],
      ["icon of 2049 characters", { icon: "i".repeat(2049) }, false],
      ["status active", { status: "active" }, true],
      ["status archived", { status: "archived" }, false],
      ["no field at all", {}, false],
    ];
    it.each(cases)("%s (accepted: %s)", async (_label, body, accepted) => {
      const { name } = await r.createTemplate();
      const res = await patch(name, body);
      if (accepted) expect(res).toEqual({ status: 200, body: { ok: true } });
      else expectError(res, 400, "VALIDATION_ERROR");
    });
  });

  it("answers 404 TEMPLATE_NOT_FOUND for an unknown template on GET and PATCH", async () => {
    expectError(await detail("no-such-template"), 404, "TEMPLATE_NOT_FOUND");
    expectError(await patch("no-such-template", { displayName: "x" }), 404, "TEMPLATE_NOT_FOUND");
    expect(expectError(await detail("no-such-template"), 404, "TEMPLATE_NOT_FOUND").details).toBeNull();
  });
});
