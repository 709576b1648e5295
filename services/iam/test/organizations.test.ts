import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, createIam, failingFields, joinOrg, operator, principalOf, signUp, tenantOrg, uniqueSlug, type Iam, iamWithOperator, type Operator } from "./support/harness.js";

const ORGANIZATION_KEYS = ["createdAt", "id", "name", "orgType", "platformId", "slug"];

describe.each(testDatabases())("organizations on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let op: Operator;
  let service: string;
  beforeAll(async () => ({ database, iam, op, service } = await iamWithOperator(open)));
  afterAll(() => database?.close());

  const create = (body: unknown, as: { token?: string; headers?: Record<string, string> } = { token: op.token }) =>
    call(iam, "POST", "/api/core/organizations", { ...as, body });

  describe("POST /api/core/organizations", () => {
    it("creates a tenant organization by default, with ownerId as its owner", async () => {
      const ada = await signUp(iam);
      const slug = uniqueSlug("acme");
      const r = await create({ name: "Acme", slug, ownerId: ada.userId });
      expect(r.status).toBe(201);
      expect(Object.keys(r.body).sort()).toEqual(ORGANIZATION_KEYS);
      expect(r.body).toEqual({
        id: expect.any(String),
        name: "Acme",
        slug,
        orgType: "tenant",
        platformId: null,
        createdAt: Math.floor(iam.clock.now().getTime() / 1000),
      });
      expect(await principalOf(iam, ada)).toMatchObject({ orgId: r.body.id, orgType: "tenant", role: "owner" });
    });

    it("lets the new owner act in the organization at once, even with a principal cached before", async () => {
      const ada = await signUp(iam);
      expect((await principalOf(iam, ada)).orgId).toBeNull();
      const r = await create({ name: "Acme", slug: uniqueSlug(), ownerId: ada.userId });
      expect((await principalOf(iam, ada)).orgId).toBe(r.body.id);
    });

    it("creates an organization of type core-operator when asked", async () => {
      const ada = await signUp(iam);
      const r = await create({ name: "Second operators", slug: uniqueSlug("ops"), ownerId: ada.userId, orgType: "core-operator" });
      expect(r.status).toBe(201);
      expect(r.body.orgType).toBe("core-operator");
    });

    it("lets a service create an organization", async () => {
      const ada = await signUp(iam);
      const r = await create({ name: "By service", slug: uniqueSlug(), ownerId: ada.userId }, { token: service });
      expect(r.status).toBe(201);
    });

    it("refuses a request without credentials (401) and with a wrong one (401)", async () => {
      const ada = await signUp(iam);
      const body = { name: "Acme", slug: uniqueSlug(), ownerId: ada.userId };
      expect((await create(body, {})).status).toBe(401);
      expect((await create(body, { token: "not-a-session" })).status).toBe(401);
    });

    it("refuses a tenant owner and a plain member with 403: creating organizations is for operators", async () => {
      const { orgId, owner } = await tenantOrg(iam, op);
      const member = await joinOrg(iam, orgId, owner);
      for (const who of [owner, member]) {
        const r = await create({ name: "Mine", slug: uniqueSlug(), ownerId: who.userId }, { token: who.token });
        expect(r.status).toBe(403);
        expect(r.body.error.code).toBe("FORBIDDEN");
      }
    });

    it("refuses a plain member of the operator organization with 403 (no orgs:create)", async () => {
      const opMember = await joinOrg(iam, op.orgId, op, "member");
      const r = await create({ name: "Nope", slug: uniqueSlug(), ownerId: opMember.userId }, { token: opMember.token });
      expect(r.status).toBe(403);
    });

    it("answers 404 for an owner that does not exist", async () => {
      const r = await create({ name: "Acme", slug: uniqueSlug(), ownerId: "no-such-user" });
      expect(r.status).toBe(404);
      expect(r.body.error.code).toBe("NOT_FOUND");
    });

    it("answers 409 SLUG_TAKEN for a slug in use", async () => {
      const ada = await signUp(iam);
      const slug = uniqueSlug();
      expect((await create({ name: "A", slug, ownerId: ada.userId })).status).toBe(201);
      const r = await create({ name: "B", slug, ownerId: ada.userId });
      expect(r.status).toBe(409);
      expect(r.body.error.code).toBe("SLUG_TAKEN");
    });

    it.each([
      ["name empty", { name: "" }, "name"],
      ["name of 101 characters", { name: "n".repeat(101) }, "name"],
      ["slug empty", { slug: "" }, "slug"],
      ["slug of 64 characters", { slug: "s".repeat(64) }, "slug"],
      ["slug with capitals", { slug: "Acme" }, "slug"],
      ["slug with a space", { slug: "ac me" }, "slug"],
      ["ownerId empty", { ownerId: "" }, "ownerId"],
      ["ownerId missing", { ownerId: undefined }, "ownerId"],
      ["orgType unknown", { orgType: "partner" }, "orgType"],
    ])("answers 400 VALIDATION_ERROR for %s", async (_label, change, field) => {
      const body = { name: "Acme", slug: uniqueSlug(), ownerId: op.userId, ...change };
      const r = await create(body);
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("VALIDATION_ERROR");
      expect(failingFields(r.body)).toContain(field);
    });

    it("accepts the limits just inside: 1 and 100 character names, 1 and 63 character slugs", async () => {
      const ada = await signUp(iam);
      const longSlug = `${uniqueSlug("x")}-`.padEnd(63, "a");
      expect((await create({ name: "n".repeat(100), slug: longSlug, ownerId: ada.userId })).status).toBe(201);
      // other tests use long generated slugs, so "z" is free in this database
      expect((await create({ name: "n", slug: "z", ownerId: ada.userId })).status).toBe(201);
    });
  });

  describe("GET /api/core/organizations/{slug}", () => {
    it("answers the organization to its members", async () => {
      const { orgId, slug, owner } = await tenantOrg(iam, op);
      const member = await joinOrg(iam, orgId, owner);
      const r = await call(iam, "GET", `/api/core/organizations/${slug}`, { token: member.token });
      expect(r.status).toBe(200);
      expect(Object.keys(r.body).sort()).toEqual(ORGANIZATION_KEYS);
      expect(r.body).toMatchObject({ id: orgId, slug, orgType: "tenant", platformId: null });
    });

    it("answers any organization to operators and services", async () => {
      const { orgId, slug } = await tenantOrg(iam, op);
      expect((await call(iam, "GET", `/api/core/organizations/${slug}`, { token: op.token })).body.id).toBe(orgId);
      expect((await call(iam, "GET", `/api/core/organizations/${slug}`, { token: service })).body.id).toBe(orgId);
    });

    it("refuses a member of another organization with 403", async () => {
      const { slug } = await tenantOrg(iam, op);
      const other = await tenantOrg(iam, op);
      const r = await call(iam, "GET", `/api/core/organizations/${slug}`, { token: other.owner.token });
      expect(r.status).toBe(403);
    });

    it("refuses a request without credentials or with a wrong one with 401", async () => {
      const { slug } = await tenantOrg(iam, op);
      expect((await call(iam, "GET", `/api/core/organizations/${slug}`)).status).toBe(401);
      expect((await call(iam, "GET", `/api/core/organizations/${slug}`, { token: "wrong" })).status).toBe(401);
    });

    it("answers 404 for an unknown slug", async () => {
      const r = await call(iam, "GET", `/api/core/organizations/${uniqueSlug("ghost")}`, { token: op.token });
      expect(r.status).toBe(404);
    });

    it("answers 400 VALIDATION_ERROR naming slug for a slug outside the pattern or over 63 characters", async () => {
      for (const slug of ["Acme", "s".repeat(64)]) {
        const r = await call(iam, "GET", `/api/core/organizations/${slug}`, { token: op.token });
        expect(r.status).toBe(400);
        expect(failingFields(r.body)).toContain("slug");
      }
    });
  });
});

