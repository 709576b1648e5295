import { and, eq, or, sql } from "drizzle-orm";
import { ApiError, unixSeconds, type Clock } from "@core/kit";
import { isUniqueViolation, withHeldLock, type Db } from "@core/storage";
import type { AuditInput, AuditLog } from "./audit.js";
import { grants, member, organization, roleMappings, user } from "./db/schema.js";
import { effectivePermissions, rolesOf, type GrantLike, type OrgType } from "./permissions.js";

/** The permission an organization can never be left without (issue 10: nobody could repair it). */
export const MANAGE = "org:manage";

/** The user behind an organization's member, named by member id, or also by email where the library takes either (remove-member); null if none. */
export async function memberUserOf(db: Db, orgId: string, memberId: string, options: { orEmail: boolean }): Promise<string | null> {
  const named = options.orEmail ? or(eq(member.id, memberId), eq(user.email, memberId.toLowerCase())) : eq(member.id, memberId);
  const [found] = await db
    .select({ userId: member.userId })
    .from(member)
    .innerJoin(user, eq(user.id, member.userId))
    .where(and(eq(member.organizationId, orgId), named));
  return found?.userId ?? null;
}

/** A change that may take org:manage away from members, as the manager rule sees it. */
export type ManagerChange =
  | { kind: "role-mapping"; role: string; permissions: string[] | null }
  | { kind: "grant"; userId: string; permission: string; granted: boolean; expiresAt: number | null }
  | { kind: "grant-removed"; grantId: string }
  | { kind: "member-removed"; userId: string }
  | { kind: "member-roles"; userId: string; roles: string[] };

interface OrgPermissions {
  orgType: OrgType;
  members: { userId: string; roles: string[] }[];
  overrides: Map<string, string[]>;
  grants: (GrantLike & { id: string; userId: string })[];
}

async function load(db: Db, orgId: string): Promise<OrgPermissions | null> {
  const [org] = await db.select({ orgType: organization.orgType }).from(organization).where(eq(organization.id, orgId));
  if (!org) return null;
  // one after another: inside a transaction they share one connection, which runs one query at a
  // time (node-postgres queues the rest and warns that it will stop doing so)
  const members = await db.select({ userId: member.userId, role: member.role }).from(member).where(eq(member.organizationId, orgId));
  const overrides = await db.select({ role: roleMappings.role, permissions: roleMappings.permissions }).from(roleMappings).where(eq(roleMappings.orgId, orgId));
  const orgGrants = await db
    .select({ id: grants.id, userId: grants.userId, permission: grants.permission, granted: grants.granted, expiresAt: grants.expiresAt })
    .from(grants)
    .where(eq(grants.orgId, orgId));
  return {
    orgType: org.orgType,
    members: members.map((m) => ({ userId: m.userId, roles: rolesOf(m.role) })),
    overrides: new Map(overrides.map((o) => [o.role, o.permissions])),
    grants: orgGrants,
  };
}

/** The organization as it would be after the change (nothing is written). */
function applied(org: OrgPermissions, change: ManagerChange): OrgPermissions {
  switch (change.kind) {
    case "role-mapping": {
      const overrides = new Map(org.overrides);
      if (change.permissions === null) overrides.delete(change.role);
      else overrides.set(change.role, change.permissions);
      return { ...org, overrides };
    }
    case "grant":
      return { ...org, grants: [...org.grants, { id: "(new)", ...change }] };
    case "grant-removed":
      return { ...org, grants: org.grants.filter((g) => g.id !== change.grantId) };
    case "member-removed":
      return { ...org, members: org.members.filter((m) => m.userId !== change.userId) };
    case "member-roles":
      return { ...org, members: org.members.map((m) => (m.userId === change.userId ? { ...m, roles: change.roles } : m)) };
  }
}

function managers(org: OrgPermissions, nowSeconds: number): number {
  return org.members.filter((m) =>
    effectivePermissions({
      orgType: org.orgType,
      roles: m.roles,
      overrides: org.overrides,
      grants: org.grants.filter((g) => g.userId === m.userId),
      nowSeconds,
    }).includes(MANAGE),
  ).length;
}

