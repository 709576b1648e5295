import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "drizzle-orm";
import { rowsOf, testDatabases, type DatabaseHandle } from "@core/storage";
import { finishInterruptedSetups, interruptedSetupsBacklog } from "../src/org-setup-recovery.js";
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

/**
 * A platform registry whose behaviour the test sets: it answers, refuses, makes the platform and
 * then fails (its answer lost), or cannot be reached at all.
 */
function scriptedRegistry() {
  const platforms = new Map<string, { id: string; name: string; slug: string; status: "active"; tier: string }>();
  const registry = {
    mode: "ok" as "ok" | "refuse" | "fail-after-create" | "down",
    platforms,
    fetch: (async (input: string | URL, init?: RequestInit) => {
      if (registry.mode === "down") throw new TypeError("fetch failed");
      const url = new URL(String(input));
      if (init?.method === "GET" && url.pathname === "/platforms") {
        if (registry.mode === "fail-after-create") return new Response("boom", { status: 500 });
        const found = platforms.get(url.searchParams.get("slug") ?? "");
        return Response.json({ data: found ? [found] : [], cursor: null });
      }
      if (registry.mode === "refuse") return Response.json({ error: { code: "VALIDATION_ERROR", message: "no" } }, { status: 400 });
      const body = JSON.parse(String(init?.body)) as { name: string; slug: string; tier: string };
      if (platforms.has(body.slug)) return Response.json({ error: { code: "SLUG_TAKEN", message: "taken" } }, { status: 409 });
      const platform = { id: `plt_${body.slug}`, name: body.name, slug: body.slug, status: "active" as const, tier: body.tier };
      platforms.set(body.slug, platform);
      return registry.mode === "fail-after-create" ? new Response("boom", { status: 500 }) : Response.json(platform, { status: 201 });
    }) as unknown as typeof fetch,
  };
  return registry;
}

