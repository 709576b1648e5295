import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "@core/storage";
import { expectError, START_SECONDS, startStackRegistry, type StackRegistry, type StackTemplate, type StackVersion } from "./support/stack-registry.js";

const LIMIT = 256 * 1024;
/** a definition whose JSON serialization is exactly `bytes` long: {"pad":"…"} */
const definitionOf = (bytes: number) => ({ pad: "x".repeat(bytes - '{"pad":""}'.length) });

/** semver.org §11's examples, ascending */
const SEMVER_ORG_ORDER = [
  "1.0.0-alpha",
  "1.0.0-alpha.1",
  "1.0.0-alpha.beta",
  "1.0.0-beta",
  "1.0.0-beta.2",
  "1.0.0-beta.11",
  "1.0.0-rc.1",
  "1.0.0",
  "1.9.0",
  "1.10.0",
  "1.11.0",
  "2.0.0",
  "2.1.0",
  "2.1.1",
];

describe.each(testDatabases())("stack versions on $name", (database) => {
  let r: StackRegistry;
  beforeAll(async () => {
    r = await startStackRegistry(database);
  });
  afterAll(async () => {
    await r?.close();
  });

  const reader = () => r.as.member();
  const versions = (name: string) => r.call<{ data: StackVersion[]; total: number }>("GET", `/api/v1/stacks/${name}/versions`, { headers: reader() });
  const one = (name: string, version: string) => r.call<StackVersion>("GET", `/api/v1/stacks/${name}/${version}`, { headers: reader() });
  const detail = (name: string) =>
    r.call<{ template: StackTemplate; latestVersion: StackVersion | null }>("GET", `/api/v1/stacks/${name}`, { headers: reader() });
  const deprecate = (name: string, version: string) => r.call("DELETE", `/api/v1/stacks/${name}/${version}`, { headers: r.publisher });
  const latest = async (name: string) => {
    const d = (await detail(name)).body;
    const listed = (await r.call<{ data: StackTemplate[] }>("GET", "/api/v1/stacks", { headers: reader() })).body.data.find((t) => t.name === name);
    expect(listed?.latest_version).toBe(d.template.latest_version);
    expect(d.latestVersion?.version ?? "").toBe(d.template.latest_version);
    return d.template.latest_version;
  };

  it("publishes a version and answers { id }; reading it gives the spec §2.9 shape, the definition as a JSON string", async () => {
    const { id: templateId, name } = await r.createTemplate();
    r.clock.advance(3000);
    const definition = { services: [{ name: "web", replicas: 2 }], env: { LOG_LEVEL: "info" }, nested: { deep: [1, true, null, "ü"] } };
    const res = await r.publish(name, "1.2.3", { stackDefinition: definition, coreSdkVersion: "2.0.0-rc.1" });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ id: expect.stringMatching(/^ver_/) });
    const got = await one(name, "1.2.3");
    expect(got.status).toBe(200);
    expect(got.body).toEqual({
      id: res.body.id,
      template_id: templateId,
      version: "1.2.3",
      stack_definition: expect.any(String),
      core_sdk_version: "2.0.0-rc.1",
      status: "active",
      published_at: START_SECONDS + 3,
      created_at: START_SECONDS + 3,
    });
    expect(JSON.parse(got.body.stack_definition)).toEqual(definition);
  });

  it("accepts an empty object as a definition", async () => {
    const { name } = await r.createTemplate();
    expect((await r.publish(name, "1.0.0", { stackDefinition: {} })).status).toBe(201);
    expect((await one(name, "1.0.0")).body.stack_definition).toBe("{}");
  });

  it("lists every version, deprecated ones included, by semver precedence, highest first, with total", async () => {
    const { name } = await r.createTemplate();
    // published out of order on purpose
    for (const v of [...SEMVER_ORG_ORDER].sort()) await r.published(name, v);
    await deprecate(name, "1.10.0");
    const res = await versions(name);
    expect(res.status).toBe(200);
    expect(res.body.total).toBe(SEMVER_ORG_ORDER.length);
    expect(res.body.data.map((v) => v.version)).toEqual([...SEMVER_ORG_ORDER].reverse());
    expect(res.body.data.find((v) => v.version === "1.10.0")?.status).toBe("deprecated");
  });

  it("answers an empty list for a template without versions", async () => {
    const { name } = await r.createTemplate();
    expect((await versions(name)).body).toEqual({ data: [], total: 0 });
  });

  describe("latest", () => {
    it("is the highest release by precedence (1.10.0 above 1.9.0), above any higher pre-release", async () => {
      const { name } = await r.createTemplate();
      for (const v of ["1.9.0", "1.10.0", "2.0.0-rc.1", "1.2.0"]) await r.published(name, v);
      expect(await latest(name)).toBe("1.10.0");
    });

    it("moves down when the latest is deprecated, and falls back to a pre-release only when no release is left", async () => {
      const { name } = await r.createTemplate();
      for (const v of ["1.0.0-beta.2", "1.0.0-beta.11", "1.0.0", "1.1.0"]) await r.published(name, v);
      expect(await latest(name)).toBe("1.1.0");
      expect(await deprecate(name, "1.1.0")).toEqual({ status: 200, body: { ok: true } });
      expect(await latest(name)).toBe("1.0.0");
      await deprecate(name, "1.0.0");
      expect(await latest(name)).toBe("1.0.0-beta.11");
      await deprecate(name, "1.0.0-beta.11");
      expect(await latest(name)).toBe("1.0.0-beta.2");
    });

    it("is \"\" in the template and null as latestVersion when no version qualifies", async () => {
      const { name } = await r.createTemplate();
      await r.published(name, "1.0.0");
      await deprecate(name, "1.0.0");
      const d = await detail(name);
      expect(d.body.template.latest_version).toBe("");
      expect(d.body.latestVersion).toBeNull();
    });

    it("is given in full as latestVersion in the template detail", async () => {
      const { name } = await r.createTemplate();
      const { id } = await r.published(name, "3.0.0");
      expect((await detail(name)).body.latestVersion).toMatchObject({ id, version: "3.0.0", status: "active" });
    });

    it("follows a version published later that ranks higher", async () => {
      const { name } = await r.createTemplate();
      await r.published(name, "1.0.0");
      await r.published(name, "1.0.1");
      expect(await latest(name)).toBe("1.0.1");
    });
  });

  describe("deprecating a version (DELETE)", () => {
    it("keeps it readable, marked deprecated, and is idempotent", async () => {
      const { name } = await r.createTemplate();
      await r.published(name, "1.0.0");
      expect(await deprecate(name, "1.0.0")).toEqual({ status: 200, body: { ok: true } });
      expect(await deprecate(name, "1.0.0")).toEqual({ status: 200, body: { ok: true } });
      const got = await one(name, "1.0.0");
      expect(got.status).toBe(200);
      expect(got.body.status).toBe("deprecated");
    });

    it("answers 404 VERSION_NOT_FOUND for an unknown version and 404 TEMPLATE_NOT_FOUND for an unknown template", async () => {
      const { name } = await r.createTemplate();
      expectError(await deprecate(name, "9.9.9"), 404, "VERSION_NOT_FOUND");
      expectError(await deprecate("no-such-template", "1.0.0"), 404, "TEMPLATE_NOT_FOUND");
    });
  });

  describe("immutability", () => {
    it("refuses re-publishing a version with 409 VERSION_EXISTS, even with another definition, and keeps the first", async () => {
      const { name } = await r.createTemplate();
      await r.publish(name, "1.0.0", { stackDefinition: { first: true } });
      const error = expectError(await r.publish(name, "1.0.0", { stackDefinition: { first: false } }), 409, "VERSION_EXISTS");
      expect(error.details).toBeNull();
      expect(JSON.parse((await one(name, "1.0.0")).body.stack_definition)).toEqual({ first: true });
    });

    it("refuses re-publishing a deprecated version too", async () => {
      const { name } = await r.createTemplate();
      await r.published(name, "1.0.0");
      await deprecate(name, "1.0.0");
      expectError(await r.publish(name, "1.0.0"), 409, "VERSION_EXISTS");
    });

    it("lets the same version number live in two templates", async () => {
      const a = await r.createTemplate();
      const b = await r.createTemplate();
      await r.published(a.name, "1.0.0");
      expect((await r.publish(b.name, "1.0.0")).status).toBe(201);
    });

    it("lets exactly one of two concurrent publishes of one version win; the other gets 409 VERSION_EXISTS", async () => {
      for (let round = 0; round < 5; round++) {
        const { name } = await r.createTemplate();
        const answers = await Promise.all([
          r.publish(name, "1.0.0", { stackDefinition: { by: "a" } }),
          r.publish(name, "1.0.0", { stackDefinition: { by: "b" } }),
        ]);
        expect(answers.map((a) => a.status).sort()).toEqual([201, 409]);
        const loser = answers.find((a) => a.status === 409)!;
        expectError(loser, 409, "VERSION_EXISTS");
        const winner = answers.find((a) => a.status === 201)!;
        const list = (await versions(name)).body;
        expect(list.total).toBe(1);
        expect(list.data[0]!.id).toBe(winner.body.id);
      }
    });
  });

  describe("publish failures, each with its own code", () => {
    it("404 TEMPLATE_NOT_FOUND for an unknown template", async () => {
      expectError(await r.publish("no-such-template", "1.0.0"), 404, "TEMPLATE_NOT_FOUND");
    });

    it("409 TEMPLATE_DEPRECATED for a deprecated template, and publishing works again once it is active", async () => {
      const { name } = await r.createTemplate();
      await r.call("PATCH", `/api/v1/stacks/${name}`, { headers: r.publisher, body: { status: "deprecated" } });
      expectError(await r.publish(name, "1.0.0"), 409, "TEMPLATE_DEPRECATED");
      await r.call("PATCH", `/api/v1/stacks/${name}`, { headers: r.publisher, body: { status: "active" } });
      expect((await r.publish(name, "1.0.0")).status).toBe(201);
    });

    it("413 PAYLOAD_TOO_LARGE for a definition over 256 KiB serialized; exactly 256 KiB is accepted", async () => {
      const { name } = await r.createTemplate();
      expect(JSON.stringify(definitionOf(LIMIT)).length).toBe(LIMIT);
      expect((await r.publish(name, "1.0.0", { stackDefinition: definitionOf(LIMIT) })).status).toBe(201);
      const error = expectError(await r.publish(name, "1.0.1", { stackDefinition: definitionOf(LIMIT + 1) }), 413, "PAYLOAD_TOO_LARGE");
      expect(error.details).toEqual({ path: "stackDefinition", bytes: LIMIT + 1, limit: LIMIT });
      expectError(await one(name, "1.0.1"), 404, "VERSION_NOT_FOUND");
    });

    it("counts the definition's size in UTF-8 bytes", async () => {
      const { name } = await r.createTemplate();
      // "é" is one character and two bytes
      const pad = "é".repeat((LIMIT - '{"pad":""}'.length) / 2);
      expect((await r.publish(name, "1.0.0", { stackDefinition: { pad } })).status).toBe(201);
      expectError(await r.publish(name, "1.0.1", { stackDefinition: { pad: `${pad}x` } }), 413, "PAYLOAD_TOO_LARGE");
    });

    it("413 PAYLOAD_TOO_LARGE for a body over the 1 MiB request limit", async () => {
      const { name } = await r.createTemplate();
      expectError(await r.publish(name, "1.0.0", { stackDefinition: definitionOf(1024 * 1024 + 1) }), 413, "PAYLOAD_TOO_LARGE");
    });

    const invalid: [string, Record<string, unknown>, string][] = [
      ["version missing", { version: undefined }, "version"],
      ["version not a string", { version: 1 }, "version"],
      ["version of two numbers", { version: "1.0" }, "version"],
      ["version with a v prefix", { version: "v1.0.0" }, "version"],
      ["version with build metadata", { version: "1.0.0+build" }, "version"],
      ["version with a leading zero", { version: "01.0.0" }, "version"],
      ["version with an empty pre-release identifier", { version: "1.0.0-a..b" }, "version"],
      ["version of 65 characters", { version: `1.0.0-${"a".repeat(59)}` }, "version"],
      ["coreSdkVersion missing", { coreSdkVersion: undefined }, "coreSdkVersion"],
      ["coreSdkVersion not semantic", { coreSdkVersion: "latest" }, "coreSdkVersion"],
      ["stackDefinition missing", { stackDefinition: undefined }, "stackDefinition"],
      ["stackDefinition an array", { stackDefinition: [1, 2] }, "stackDefinition"],
      ["stackDefinition null", { stackDefinition: null }, "stackDefinition"],
      ["stackDefinition a string", { stackDefinition: '{"a":1}' }, "stackDefinition"],
      ["stackDefinition a number", { stackDefinition: 3 }, "stackDefinition"],
      ["stackDefinition holding U+0000", { stackDefinition: { a: "nul\u0000" } }, "stackDefinition.a"],
      ["stackDefinition with U+0000 in a key", { stackDefinition: { b: [{ ["k\u0000"]: 1 }] } }, "stackDefinition.b.0.k\u0000"],
      ["an unknown field", { channel: "stable" }, "channel"],
    ];
    it.each(invalid)("400 VALIDATION_ERROR naming the field: %s", async (_label, override, field) => {
      const { name } = await r.createTemplate();
      const error = expectError(await r.publish(name, "1.0.0", override), 400, "VALIDATION_ERROR");
      expect(error.details.map((d: { path: string }) => d.path)).toContain(field);
    });

    it("refuses a stackDefinition nested 5,000 levels deep (about 30 KB) with 400, and keeps one at the documented limit", async () => {
      const { name } = await r.createTemplate();
      const nested = (levels: number): object => (levels === 0 ? {} : { a: nested(levels - 1) });
      const deep = '{"a":'.repeat(5000) + "{}" + "}".repeat(5000);
      const raw = await r.app.request(`/api/v1/stacks/${name}/versions`, {
        method: "POST",
        headers: { ...r.publisher, "content-type": "application/json" },
        body: `{"version":"1.0.0","coreSdkVersion":"1.0.0","stackDefinition":${deep}}`,
      });
      expect(raw.status).toBe(400);
      expect(((await raw.json()) as { error: { code: string } }).error.code).toBe("VALIDATION_ERROR");
      // the request body is level 1, the definition level 2: 62 more levels fit within 64
      expect((await r.publish(name, "1.0.0", { stackDefinition: nested(62) })).status).toBe(201);
      expect((await r.publish(name, "1.0.1", { stackDefinition: nested(63) })).status).toBe(400);
    });

    it("accepts a version of 64 characters, and pre-releases of every kind the pattern allows", async () => {
      const { name } = await r.createTemplate();
      for (const v of [`1.0.0-${"a".repeat(58)}`, "0.0.0", "1.0.0-0.3.7", "1.0.0-x.7.z.92", "1.0.0-A1b2"]) {
        expect((await r.publish(name, v)).status, v).toBe(201);
      }
    });

    it("checks the body before the template: an invalid body to an unknown template is 400", async () => {
      expectError(await r.publish("no-such-template", "nope"), 400, "VALIDATION_ERROR");
    });
  });

  it("answers 404 VERSION_NOT_FOUND and TEMPLATE_NOT_FOUND on reads", async () => {
    const { name } = await r.createTemplate();
    expectError(await one(name, "1.0.0"), 404, "VERSION_NOT_FOUND");
    expectError(await one(name, "not-a-version"), 404, "VERSION_NOT_FOUND");
    expectError(await one("no-such-template", "1.0.0"), 404, "TEMPLATE_NOT_FOUND");
    expectError(await versions("no-such-template"), 404, "TEMPLATE_NOT_FOUND");
  });

  it("keeps a deprecated template's versions readable", async () => {
    const { name } = await r.createTemplate();
    await r.published(name, "1.0.0");
    await r.call("PATCH", `/api/v1/stacks/${name}`, { headers: r.publisher, body: { status: "deprecated" } });
    expect((await one(name, "1.0.0")).status).toBe(200);
    expect((await versions(name)).body.total).toBe(1);
    expect((await detail(name)).body.template).toMatchObject({ status: "deprecated", latest_version: "1.0.0" });
  });
});
