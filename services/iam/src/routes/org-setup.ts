import { createRoute, z } from "@hono/zod-openapi";
import { and, eq } from "drizzle-orm";
import type { Context } from "hono";
import type { Db } from "@core/storage";
import { ApiError, errorResponses, jsonBody, jsonContent, security, traceOf, type ServiceApp } from "@core/kit";
import { actorOf, requireSession, type SessionCaller } from "../access.js";
import type { IamContext } from "../app.js";
import { member, organization, orgSetups, session } from "../db/schema.js";
import { createOrganization, deleteOrganization, slugTaken } from "../organizations.js";
import { OPERATOR_ORG } from "./organizations.js";
import { OrgName, OrgSlug } from "./schemas.js";

export const OrgSetupInput = z.object({ name: OrgName, slug: OrgSlug }).openapi("OrgSetupInput");
export type OrgSetup = z.infer<typeof OrgSetupInput>;
const OrgSetupResult = z
  .object({ orgId: z.string(), platformId: z.string(), slug: z.string(), name: z.string() })
  .openapi("OrgSetupResult");

/** Slugs no tenant may take. */
const RESERVED_SLUGS = new Set<string>([OPERATOR_ORG.slug, "core", "admin", "api", "www"]);

/** The plan a new platform starts on (DESIGN §6). */
const STARTING_TIER = "free";

/**
 * `POST /api/core/org-setup` (spec §4.3, §5.2, §7.2): the organization with the caller as owner,
 * then its platform through the platform registry's HTTP API; when that fails the organization
 * is deleted again, so nothing half-made remains.
 */
export function orgSetupRoutes(app: ServiceApp, ctx: IamContext) {
  app.openapi(
    createRoute({
      method: "post",
      path: "/api/core/org-setup",
      summary: "Set up an organization and its platform together (session cookie only)",
      security: security.cookie,
      request: { body: jsonBody(OrgSetupInput) },
      responses: {
        201: jsonContent(OrgSetupResult, "The organization and its platform"),
        ...errorResponses(400, 401, 403, 409, 502, 503),
      },
    }),
    async (c) => {
      const caller = await requireSession(c, { ...ctx.session, cookieOnly: true });
      return c.json(await setUpOrganization(c, ctx, caller, c.req.valid("json")), 201);
    },
  );
}

/**
 * The organization with the caller as owner, then its platform; the JSON route and the onboarding
 * page share it. Throws 409 SLUG_TAKEN, or the registry's failure after rolling back.
 */
export async function setUpOrganization(c: Context, ctx: IamContext, caller: SessionCaller, { name, slug }: OrgSetup) {
  const { principal, token } = caller;
  const actor = actorOf(c, { kind: "principal", principal });
  if (RESERVED_SLUGS.has(slug)) throw slugTaken(slug);
  // a set-up of the caller's that stopped half-way (no answer, a lost registry answer) resumes: a retry is always safe
  const resumed = await pendingSetupOf(ctx.db, slug, principal.userId);
  const org = resumed ?? (await createOrganization(ctx.db, ctx.clock, { name, slug, ownerId: principal.userId, orgType: "tenant", settingUp: true }));
  let platformId: string;
  try {
    platformId = (await ctx.registry.createPlatform({ name, slug, tier: STARTING_TIER }, traceOf(c))).id;
  } catch (err) {
    // no answer, a failure after which the registry may have made it, or (resuming) the platform an
    // earlier attempt made: the platform may exist all the same
    const mayExist = isAmbiguous(err) || (resumed !== null && err instanceof ApiError && err.status === 409);
    const made = mayExist ? await ctx.registry.findPlatformBySlug(slug, traceOf(c)).catch(() => undefined) : null;
    // the registry cannot tell: the set-up stays open, for a retry or the sweeper (org-setup-recovery.ts)
    if (made === undefined) throw err;
    if (made === null) {
      await deleteOrganization(ctx.db, org.id);
      await ctx.audit.record({
        action: "organization.setup",
        outcome: "failure",
        ...actor,
        targetType: "organization",
        targetId: org.id,
        metadata: { slug, reason: err instanceof ApiError ? err.code : "error", rolledBack: true },
      });
      if (err instanceof ApiError && err.status === 409) throw slugTaken(slug);
      throw err;
    }
    platformId = made.id;
  }
  await linkPlatform(ctx.db, org.id, platformId);
  // the session that set the organization up continues inside it
  await ctx.db.update(session).set({ activeOrganizationId: org.id }).where(eq(session.token, token));
  ctx.forgetPrincipals();
  await ctx.audit.record({
    action: "organization.setup",
    outcome: "success",
    ...actor,
    orgId: org.id,
    targetType: "organization",
    targetId: org.id,
    metadata: { slug, platformId, ...(resumed ? { resumed: true } : {}) },
  });
  return { orgId: org.id, platformId, slug: org.slug, name: org.name };
}

/** A registry failure after which the platform may exist: no answer, or the registry's own failure (not a refusal). */
const isAmbiguous = (err: unknown) => !(err instanceof ApiError) || err.status >= 500;

/** The caller's own organization with this slug whose set-up is still open, or null. */
async function pendingSetupOf(db: Db, slug: string, userId: string) {
  const [row] = await db
    .select({ org: organization })
    .from(orgSetups)
    .innerJoin(organization, eq(organization.id, orgSetups.orgId))
    .innerJoin(member, and(eq(member.organizationId, organization.id), eq(member.userId, userId), eq(member.role, "owner")))
    .where(eq(organization.slug, slug));
  return row?.org ?? null;
}

/** Links the organization to its platform and ends its set-up, in one transaction. */
export async function linkPlatform(db: Db, orgId: string, platformId: string): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.update(organization).set({ platformId }).where(eq(organization.id, orgId));
    await tx.delete(orgSetups).where(eq(orgSetups.orgId, orgId));
  });
}