describe.each(testDatabases())("bootstrap on $name", ({ open }) => {
  const BOOTSTRAP_TOKEN = "bootstrap-token-for-tests";
  let database: DatabaseHandle;
  let guarded: Iam;
  let open_: Iam;

  beforeAll(async () => {
    database = await open();
    // two IAMs on one database: one guarded by CORE_BOOTSTRAP_TOKEN, one without it
    guarded = await createIam(database, { config: { bootstrapToken: BOOTSTRAP_TOKEN } });
    open_ = await createIam(database);
  });
  afterAll(async () => {
    await database?.close();
  });

  const bootstrap = (iam: Iam, person: { token: string }, token?: string) =>
    call(iam, "POST", "/api/core/bootstrap", { token: person.token, headers: token === undefined ? {} : { "x-bootstrap-token": token } });

  // the tests of this block run in order: the first successful bootstrap closes the door for good

  it("refuses a bootstrap without a session with 401", async () => {
    expect((await call(guarded, "POST", "/api/core/bootstrap", { headers: { "x-bootstrap-token": BOOTSTRAP_TOKEN } })).status).toBe(401);
    expect((await call(open_, "POST", "/api/core/bootstrap")).status).toBe(401);
  });

  it("refuses a bootstrap without x-bootstrap-token or with a wrong one with 403 when CORE_BOOTSTRAP_TOKEN is set", async () => {
    const ada = await signUp(guarded);
    for (const token of [undefined, "", "wrong", `${BOOTSTRAP_TOKEN}x`]) {
      const r = await bootstrap(guarded, ada, token);
      expect(r.status).toBe(403);
      expect(r.body.error.code).toBe("FORBIDDEN");
    }
    expect((await principalOf(guarded, ada)).orgType).toBeNull();
  });

  it("lets exactly one of concurrent bootstraps win, with the winner as the operators' owner", async () => {
    const people = await Promise.all([1, 2, 3, 4].map(() => signUp(guarded)));
    const results = await Promise.all(people.map((p) => bootstrap(guarded, p, BOOTSTRAP_TOKEN)));
    expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409, 409]);
    const winner = results.findIndex((r) => r.status === 201);
    const won = results[winner]!;
    expect(Object.keys(won.body).sort()).toEqual(["name", "orgId", "slug"]);
    expect(won.body).toEqual({ orgId: expect.any(String), slug: "core-operator", name: expect.any(String) });
    expect(await principalOf(guarded, people[winner]!)).toMatchObject({ orgId: won.body.orgId, orgType: "core-operator", role: "owner" });
    for (const loser of results.filter((r) => r.status === 409)) expect(loser.body.error.code).toBe("ALREADY_BOOTSTRAPPED");
  });

  it("answers 409 to every later bootstrap, guarded or not", async () => {
    const ada = await signUp(open_);
    const r = await bootstrap(open_, ada);
    expect(r.status).toBe(409);
    expect(r.body.error.code).toBe("ALREADY_BOOTSTRAPPED");
    expect((await bootstrap(guarded, ada, BOOTSTRAP_TOKEN)).status).toBe(409);
    expect((await principalOf(open_, ada)).orgId).toBeNull();
  });
});
