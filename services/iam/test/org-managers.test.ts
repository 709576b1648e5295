import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, iamWithOperator, joinOrg, principalOf, tenantOrg, type Iam, type Operator, type SignedUp } from "./support/harness.js";

/**
 * Issue 10 §2: no change may leave an organization without a member holding org:manage — nobody
 * could manage or repair it through the API again. Each refusal is 409 LAST_ORG_MANAGER, changes
 * nothing, and is audited.
 */
describe.each(testDatabases())("an organization keeps a member holding org:manage on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let op: Operator;

  beforeAll(async () => ({ database, iam, op } = await iamWithOperator(open)));
  afterAll(() => database?.close());

  const setRole = (as: { token: string }, orgId: string, role: string, permissions: string[]) =>
    call(iam, "POST", "/api/core/roles", { token: as.token, body: { orgId, role, permissions } });
  const deny = (as: SignedUp, orgId: string, target: SignedUp, permission = "org:manage") =>
    call(iam, "POST", "/api/core/grants", { token: as.token, body: { userId: target.userId, orgId, permission, granted: false, grantedBy: as.userId } });
  const canManage = async (person: { token: string }) => (await principalOf(iam, person)).permissions.includes("org:manage");
  const memberIdOf = async (owner: SignedUp, orgId: string, userId: string) => {
    const r = await call(iam, "GET", `/api/auth/organization/list-members?organizationId=${orgId}`, { token: owner.token });
    return (r.body.members as { id: string; userId: string }[]).find((m) => m.userId === userId)!.id;
  };
  const refusals = async (orgId: string) =>
    (await call(iam, "GET", `/api/audit/events?orgId=${orgId}&action=organization.last_manager_refused`, { token: op.token })).body.data as {
      outcome: string;
      actorId: string;
      targetType: string;
    }[];

  function expectRefused(r: { status: number; body: { error: { code: string; message: string } } }) {
    expect(r.status).toBe(409);
    expect(r.body.error.code).toBe("LAST_ORG_MANAGER");
    expect(r.body.error.message).toMatch(/org:manage/);
  }

  it("refuses mapping the sole manager's role to no permissions, keeps the mapping, and audits the refusal", async () => {
    const { orgId, owner } = await tenantOrg(iam, op);
    expectRefused(await setRole(owner, orgId, "owner", []));
    expect(await canManage(owner)).toBe(true);
    const roles = await call(iam, "GET", `/api/core/roles?orgId=${orgId}`, { token: owner.token });
    expect(roles.body.data.find((m: { role: string }) => m.role === "owner")).toMatchObject({ source: "default" });
    expect(await refusals(orgId)).toEqual([expect.objectContaining({ outcome: "failure", actorId: owner.userId, targetType: "role-mapping" })]);
    // a mapping that keeps org:manage is fine
    expect((await setRole(owner, orgId, "owner", ["org:manage"])).status).toBe(200);
  });

  it("refuses the sole manager's denial of org:manage to themselves", async () => {
    const { orgId, owner } = await tenantOrg(iam, op);
    expectRefused(await deny(owner, orgId, owner));
    expect(await canManage(owner)).toBe(true);
    const grants = await call(iam, "GET", `/api/core/grants?orgId=${orgId}`, { token: owner.token });
    expect(grants.body.data).toEqual([]);
  });

  it("allows taking org:manage from one manager while another keeps it", async () => {
    const { orgId, owner } = await tenantOrg(iam, op);
    const admin = await joinOrg(iam, orgId, owner, "admin");
    expect((await deny(owner, orgId, admin)).status).toBe(201);
    expect(await canManage(admin)).toBe(false);
    // now the owner is the last one
    expectRefused(await setRole(owner, orgId, "owner", ["platform:read"]));
  });

  it("refuses removing the grant that made the last manager one", async () => {
    const { orgId, owner } = await tenantOrg(iam, op);
    const member = await joinOrg(iam, orgId, owner, "member");
    const granted = await call(iam, "POST", "/api/core/grants", {
      token: owner.token,
      body: { userId: member.userId, orgId, permission: "org:manage", granted: true, grantedBy: owner.userId },
    });
    expect(granted.status).toBe(201);
    // the owner's role gives it up, the member's grant carries it
    expect((await setRole(owner, orgId, "owner", ["platform:read"])).status).toBe(200);
    expect(await canManage(member)).toBe(true);
    expectRefused(await call(iam, "DELETE", `/api/core/grants/${granted.body.id}`, { token: member.token }));
    expect(await canManage(member)).toBe(true);
  });

  it("refuses removing the owner's role override when the default would not restore a manager", async () => {
    const { orgId, owner } = await tenantOrg(iam, op);
    const member = await joinOrg(iam, orgId, owner, "member");
    // the member role carries org:manage by override; the owner's denial leaves the member the only manager
    expect((await setRole(owner, orgId, "member", ["org:manage", "platform:read"])).status).toBe(200);
    expect((await deny(owner, orgId, owner)).status).toBe(201);
    expectRefused(await call(iam, "DELETE", `/api/core/roles/${orgId}/member`, { token: member.token }));
  });

  it("refuses the library's removal of the last manager, and the last manager leaving", async () => {
    const { orgId, owner } = await tenantOrg(iam, op);
    const member = await joinOrg(iam, orgId, owner, "member");
    // hand org:manage to the member alone, then try to remove them
    expect((await setRole(owner, orgId, "member", ["org:manage"])).status).toBe(200);
    expect((await setRole(owner, orgId, "owner", ["members:invite"])).status).toBe(200);
    const removed = await call(iam, "POST", "/api/auth/organization/remove-member", {
      token: owner.token,
      headers: { origin: iam.origin },
      body: { memberIdOrEmail: member.email, organizationId: orgId },
    });
    expectRefused(removed);
    const left = await call(iam, "POST", "/api/auth/organization/leave", { token: member.token, headers: { origin: iam.origin }, body: { organizationId: orgId } });
    expectRefused(left);
    expect(await canManage(member)).toBe(true);
    expect((await refusals(orgId)).map((e) => e.targetType)).toEqual(["member-removed", "member-removed"]);
  });

  it("refuses the library's demotion of the sole owner-manager to member", async () => {
    const { orgId, owner } = await tenantOrg(iam, op);
    const admin = await joinOrg(iam, orgId, owner, "admin");
    // the admin loses org:manage, so the owner is the only manager
    expect((await deny(owner, orgId, admin)).status).toBe(201);
    const ownerMemberId = await memberIdOf(owner, orgId, owner.userId);
    const demoted = await call(iam, "POST", "/api/auth/organization/update-member-role", {
      token: owner.token,
      headers: { origin: iam.origin },
      body: { memberId: ownerMemberId, role: "member", organizationId: orgId },
    });
    expectRefused(demoted);
    expect((await principalOf(iam, owner)).role).toBe("owner");
  });

  it("refuses it for the operator organization too, which nobody could repair", async () => {
    expectRefused(await setRole(op, op.orgId, "owner", []));
    expect(await canManage(op)).toBe(true);
  });

  it("lets concurrent changes, each harmless alone, leave one manager, never none", async () => {
    const { orgId, owner } = await tenantOrg(iam, op);
    const admins = await Promise.all(Array.from({ length: 2 }, () => joinOrg(iam, orgId, owner, "admin")));
    const managers = [owner, ...admins];
    // each denial alone leaves two managers; all three at once would leave none
    const answers = await Promise.all(managers.map((m) => deny(owner, orgId, m)));
    const statuses = answers.map((a) => a.status).sort();
    // the one refused is refused as the last manager (409), or, when the owner's own denial landed
    // before that request's permission check, because the owner may no longer manage (403)
    expect([
      [201, 201, 409],
      [201, 201, 403],
    ]).toContainEqual(statuses);
    const refused = answers.find((a) => a.status !== 201)!;
    if (refused.status === 409) expectRefused(refused);
    else expect(refused.body.error.code).toBe("FORBIDDEN");
    const left = await Promise.all(managers.map(canManage));
    expect(left.filter(Boolean)).toHaveLength(1);
  });

  it("does not hold an organization that has no manager already to the rule: an operator can still repair it", async () => {
    const { orgId, owner } = await tenantOrg(iam, op);
    await database.db.execute(
      (await import("drizzle-orm")).sql`insert into iam.role_mappings (org_id, role, permissions, updated_at) values (${orgId}, 'owner', '[]'::jsonb, now())
        on conflict (org_id, role) do update set permissions = '[]'::jsonb`,
    );
    iam.app.ctx.forgetPrincipals();
    expect(await canManage(owner)).toBe(false);
    expect((await setRole(op, orgId, "member", [])).status).toBe(200);
    expect((await setRole(op, orgId, "owner", ["org:manage"])).status).toBe(200);
    expect(await canManage(owner)).toBe(true);
  });
});