export interface ManagerRule {
  db: Db;
  clock: Clock;
  audit: AuditLog;
}

type Actor = Pick<AuditInput, "actorType" | "actorId" | "ip" | "userAgent" | "requestId">;

/** 409 LAST_ORG_MANAGER: the change would leave the organization without anyone holding org:manage. */
class LastManagerRefused extends ApiError {
  constructor(
    readonly orgId: string,
    readonly change: ManagerChange,
  ) {
    super(
      409,
      "LAST_ORG_MANAGER",
      `Refused: afterwards no member of this organization would hold ${MANAGE}, and nobody could manage it again. ` +
        `Give ${MANAGE} to another member first.`,
      { orgId, change: change.kind },
    );
  }
}

/**
 * Throws LastManagerRefused when the change would leave an organization that has a member holding
 * org:manage with none. An organization that has none already (an operator can repair it) is not
 * held to it.
 */
async function refuseLosingTheLastManager(db: Db, clock: Clock, orgId: string, change: ManagerChange): Promise<void> {
  const org = await load(db, orgId);
  if (!org) return;
  const now = unixSeconds(clock.now());
  if (managers(org, now) > 0 && managers(applied(org, change), now) === 0) throw new LastManagerRefused(orgId, change);
}

async function auditRefusal(rule: ManagerRule, err: unknown, actor: Actor): Promise<void> {
  if (!(err instanceof LastManagerRefused)) return;
  const { change } = err;
  await rule.audit.record({
    action: "organization.last_manager_refused",
    outcome: "failure",
    ...actor,
    orgId: err.orgId,
    targetType: change.kind,
    targetId: "userId" in change ? change.userId : "role" in change ? change.role : change.grantId,
    metadata: { change },
  });
}

/**
 * Runs `work` holding the organization's manager lock: one change that may take org:manage away
 * at a time per organization, on every replica. Held across the auth library's own write of a
 * member change, which no transaction of ours can span (`withHeldLock`).
 */
export const withManagerLock = <T>(rule: Pick<ManagerRule, "db">, orgId: string, work: () => Promise<T>): Promise<T> => withHeldLock(rule.db, `core:org-managers:${orgId}`, work);

/**
 * Writes a change of our own routes (roles, grants) in one transaction with the rule's check, under
 * the organization's manager lock (and its row locked), so two changes can never each leave one
 * manager. A refusal is audited.
 */
export async function changeKeepingAManager<T>(rule: ManagerRule, orgId: string, change: ManagerChange, actor: Actor, write: (tx: Db) => Promise<T>): Promise<T> {
  try {
    return await withManagerLock(rule, orgId, () =>
      rule.db.transaction(async (tx) => {
        await tx.execute(sql`select id from iam.organization where id = ${orgId} for update`);
        await refuseLosingTheLastManager(tx as unknown as Db, rule.clock, orgId, change);
        return write(tx as unknown as Db);
      }),
    );
  } catch (err) {
    // audited after the rollback: the audit log writes through its own connection
    await auditRefusal(rule, err, actor);
    throw err;
  }
}

/**
 * The check alone, for a change the auth library writes itself (member removal, role change,
 * leaving): it runs just before the library's own write, outside any transaction of ours; the
 * caller holds the manager lock around both (`withManagerLock`).
 */
export async function checkKeepsAManager(rule: ManagerRule, orgId: string, change: ManagerChange, actor: Actor): Promise<void> {
  try {
    await refuseLosingTheLastManager(rule.db, rule.clock, orgId, change);
  } catch (err) {
    await auditRefusal(rule, err, actor);
    throw err;
  }
}

/** A second membership of one person in one organization, refused by its index (`member_organization_user_unique`). */
export const isSecondMembership = (err: unknown): boolean => isUniqueViolation(err, "member_organization_user_unique");
