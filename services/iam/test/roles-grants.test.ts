import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import {
  call,
  createIam,
  failingFields,
  joinOrg,
  nowSeconds,
  operator,
  principalOf,
  serviceToken,
  tenantOrg,
  type Iam,
  type SignedUp,
} from "./support/harness.js";

const TENANT_OWNER = ["apikeys:manage", "audit:read", "billing:manage", "billing:read", "members:invite", "org:manage", "platform:read", "platform:write", "vault:read"];
const TENANT_ADMIN = TENANT_OWNER.filter((p) => p !== "billing:manage");
const TENANT_MEMBER = ["billing:read", "platform:read", "vault:read"];
const OPERATOR_ONLY = ["billing:operate", "orgs:create", "platforms:manage", "stacks:publish"];

describe.each(testDatabases())("roles and grants on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let op: Awaited<ReturnType<typeof operator>>;
  let service: string;
  /** teams no test changes: callers for refusals, targets of requests that must fail */
  let idle: Awaited<ReturnType<typeof team>>;
  let stranger: Awaited<ReturnType<typeof team>>;

  beforeAll(async () => {
    database = await open();
    iam = await createIam(database);
    op = await operator(iam);
    service = await serviceToken(iam);
    [idle, stranger] = [await team(), await team()];
  });
  afterAll(async () => {
    await database?.close();
  });

  /** A tenant organization with an owner and a plain member. */
  async function team() {
    const org = await tenantOrg(iam, op);
    const member = await joinOrg(iam, org.orgId, org.owner);
    return { ...org, member };
  }

  const permissionsOf = async (person: { token: string }) => (await principalOf(iam, person)).permissions;
  const setRole = (as: { token: string }, body: unknown) => call(iam, "POST", "/api/core/roles", { token: as.token, body });
  const grant = (as: { token: string }, body: unknown) => call(iam, "POST", "/api/core/grants", { token: as.token, body });
  const grantBody = (by: SignedUp, target: SignedUp, orgId: string, extra: Record<string, unknown> = {}) => ({
    userId: target.userId,
    orgId,
    permission: "members:invite",
    granted: true,
    grantedBy: by.userId,
    ...extra,
  });

  describe("GET /api/core/roles", () => {
    it("answers the default mappings of owner, admin and member in a tenant organization", async () => {
      const { orgId, owner } = await team();
      const r = await call(iam, "GET", `/api/core/roles?orgId=${orgId}`, { token: owner.token });
      expect(r.status).toBe(200);
      const sorted = r.body.data.map((m: { permissions: string[] }) => ({ ...m, permissions: [...m.permissions].sort() }));
      expect(sorted).toEqual([
        { orgId, role: "admin", permissions: TENANT_ADMIN, source: "default" },
        { orgId, role: "member", permissions: TENANT_MEMBER, source: "default" },
        { orgId, role: "owner", permissions: TENANT_OWNER, source: "default" },
      ]);
      expect(Object.keys(r.body)).toEqual(["data"]);
    });

    it("gives the operator organization's owners and admins the operator-only permissions, its members audit:read", async () => {
      const r = await call(iam, "GET", `/api/core/roles?orgId=${op.orgId}`, { token: op.token });
      const byRole = Object.fromEntries(r.body.data.map((m: { role: string; permissions: string[] }) => [m.role, m.permissions]));
      expect(byRole.owner).toEqual(expect.arrayContaining([...TENANT_OWNER, ...OPERATOR_ONLY]));
      expect(byRole.admin).toEqual(expect.arrayContaining(OPERATOR_ONLY));
      expect([...byRole.member].sort()).toEqual(["audit:read", ...TENANT_MEMBER].sort());
    });

    it("shows an organization's override in place of the default", async () => {
      const { orgId, owner } = await team();
      await setRole(owner, { orgId, role: "member", permissions: ["platform:read"] });
      const r = await call(iam, "GET", `/api/core/roles?orgId=${orgId}`, { token: owner.token });
      expect(r.body.data).toContainEqual({ orgId, role: "member", permissions: ["platform:read"], source: "custom" });
      expect(r.body.data).toHaveLength(3);
    });

    it("lets members read their own organization's mappings, operators and services any", async () => {
      const { orgId, member } = await team();
      for (const token of [member.token, op.token, service]) {
        expect((await call(iam, "GET", `/api/core/roles?orgId=${orgId}`, { token })).status).toBe(200);
      }
    });

    it("refuses a member of another organization with 403", async () => {
      const { orgId } = idle;
      const other = stranger;
      expect((await call(iam, "GET", `/api/core/roles?orgId=${orgId}`, { token: other.owner.token })).status).toBe(403);
    });

    it("refuses a request without credentials or with a wrong one with 401", async () => {
      const { orgId } = idle;
      expect((await call(iam, "GET", `/api/core/roles?orgId=${orgId}`)).status).toBe(401);
      expect((await call(iam, "GET", `/api/core/roles?orgId=${orgId}`, { token: "wrong" })).status).toBe(401);
    });

    it("answers 400 VALIDATION_ERROR naming orgId when it is missing or empty", async () => {
      for (const query of ["", "?orgId="]) {
        const r = await call(iam, "GET", `/api/core/roles${query}`, { token: op.token });
        expect(r.status).toBe(400);
        expect(failingFields(r.body)).toContain("orgId");
      }
    });

    it("answers 404 for an unknown organization", async () => {
      expect((await call(iam, "GET", "/api/core/roles?orgId=no-such-org", { token: op.token })).status).toBe(404);
    });
  });

  describe("POST /api/core/roles", () => {
    it("upserts a mapping, answering it, and the override replaces the default in the members' permissions", async () => {
      const { orgId, owner, member } = await team();
      expect(await permissionsOf(member)).toEqual(TENANT_MEMBER);
      const r = await setRole(owner, { orgId, role: "member", permissions: ["platform:write", "platform:read", "platform:read"] });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ orgId, role: "member", permissions: ["platform:read", "platform:write"], source: "custom" });
      expect(await permissionsOf(member)).toEqual(["platform:read", "platform:write"]);
      const again = await setRole(owner, { orgId, role: "member", permissions: ["billing:read"] });
      expect(again.body.permissions).toEqual(["billing:read"]);
      expect(await permissionsOf(member)).toEqual(["billing:read"]);
    });

    it("accepts an empty permissions list: the role then grants nothing", async () => {
      const { orgId, owner, member } = await team();
      const r = await setRole(owner, { orgId, role: "member", permissions: [] });
      expect(r.status).toBe(200);
      expect(r.body.permissions).toEqual([]);
      expect(await permissionsOf(member)).toEqual([]);
    });

    it("leaves other organizations' members alone", async () => {
      const { orgId, owner } = await team();
      const other = stranger;
      await setRole(owner, { orgId, role: "member", permissions: [] });
      expect(await permissionsOf(other.member)).toEqual(TENANT_MEMBER);
    });

    it("lets admins, operators and services set mappings", async () => {
      const { orgId, owner } = await team();
      const admin = await joinOrg(iam, orgId, owner, "admin");
      expect((await setRole(admin, { orgId, role: "member", permissions: [] })).status).toBe(200);
      expect((await setRole(op, { orgId, role: "member", permissions: [] })).status).toBe(200);
      expect((await setRole({ token: service }, { orgId, role: "member", permissions: [] })).status).toBe(200);
    });

    it("refuses a plain member and the owner of another organization with 403", async () => {
      const { orgId, member } = idle;
      const other = stranger;
      expect((await setRole(member, { orgId, role: "member", permissions: TENANT_OWNER })).status).toBe(403);
      expect((await setRole(other.owner, { orgId, role: "member", permissions: [] })).status).toBe(403);
      expect(await permissionsOf(member)).toEqual(TENANT_MEMBER);
    });

    it("refuses operator-only permissions in a tenant organization with 403, and allows them for operators", async () => {
      const { orgId, owner } = idle;
      for (const permission of OPERATOR_ONLY) {
        const r = await setRole(owner, { orgId, role: "admin", permissions: ["platform:read", permission] });
        expect(r.status).toBe(403);
      }
      expect((await setRole(op, { orgId, role: "admin", permissions: ["orgs:create"] })).status).toBe(403);
      expect((await setRole(op, { orgId: op.orgId, role: "auditor", permissions: ["audit:read", "platforms:manage"] })).status).toBe(200);
    });

    it("refuses a request without credentials or with a wrong one with 401", async () => {
      const { orgId } = idle;
      expect((await call(iam, "POST", "/api/core/roles", { body: { orgId, role: "member", permissions: [] } })).status).toBe(401);
      expect((await setRole({ token: "wrong" }, { orgId, role: "member", permissions: [] })).status).toBe(401);
    });

    it.each([
      ["orgId missing", { orgId: undefined }, "orgId"],
      ["orgId empty", { orgId: "" }, "orgId"],
      ["role missing", { role: undefined }, "role"],
      ["role empty", { role: "" }, "role"],
      ["permissions missing", { permissions: undefined }, "permissions"],
      ["permissions not an array", { permissions: "platform:read" }, "permissions"],
      ["a permission that is not a string", { permissions: [7] }, "permissions.0"],
      ["a permission without resource:action", { permissions: ["platform:read", "everything"] }, "permissions.1"],
    ])("answers 400 VALIDATION_ERROR for %s", async (_label, change, field) => {
      const r = await setRole(op, { orgId: op.orgId, role: "member", permissions: [], ...change });
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("VALIDATION_ERROR");
      expect(failingFields(r.body)).toContain(field);
    });

    it("accepts a one-character role", async () => {
      const { orgId, owner } = await team();
      expect((await setRole(owner, { orgId, role: "x", permissions: ["platform:read"] })).status).toBe(200);
    });

    it("answers 404 for an unknown organization", async () => {
      expect((await setRole(op, { orgId: "no-such-org", role: "member", permissions: [] })).status).toBe(404);
    });
  });

  describe("DELETE /api/core/roles/{orgId}/{role}", () => {
    it("answers 400 VALIDATION_ERROR naming role for a role over 64 characters, and orgId over 128", async () => {
      const role = await call(iam, "DELETE", `/api/core/roles/${idle.orgId}/${"r".repeat(65)}`, { token: op.token });
      expect(role.status).toBe(400);
      expect(failingFields(role.body)).toContain("role");
      const org = await call(iam, "DELETE", `/api/core/roles/${"o".repeat(129)}/member`, { token: op.token });
      expect(org.status).toBe(400);
      expect(failingFields(org.body)).toContain("orgId");
    });

    it("removes the override, answering { orgId, role }; the default applies again", async () => {
      const { orgId, owner, member } = await team();
      await setRole(owner, { orgId, role: "member", permissions: [] });
      expect(await permissionsOf(member)).toEqual([]);
      const r = await call(iam, "DELETE", `/api/core/roles/${orgId}/member`, { token: owner.token });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ orgId, role: "member" });
      expect(await permissionsOf(member)).toEqual(TENANT_MEMBER);
    });

    it("answers 404 for a role without an override, and for one removed already", async () => {
      const { orgId, owner } = await team();
      expect((await call(iam, "DELETE", `/api/core/roles/${orgId}/member`, { token: owner.token })).status).toBe(404);
      await setRole(owner, { orgId, role: "member", permissions: [] });
      expect((await call(iam, "DELETE", `/api/core/roles/${orgId}/member`, { token: owner.token })).status).toBe(200);
      expect((await call(iam, "DELETE", `/api/core/roles/${orgId}/member`, { token: owner.token })).status).toBe(404);
    });

    it("refuses a plain member and the owner of another organization with 403, keeping the override", async () => {
      const { orgId, owner, member } = await team();
      const other = stranger;
      await setRole(owner, { orgId, role: "member", permissions: ["platform:read"] });
      expect((await call(iam, "DELETE", `/api/core/roles/${orgId}/member`, { token: member.token })).status).toBe(403);
      expect((await call(iam, "DELETE", `/api/core/roles/${orgId}/member`, { token: other.owner.token })).status).toBe(403);
      expect(await permissionsOf(member)).toEqual(["platform:read"]);
    });

    it("refuses a request without credentials or with a wrong one with 401", async () => {
      const { orgId } = idle;
      expect((await call(iam, "DELETE", `/api/core/roles/${orgId}/member`)).status).toBe(401);
      expect((await call(iam, "DELETE", `/api/core/roles/${orgId}/member`, { token: "wrong" })).status).toBe(401);
    });
  });

  describe("POST /api/core/grants", () => {
    it("creates a grant, answering it whole, and the grant adds to the member's permissions", async () => {
      const { orgId, owner, member } = await team();
      const r = await grant(owner, grantBody(owner, member, orgId));
      expect(r.status).toBe(201);
      expect(Object.keys(r.body).sort()).toEqual(["active", "createdAt", "expiresAt", "granted", "grantedBy", "id", "orgId", "permission", "userId"]);
      expect(r.body).toEqual({
        id: expect.any(String),
        userId: member.userId,
        orgId,
        permission: "members:invite",
        granted: true,
        grantedBy: owner.userId,
        expiresAt: null,
        createdAt: nowSeconds(iam),
        active: true,
      });
      expect(await permissionsOf(member)).toEqual([...TENANT_MEMBER, "members:invite"].sort());
    });

    it("takes a permission away with a denial, even one the role gives", async () => {
      const { orgId, owner, member } = await team();
      const r = await grant(owner, grantBody(owner, member, orgId, { permission: "billing:read", granted: false }));
      expect(r.status).toBe(201);
      expect(r.body.granted).toBe(false);
      expect(await permissionsOf(member)).toEqual(["platform:read", "vault:read"]);
    });

    it("lets a denial win over a grant of the same permission, whichever came first", async () => {
      const { orgId, owner, member } = await team();
      await grant(owner, grantBody(owner, member, orgId, { permission: "members:invite", granted: false }));
      await grant(owner, grantBody(owner, member, orgId, { permission: "members:invite", granted: true }));
      expect(await permissionsOf(member)).not.toContain("members:invite");
      await grant(owner, grantBody(owner, member, orgId, { permission: "apikeys:manage", granted: true }));
      await grant(owner, grantBody(owner, member, orgId, { permission: "apikeys:manage", granted: false }));
      expect(await permissionsOf(member)).not.toContain("apikeys:manage");
    });

    it("adds a grant on top of an empty role override", async () => {
      const { orgId, owner, member } = await team();
      await setRole(owner, { orgId, role: "member", permissions: [] });
      await grant(owner, grantBody(owner, member, orgId, { permission: "platform:read" }));
      expect(await permissionsOf(member)).toEqual(["platform:read"]);
    });

    it("ignores an expired grant and an expired denial, and counts unexpired ones", async () => {
      const { orgId, owner, member } = await team();
      const now = nowSeconds(iam);
      const past = await grant(owner, grantBody(owner, member, orgId, { permission: "members:invite", expiresAt: now - 1 }));
      expect(past.status).toBe(201);
      expect(past.body.active).toBe(false);
      // expiring exactly now is expired already
      await grant(owner, grantBody(owner, member, orgId, { permission: "apikeys:manage", expiresAt: now }));
      await grant(owner, grantBody(owner, member, orgId, { permission: "billing:read", granted: false, expiresAt: now - 60 }));
      const future = await grant(owner, grantBody(owner, member, orgId, { permission: "audit:read", expiresAt: now + 1 }));
      expect(future.body.active).toBe(true);
      await grant(owner, grantBody(owner, member, orgId, { permission: "platform:read", granted: false, expiresAt: now + 3600 }));
      expect(await permissionsOf(member)).toEqual(["audit:read", "billing:read", "vault:read"]);
    });

    it("stops counting a grant once the clock passes its expiry", async () => {
      const { orgId, owner, member } = await team();
      await grant(owner, grantBody(owner, member, orgId, { permission: "members:invite", expiresAt: nowSeconds(iam) + 30 }));
      // a second IAM on the same database, 30 seconds later
      const later = await createIam(database);
      later.clock.set(new Date((nowSeconds(iam) + 30) * 1000));
      expect(await permissionsOf(member)).toContain("members:invite");
      const r = await call(later, "GET", "/api/core/session", { token: member.token });
      expect(r.body.principal.permissions).not.toContain("members:invite");
    });

    it("lets operators and services grant in any organization", async () => {
      const { orgId, member } = await team();
      expect((await grant(op, grantBody(op, member, orgId, { permission: "apikeys:manage" }))).status).toBe(201);
      expect((await grant({ token: service }, { ...grantBody(op, member, orgId), grantedBy: "billing-service" })).status).toBe(201);
      expect(await permissionsOf(member)).toEqual(expect.arrayContaining(["apikeys:manage", "members:invite"]));
    });

    it("refuses a plain member and the owner of another organization with 403", async () => {
      const { orgId, member } = idle;
      const other = stranger;
      expect((await grant(member, grantBody(member, member, orgId, { permission: "org:manage" }))).status).toBe(403);
      expect((await grant(other.owner, grantBody(other.owner, member, orgId))).status).toBe(403);
      expect(await permissionsOf(member)).toEqual(TENANT_MEMBER);
    });

    it("refuses a grantedBy other than the caller with 403", async () => {
      const { orgId, owner, member } = idle;
      const r = await grant(owner, grantBody(member, member, orgId));
      expect(r.status).toBe(403);
    });

    it("refuses to grant an operator-only permission in a tenant organization with 403, even by an operator", async () => {
      const { orgId, owner, member } = idle;
      for (const permission of OPERATOR_ONLY) {
        expect((await grant(owner, grantBody(owner, member, orgId, { permission }))).status).toBe(403);
      }
      expect((await grant(op, grantBody(op, member, orgId, { permission: "platforms:manage" }))).status).toBe(403);
      expect(await permissionsOf(member)).toEqual(TENANT_MEMBER);
    });

    it("answers 404 for a user who is not a member, and for an unknown organization", async () => {
      const { orgId, owner } = idle;
      const outsider = stranger.member;
      expect((await grant(owner, grantBody(owner, outsider, orgId))).status).toBe(404);
      expect((await grant(op, grantBody(op, outsider, "no-such-org"))).status).toBe(404);
    });

    it("refuses a request without credentials or with a wrong one with 401", async () => {
      const { orgId, owner, member } = idle;
      expect((await call(iam, "POST", "/api/core/grants", { body: grantBody(owner, member, orgId) })).status).toBe(401);
      expect((await grant({ token: "wrong" }, grantBody(owner, member, orgId))).status).toBe(401);
    });

    it.each([
      ["expiresAt 0", { expiresAt: 0 }, "expiresAt"],
      ["expiresAt -1", { expiresAt: -1 }, "expiresAt"],
      ["expiresAt 100000000000", { expiresAt: 100_000_000_000 }, "expiresAt"],
      ["expiresAt not an integer", { expiresAt: 1_900_000_000.5 }, "expiresAt"],
      ["expiresAt a string", { expiresAt: "1900000000" }, "expiresAt"],
      ["userId empty", { userId: "" }, "userId"],
      ["orgId missing", { orgId: undefined }, "orgId"],
      ["permission empty", { permission: "" }, "permission"],
      ["permission not resource:action", { permission: "everything" }, "permission"],
      ["permission of 65 characters", { permission: `a:${"b".repeat(63)}` }, "permission"],
      ["granted missing", { granted: undefined }, "granted"],
      ["granted not a boolean", { granted: "yes" }, "granted"],
      ["grantedBy empty", { grantedBy: "" }, "grantedBy"],
    ])("answers 400 VALIDATION_ERROR for %s", async (_label, change, field) => {
      const { orgId, owner, member } = idle;
      const r = await grant(owner, { ...grantBody(owner, member, orgId), ...change });
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("VALIDATION_ERROR");
      expect(failingFields(r.body)).toContain(field);
    });

    it("accepts a permission of 64 characters, just inside the limit, and a made-up one of the right shape", async () => {
      const { orgId, owner, member } = await team();
      const longest = `a:${"b".repeat(62)}`;
      expect((await grant(owner, grantBody(owner, member, orgId, { permission: longest }))).status).toBe(201);
      expect(await permissionsOf(member)).toContain(longest);
    });

    it("accepts expiresAt just inside the limits: 1 and 99999999999", async () => {
      const { orgId, owner, member } = await team();
      const first = await grant(owner, grantBody(owner, member, orgId, { expiresAt: 1 }));
      expect(first.status).toBe(201);
      expect(first.body).toMatchObject({ expiresAt: 1, active: false });
      const last = await grant(owner, grantBody(owner, member, orgId, { permission: "apikeys:manage", expiresAt: 99_999_999_999 }));
      expect(last.status).toBe(201);
      expect(last.body).toMatchObject({ expiresAt: 99_999_999_999, active: true });
      expect(await permissionsOf(member)).toEqual([...TENANT_MEMBER, "apikeys:manage"].sort());
    });
  });

  describe("GET /api/core/grants", () => {
    it("lists the organization's grants and denials, optionally of one user", async () => {
      const { orgId, owner, member } = await team();
      const admin = await joinOrg(iam, orgId, owner, "admin");
      const a = (await grant(owner, grantBody(owner, member, orgId))).body;
      const b = (await grant(owner, grantBody(owner, admin, orgId, { permission: "billing:manage", granted: false, expiresAt: 99_999_999_999 }))).body;
      const all = await call(iam, "GET", `/api/core/grants?orgId=${orgId}`, { token: owner.token });
      expect(all.status).toBe(200);
      expect(all.body.data.map((g: { id: string }) => g.id).sort()).toEqual([a.id, b.id].sort());
      expect(all.body.data).toContainEqual(b);
      const one = await call(iam, "GET", `/api/core/grants?orgId=${orgId}&userId=${member.userId}`, { token: owner.token });
      expect(one.body.data).toEqual([a]);
    });

    it("does not show another organization's grants", async () => {
      const { orgId, owner, member } = await team();
      const other = stranger;
      await grant(other.owner, grantBody(other.owner, other.member, other.orgId));
      await grant(owner, grantBody(owner, member, orgId));
      const r = await call(iam, "GET", `/api/core/grants?orgId=${orgId}`, { token: owner.token });
      expect(r.body.data.every((g: { orgId: string }) => g.orgId === orgId)).toBe(true);
      expect(r.body.data).toHaveLength(1);
    });

    it("lets operators and services list any organization's grants", async () => {
      const { orgId } = await team();
      expect((await call(iam, "GET", `/api/core/grants?orgId=${orgId}`, { token: op.token })).status).toBe(200);
      expect((await call(iam, "GET", `/api/core/grants?orgId=${orgId}`, { token: service })).status).toBe(200);
    });

    it("refuses a plain member and the owner of another organization with 403", async () => {
      const { orgId, member } = idle;
      const other = stranger;
      expect((await call(iam, "GET", `/api/core/grants?orgId=${orgId}`, { token: member.token })).status).toBe(403);
      expect((await call(iam, "GET", `/api/core/grants?orgId=${orgId}`, { token: other.owner.token })).status).toBe(403);
    });

    it("refuses a request without credentials or with a wrong one with 401", async () => {
      const { orgId } = idle;
      expect((await call(iam, "GET", `/api/core/grants?orgId=${orgId}`)).status).toBe(401);
      expect((await call(iam, "GET", `/api/core/grants?orgId=${orgId}`, { token: "wrong" })).status).toBe(401);
    });

    it("answers 400 VALIDATION_ERROR naming orgId when it is missing or empty, and userId when empty", async () => {
      expect(failingFields((await call(iam, "GET", "/api/core/grants", { token: op.token })).body)).toContain("orgId");
      expect(failingFields((await call(iam, "GET", "/api/core/grants?orgId=", { token: op.token })).body)).toContain("orgId");
      expect(failingFields((await call(iam, "GET", `/api/core/grants?orgId=${op.orgId}&userId=`, { token: op.token })).body)).toContain("userId");
    });
  });

  describe("DELETE /api/core/grants/{id}", () => {
    it("answers 400 VALIDATION_ERROR naming id for an id over 128 characters", async () => {
      const r = await call(iam, "DELETE", `/api/core/grants/${"g".repeat(129)}`, { token: op.token });
      expect(r.status).toBe(400);
      expect(failingFields(r.body)).toContain("id");
    });

    it("removes a grant, answering { id }; the permission goes with it", async () => {
      const { orgId, owner, member } = await team();
      const g = (await grant(owner, grantBody(owner, member, orgId))).body;
      expect(await permissionsOf(member)).toContain("members:invite");
      const r = await call(iam, "DELETE", `/api/core/grants/${g.id}`, { token: owner.token });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ id: g.id });
      expect(await permissionsOf(member)).toEqual(TENANT_MEMBER);
    });

    it("removes a denial; the role's permission comes back", async () => {
      const { orgId, owner, member } = await team();
      const d = (await grant(owner, grantBody(owner, member, orgId, { permission: "platform:read", granted: false }))).body;
      expect(await permissionsOf(member)).toEqual(["billing:read", "vault:read"]);
      expect((await call(iam, "DELETE", `/api/core/grants/${d.id}`, { token: owner.token })).status).toBe(200);
      expect(await permissionsOf(member)).toEqual(TENANT_MEMBER);
    });

    it("answers 404 for an unknown grant and for one removed already", async () => {
      const { orgId, owner, member } = await team();
      expect((await call(iam, "DELETE", "/api/core/grants/no-such-grant", { token: owner.token })).status).toBe(404);
      const g = (await grant(owner, grantBody(owner, member, orgId))).body;
      expect((await call(iam, "DELETE", `/api/core/grants/${g.id}`, { token: owner.token })).status).toBe(200);
      expect((await call(iam, "DELETE", `/api/core/grants/${g.id}`, { token: owner.token })).status).toBe(404);
    });

    it("refuses a plain member with 403 and answers the owner of another organization as for no grant (404), keeping the grant", async () => {
      const { orgId, owner, member } = await team();
      const other = stranger;
      const d = (await grant(owner, grantBody(owner, member, orgId, { permission: "platform:read", granted: false }))).body;
      expect((await call(iam, "DELETE", `/api/core/grants/${d.id}`, { token: member.token })).status).toBe(403);
      expect((await call(iam, "DELETE", `/api/core/grants/${d.id}`, { token: other.owner.token })).status).toBe(404);
      expect(await permissionsOf(member)).toEqual(["billing:read", "vault:read"]);
    });

    it("refuses a request without credentials or with a wrong one with 401", async () => {
      const { orgId, owner, member } = await team();
      const g = (await grant(owner, grantBody(owner, member, orgId))).body;
      expect((await call(iam, "DELETE", `/api/core/grants/${g.id}`)).status).toBe(401);
      expect((await call(iam, "DELETE", `/api/core/grants/${g.id}`, { token: "wrong" })).status).toBe(401);
    });
  });
});
