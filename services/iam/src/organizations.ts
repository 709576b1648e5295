import { eq, sql } from "drizzle-orm";
import { randomBytes } from "node:crypto";
import { conflict, notFound, unixSeconds, type Clock } from "@core/kit";
import { isUniqueViolation, type Db } from "@core/storage";
import { member, organization, orgSetups, user } from "./db/schema.js";
import { effectiveRole, rolesOf, type OrgType } from "./permissions.js";

/** better-auth's id shape (32 alphanumerics), so library and our rows look alike */
export function authStyleId(): string {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  return [...randomBytes(32)].map((b) => alphabet[b % alphabet.length]).join("");
}

export type OrganizationRow = typeof organization.$inferSelect;

export const slugTaken = (slug: string) => conflict("SLUG_TAKEN", `The slug "${slug}" is already taken`);

/**
 * Creates an organization with its first owner in one transaction. The slug's unique index decides
 * races: of two concurrent creations with one slug exactly one wins, the other gets 409.
 */
export async function createOrganization(
  db: Db,
  clock: Clock,
  input: { name: string; slug: string; ownerId: string; orgType: OrgType; /** org-setup's: its platform is still to come */ settingUp?: boolean },
): Promise<OrganizationRow> {
  const now = clock.now();
  try {
    return await db.transaction(async (tx) => {
      const [owner] = await tx.select({ id: user.id }).from(user).where(eq(user.id, input.ownerId));
      if (!owner) throw notFound(`No user ${input.ownerId}`);
      const [org] = await tx
        .insert(organization)
        .values({ id: authStyleId(), name: input.name, slug: input.slug, orgType: input.orgType, createdAt: now })
        .returning();
      await tx.insert(member).values({ id: authStyleId(), organizationId: org!.id, userId: input.ownerId, role: "owner", createdAt: now });
      if (input.settingUp) await tx.insert(orgSetups).values({ orgId: org!.id, startedAt: now });
      return org!;
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw slugTaken(input.slug);
    throw err;
  }
}

/** Removes an organization and everything hanging off it (members, invitations, roles, grants). */
export async function deleteOrganization(db: Db, orgId: string): Promise<void> {
  await db.delete(organization).where(eq(organization.id, orgId));
}

export async function findOrganizationBySlug(db: Db, slug: string): Promise<OrganizationRow> {
  const [org] = await db.select().from(organization).where(eq(organization.slug, slug));
  if (!org) throw notFound(`No organization with slug "${slug}"`);
  return org;
}

export async function findOrganization(db: Db, id: string): Promise<OrganizationRow> {
  const [org] = await db.select().from(organization).where(eq(organization.id, id));
  if (!org) throw notFound(`No organization ${id}`);
  return org;
}

export const organizationJson = (org: OrganizationRow) => ({
  id: org.id,
  name: org.name,
  slug: org.slug,
  orgType: org.orgType,
  platformId: org.platformId,
  createdAt: unixSeconds(org.createdAt),
});

/** One organization a person belongs to, with their role in it. */
export interface Membership {
  orgId: string;
  name: string;
  slug: string;
  orgType: OrgType;
  platformId: string | null;
  role: string | null;
  joinedAt: Date;
}

/**
 * Every organization the user belongs to: the operator organization first, then in the order they
 * joined (the order a session without a choice falls back on, DESIGN §4).
 */
export async function membershipsOf(db: Db, userId: string): Promise<Membership[]> {
  const rows = await db
    .select({ orgId: organization.id, name: organization.name, slug: organization.slug, orgType: organization.orgType, platformId: organization.platformId, role: member.role, joinedAt: member.createdAt })
    .from(member)
    .innerJoin(organization, eq(organization.id, member.organizationId))
    .where(eq(member.userId, userId))
    .orderBy(sql`${organization.orgType} = 'core-operator' desc`, member.createdAt, organization.slug);
  return rows.map((r) => ({ ...r, orgType: r.orgType as OrgType, role: effectiveRole(rolesOf(r.role)) }));
}
