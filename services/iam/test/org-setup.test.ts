import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, createIam, signUp, startIamAndRegistry, uniqueSlug, type Iam } from "./support/harness.js";

describe.each(testDatabases())("org-setup on $name", ({ open }) => {
  let database: DatabaseHandle;
  let stack: Awaited<ReturnType<typeof startIamAndRegistry>>;
  let iam: Iam;

  beforeAll(async () => {
    database = await open();
    stack = await startIamAndRegistry(database);
    iam = stack.iam;
  });
  afterAll(async () => {
    await stack?.close();
    await database?.close();
  });

  it("creates the organization with the caller as owner and its platform in the registry", async () => {
    const ada = await signUp(iam);
    const slug = uniqueSlug("acme");
    const r = await call(iam, "POST", "/api/core/org-setup", { cookie: ada.cookie, body: { name: "Acme", slug } });
    expect(r.status).toBe(201);
    expect(Object.keys(r.body).sort()).toEqual(["name", "orgId", "platformId", "slug"]);
    expect(r.body).toMatchObject({ name: "Acme", slug });

    const session = await call(iam, "GET", "/api/core/session", { token: ada.token });
    expect(session.body.principal).toMatchObject({ orgId: r.body.orgId, platformId: r.body.platformId, role: "owner", orgType: "tenant" });

    const platform = await fetch(`${stack.registryUrl}/platforms/${r.body.platformId}`, { headers: { authorization: `Bearer ${ada.token}` } });
    expect(platform.status).toBe(200);
    expect(await platform.json()).toMatchObject({ id: r.body.platformId, slug, name: "Acme", status: "active" });
  });

  it("makes the new organization the active one; the other's platform is then refused with a 403 that says why, until a switch", async () => {
    const ada = await signUp(iam);
    const first = await call(iam, "POST", "/api/core/org-setup", { cookie: ada.cookie, body: { name: "First", slug: uniqueSlug("first") } });
    const second = await call(iam, "POST", "/api/core/org-setup", { cookie: ada.cookie, body: { name: "Second", slug: uniqueSlug("second") } });
    expect((await call(iam, "GET", "/api/core/session", { token: ada.token })).body.principal.orgId).toBe(second.body.orgId);
    const read = () => fetch(`${stack.registryUrl}/platforms/${first.body.platformId}`, { headers: { authorization: `Bearer ${ada.token}` } });
    const refused = await read();
    expect(refused.status).toBe(403);
    const { message } = ((await refused.json()) as { error: { message: string } }).error;
    expect(message).toBe(
      `You need platform:read on platform ${first.body.platformId}. You act in organization ${second.body.orgId}, whose platform is ${second.body.platformId}. ` +
        "If the platform belongs to another of your organizations, switch to it: core org list, then core org switch <slug>, or Switch on your account page.",
    );
    const switched = await call(iam, "POST", "/api/auth/organization/set-active", { token: ada.token, headers: { origin: iam.origin }, body: { organizationSlug: first.body.slug } });
    expect(switched.status).toBe(200);
    // the registry's copy of the principal lives up to 5 s (DESIGN §4)
    let status = 0;
    for (const deadline = Date.now() + 8_000; Date.now() < deadline && status !== 200; await new Promise((r) => setTimeout(r, 250))) status = (await read()).status;
    expect(status).toBe(200);
  });

  it("refuses a bearer token alone with 401 (session cookie only, spec §5.2)", async () => {
    const ada = await signUp(iam);
    const r = await call(iam, "POST", "/api/core/org-setup", { token: ada.token, body: { name: "Acme", slug: uniqueSlug() } });
    expect(r.status).toBe(401);
    expect(r.body.error.code).toBe("UNAUTHENTICATED");
  });

  it("refuses a request without any session with 401", async () => {
    const r = await call(iam, "POST", "/api/core/org-setup", { body: { name: "Acme", slug: uniqueSlug() } });
    expect(r.status).toBe(401);
  });

  it("refuses a forged session cookie with 401", async () => {
    const ada = await signUp(iam);
    const forged = ada.cookie.replace(/=([^.]+)\./, "=$1x.");
    const r = await call(iam, "POST", "/api/core/org-setup", { cookie: forged, body: { name: "Acme", slug: uniqueSlug() } });
    expect(r.status).toBe(401);
  });

  it("refuses a cookie write from an untrusted origin with 403", async () => {
    const ada = await signUp(iam);
    const r = await call(iam, "POST", "/api/core/org-setup", {
      cookie: ada.cookie,
      headers: { origin: "https://evil.example" },
      body: { name: "Acme", slug: uniqueSlug() },
    });
    expect(r.status).toBe(403);
  });

  it.each([
    ["name empty", { name: "", slug: "ok-slug" }, "name"],
    ["name of 101 characters", { name: "n".repeat(101), slug: "ok-slug" }, "name"],
    ["slug empty", { name: "Acme", slug: "" }, "slug"],
    ["slug of 64 characters", { name: "Acme", slug: "s".repeat(64) }, "slug"],
    ["slug with capitals", { name: "Acme", slug: "Acme" }, "slug"],
    ["slug with an underscore", { name: "Acme", slug: "ac_me" }, "slug"],
    ["slug missing", { name: "Acme" }, "slug"],
  ])("answers 400 VALIDATION_ERROR for %s", async (_label, body, field) => {
    const ada = await signUp(iam);
    const r = await call(iam, "POST", "/api/core/org-setup", { cookie: ada.cookie, body });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe("VALIDATION_ERROR");
    expect(r.body.error.details.map((d: { path: string }) => d.path)).toContain(field);
  });

  it("accepts the limits just inside: a 100-character name and a 63-character slug, and 1-character ones", async () => {
    const ada = await signUp(iam);
    const longSlug = `${uniqueSlug("x")}-`.padEnd(63, "a");
    const long = await call(iam, "POST", "/api/core/org-setup", { cookie: ada.cookie, body: { name: "n".repeat(100), slug: longSlug } });
    expect(long.status).toBe(201);
    const bob = await signUp(iam);
    // every other test here uses long generated slugs, so "q" is free in this database
    const short = await call(iam, "POST", "/api/core/org-setup", { cookie: bob.cookie, body: { name: "n", slug: "q" } });
    expect(short.status).toBe(201);
  });

  it("answers 409 SLUG_TAKEN for a slug in use", async () => {
    const ada = await signUp(iam);
    const slug = uniqueSlug();
    expect((await call(iam, "POST", "/api/core/org-setup", { cookie: ada.cookie, body: { name: "A", slug } })).status).toBe(201);
    const bob = await signUp(iam);
    const r = await call(iam, "POST", "/api/core/org-setup", { cookie: bob.cookie, body: { name: "B", slug } });
    expect(r.status).toBe(409);
    expect(r.body.error.code).toBe("SLUG_TAKEN");
  });

  it("lets exactly one of concurrent setups with one slug win", async () => {
    const people = await Promise.all([1, 2, 3, 4].map(() => signUp(iam)));
    const slug = uniqueSlug("race");
    const results = await Promise.all(
      people.map((p) => call(iam, "POST", "/api/core/org-setup", { cookie: p.cookie, body: { name: "Race", slug } })),
    );
    expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409, 409]);
  });
});