describe.each(testDatabases())("org-setup interrupted on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  const registry = scriptedRegistry();
  const openSetups = async (slug: string) =>
    rowsOf(await database.db.execute(sql`select s.org_id from iam.org_setups s join iam.organization o on o.id = s.org_id where o.slug = ${slug}`)).length;
  const orgOf = async (slug: string) =>
    rowsOf<{ id: string; platform_id: string | null }>(await database.db.execute(sql`select id, platform_id from iam.organization where slug = ${slug}`))[0];
  const sweep = () => finishInterruptedSetups(iam.app.ctx, iam.config.orgSetupRecoveryMs);
  /** the sweep's backlog as /metrics shows it (core_worker_due_items{job="org_setup_recovery"}) */
  const backlog = () => interruptedSetupsBacklog(database.db, iam.clock.now(), iam.config.orgSetupRecoveryMs);

  beforeAll(async () => {
    database = await open();
    iam = await createIam(database, { fetch: registry.fetch });
  });
  afterAll(async () => {
    await database?.close();
  });

  it("deletes the organization again when the registry refuses the platform, so the slug stays free", async () => {
    registry.mode = "refuse";
    const ada = await signUp(iam);
    const slug = uniqueSlug("refused");
    const r = await call(iam, "POST", "/api/core/org-setup", { cookie: ada.cookie, body: { name: "Acme", slug } });
    expect(r.status).toBe(502);
    expect(r.body.error.code).toBe("UPSTREAM_UNAVAILABLE");
    expect(await orgOf(slug)).toBeUndefined();
    const operatorView = await call(iam, "GET", "/api/core/session", { token: ada.token });
    expect(operatorView.body.principal.orgId).toBeNull();
    registry.mode = "ok";
    expect((await call(iam, "POST", "/api/core/org-setup", { cookie: ada.cookie, body: { name: "Acme", slug } })).status).toBe(201);
  });

  it("links the platform the registry made when its answer was a failure", async () => {
    registry.mode = "ok";
    const ada = await signUp(iam);
    const slug = uniqueSlug("lost-answer");
    // the registry made the platform and then failed, but answers the lookup
    const failOnce = registry.fetch;
    let created = false;
    const local = await createIam(database, {
      fetch: (async (input: string | URL, init?: RequestInit) => {
        if (init?.method === "POST" && !created) {
          created = true;
          await failOnce(input, init);
          return new Response("boom", { status: 500 });
        }
        return failOnce(input, init);
      }) as unknown as typeof fetch,
    });
    const r = await call(local, "POST", "/api/core/org-setup", { cookie: ada.cookie, body: { name: "Acme", slug } });
    expect(r.status).toBe(201);
    expect(r.body.platformId).toBe(`plt_${slug}`);
    expect(await orgOf(slug)).toMatchObject({ platform_id: `plt_${slug}` });
    expect(await openSetups(slug)).toBe(0);
  });

  it("keeps a set-up the registry cannot account for open: a retry by its owner resumes it, another's is refused", async () => {
    registry.mode = "down";
    const ada = await signUp(iam);
    const slug = uniqueSlug("resumed");
    const r = await call(iam, "POST", "/api/core/org-setup", { cookie: ada.cookie, body: { name: "Acme", slug } });
    expect(r.status).toBe(503);
    expect(r.body.error.code).toBe("UPSTREAM_UNAVAILABLE");
    expect(await openSetups(slug)).toBe(1);
    const session = await call(iam, "GET", "/api/core/session", { token: ada.token });
    expect(session.body.principal.orgId).toBeNull();
    // someone else cannot take the slug meanwhile
    registry.mode = "ok";
    const bob = await signUp(iam);
    expect((await call(iam, "POST", "/api/core/org-setup", { cookie: bob.cookie, body: { name: "Other", slug } })).status).toBe(409);
    // its owner's retry finishes it, in the same organization
    const { id } = (await orgOf(slug))!;
    const again = await call(iam, "POST", "/api/core/org-setup", { cookie: ada.cookie, body: { name: "Acme", slug } });
    expect(again.status).toBe(201);
    expect(again.body.orgId).toBe(id);
    expect(await openSetups(slug)).toBe(0);
  });

  it("resumes a set-up whose platform an earlier attempt made (the registry says the slug is taken)", async () => {
    registry.mode = "fail-after-create";
    const ada = await signUp(iam);
    const slug = uniqueSlug("made-earlier");
    expect((await call(iam, "POST", "/api/core/org-setup", { cookie: ada.cookie, body: { name: "Acme", slug } })).status).toBe(502);
    expect(registry.platforms.has(slug)).toBe(true);
    expect(await openSetups(slug)).toBe(1);
    registry.mode = "ok";
    const again = await call(iam, "POST", "/api/core/org-setup", { cookie: ada.cookie, body: { name: "Acme", slug } });
    expect(again.status).toBe(201);
    expect(again.body.platformId).toBe(`plt_${slug}`);
  });

  it("finishes set-ups left open once they are older than the recovery time: linked when the platform exists, else rolled back", async () => {
    registry.mode = "down";
    const [ada, bob] = [await signUp(iam), await signUp(iam)];
    const [linked, rolledBack] = [uniqueSlug("swept-linked"), uniqueSlug("swept-gone")];
    expect((await call(iam, "POST", "/api/core/org-setup", { cookie: ada.cookie, body: { name: "Linked", slug: linked } })).status).toBe(503);
    expect((await call(iam, "POST", "/api/core/org-setup", { cookie: bob.cookie, body: { name: "Gone", slug: rolledBack } })).status).toBe(503);
    // the registry had made one of them before the answer was lost
    registry.platforms.set(linked, { id: `plt_${linked}`, name: "Linked", slug: linked, status: "active", tier: "free" });
    registry.mode = "ok";
    // too recent: a set-up may still be running
    expect(await sweep()).toBe(0);
    expect(await backlog()).toEqual({ job: "org_setup_recovery", due: 0, oldestDueSeconds: 0 });
    iam.clock.advance(iam.config.orgSetupRecoveryMs + 1);
    expect((await backlog()).due).toBeGreaterThanOrEqual(2);
    iam.clock.advance(60_000);
    expect((await backlog()).oldestDueSeconds).toBeGreaterThanOrEqual(60);
    // the registry unreachable: nothing is decided, the next pass tries again
    registry.mode = "down";
    await expect(sweep()).rejects.toThrow();
    expect(await openSetups(linked)).toBe(1);
    registry.mode = "ok";
    expect(await sweep()).toBeGreaterThanOrEqual(2);
    expect((await backlog()).due).toBe(0);
    expect(await orgOf(linked)).toMatchObject({ platform_id: `plt_${linked}` });
    expect(await orgOf(rolledBack)).toBeUndefined();
    expect(await openSetups(linked)).toBe(0);
    // the rolled-back slug is free again; the audit trail says what the sweeper did
    expect((await call(iam, "POST", "/api/core/org-setup", { cookie: bob.cookie, body: { name: "Gone", slug: rolledBack } })).status).toBe(201);
    const audit = rowsOf<{ outcome: string }>(await database.db.execute(sql`select outcome, metadata from iam.audit_events where action = 'organization.setup' and actor_type = 'system' and metadata->>'slug' in (${linked}, ${rolledBack})`));
    expect(audit.map((row) => row.outcome).sort()).toEqual(["failure", "success"]);
  });
});
