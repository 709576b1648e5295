import { createRoute, z } from "@hono/zod-openapi";
import { eq } from "drizzle-orm";
import type { Context } from "hono";
import { ApiError, errorResponses, jsonBody, jsonContent, security, type ServiceApp } from "@core/kit";
import { actorOf, requireSession, type SessionCaller } from "../access.js";
import type { IamContext } from "../app.js";
import { organization, session } from "../db/schema.js";
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
  const org = await createOrganization(ctx.db, ctx.clock, { name, slug, ownerId: principal.userId, orgType: "tenant" });
  let platformId: string;
  try {
    platformId = (await ctx.registry.createPlatform({ name, slug, tier: STARTING_TIER })).id;
  } catch (err) {
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
  await ctx.db.update(organization).set({ platformId }).where(eq(organization.id, org.id));
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
    metadata: { slug, platformId },
  });
  return { orgId: org.id, platformId, slug: org.slug, name: org.name };
}