describe.each(testDatabases())("org-setup rollback on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;

  beforeAll(async () => {
    database = await open();
    // the registry answers 500 to everything
    const failingRegistry = (async () => new Response("boom", { status: 500 })) as unknown as typeof fetch;
    iam = await createIam(database, { fetch: failingRegistry });
  });
  afterAll(async () => {
    await database?.close();
  });

  it("deletes the organization again when the platform registry fails, so the slug stays free", async () => {
    const ada = await signUp(iam);
    const slug = uniqueSlug("rollback");
    const r = await call(iam, "POST", "/api/core/org-setup", { cookie: ada.cookie, body: { name: "Acme", slug } });
    expect(r.status).toBe(502);
    expect(r.body.error.code).toBe("UPSTREAM_UNAVAILABLE");
    const operatorView = await call(iam, "GET", "/api/core/session", { token: ada.token });
    expect(operatorView.body.principal.orgId).toBeNull();
    const again = await call(iam, "POST", "/api/core/org-setup", { cookie: ada.cookie, body: { name: "Acme", slug } });
    expect(again.status).toBe(502);
  });

  it("answers 503 when the registry cannot be reached, and rolls back too", async () => {
    const unreachable = (async () => {
      throw new TypeError("fetch failed");
    }) as unknown as typeof fetch;
    const local = await createIam(database, { fetch: unreachable });
    const ada = await signUp(local);
    const r = await call(local, "POST", "/api/core/org-setup", { cookie: ada.cookie, body: { name: "Acme", slug: uniqueSlug() } });
    expect(r.status).toBe(503);
    const session = await call(local, "GET", "/api/core/session", { token: ada.token });
    expect(session.body.principal.orgId).toBeNull();
  });
});
