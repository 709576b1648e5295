import { createRoute, z } from "@hono/zod-openapi";
import { and, eq } from "drizzle-orm";
import { ApiError, errorResponses, forbidden, jsonContent, jsonBody, security, unixSeconds, type ServiceApp } from "@core/kit";
import { createHash, timingSafeEqual } from "node:crypto";
import { actorOf, requireCaller, requirePermission, requireSession } from "../access.js";
import type { IamContext } from "../app.js";
import { organization, session } from "../db/schema.js";
import { createOrganization, findOrganizationBySlug, membershipsOf, organizationJson } from "../organizations.js";
import { Id, OrgName, OrgSlug } from "./schemas.js";

const CreateOrganizationInput = z
  .object({
    name: OrgName,
    slug: OrgSlug,
    ownerId: Id,
    orgType: z.enum(["core-operator", "tenant"]).default("tenant"),
  })
  .openapi("CreateOrganizationInput");

const OrganizationSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    slug: z.string(),
    orgType: z.enum(["core-operator", "tenant"]),
    platformId: z.string().nullable(),
    createdAt: z.number().int().openapi({ description: "Unix seconds" }),
  })
  .openapi("Organization");

const MembershipSchema = z
  .object({
    orgId: z.string(),
    name: z.string(),
    slug: z.string(),
    orgType: z.enum(["core-operator", "tenant"]),
    platformId: z.string().nullable(),
    role: z.string().nullable(),
    active: z.boolean().openapi({ description: "the organization this credential acts in" }),
    joinedAt: z.number().int().openapi({ description: "Unix seconds" }),
  })
  .openapi("Membership");

export const OPERATOR_ORG = { name: "Core operators", slug: "core-operator" } as const;

const sameSecret = (a: string, b: string) =>
  timingSafeEqual(createHash("sha256").update(a).digest(), createHash("sha256").update(b).digest());

/** Organizations: create (operators, services), lookup by slug, bootstrap (spec §4.3, DESIGN §4). */
export function organizationRoutes(app: ServiceApp, ctx: IamContext) {
  app.openapi(
    createRoute({
      method: "post",
      path: "/api/core/organizations",
      summary: "Create an organization with ownerId as its owner (operators with orgs:create, services)",
      security: security.anyCredential,
      request: { body: jsonBody(CreateOrganizationInput) },
      responses: { 201: jsonContent(OrganizationSchema, "The created organization"), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const caller = await requireCaller(c, ctx.credentials, ctx.session);
      requirePermission(caller, "orgs:create");
      const input = c.req.valid("json");
      const org = await createOrganization(ctx.db, ctx.clock, input);
      // the owner's cached principal predates the membership
      ctx.forgetPrincipals();
      await ctx.audit.record({
        action: "organization.create",
        outcome: "success",
        ...actorOf(c, caller),
        orgId: org.id,
        targetType: "organization",
        targetId: org.id,
        metadata: { slug: org.slug, orgType: org.orgType, ownerId: input.ownerId },
      });
      return c.json(organizationJson(org), 201);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/api/core/organizations/{slug}",
      summary: "Look an organization up by slug (its members, operators, services)",
      security: security.anyCredential,
      request: { params: z.object({ slug: OrgSlug.openapi({ param: { name: "slug", in: "path" } }) }) },
      responses: { 200: jsonContent(OrganizationSchema, "The organization"), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const caller = await requireCaller(c, ctx.credentials, ctx.session);
      const org = await findOrganizationBySlug(ctx.db, c.req.valid("param").slug);
      if (caller.kind === "principal" && caller.principal.orgType !== "core-operator" && caller.principal.orgId !== org.id) {
        throw forbidden("You are not a member of this organization");
      }
      return c.json(organizationJson(org), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/api/core/memberships",
      summary: "The caller's organizations with their role in each, and which one the credential acts in",
      description:
        "A session acts in the organization chosen with POST /api/auth/organization/set-active (the account page and `core org switch` use it), " +
        "else in the operator organization, else in the oldest membership. An API key acts in the organization it was made in.",
      security: security.anyCredential,
      responses: { 200: jsonContent(z.object({ data: z.array(MembershipSchema) }).openapi("MembershipList"), "Every membership"), ...errorResponses(401, 403) },
    }),
    async (c) => {
      const caller = await requireCaller(c, ctx.credentials, ctx.session);
      if (caller.kind === "service") throw forbidden("Services belong to no organization: this route lists a person's memberships");
      const { principal } = caller;
      const memberships = await membershipsOf(ctx.db, principal.userId);
      return c.json({ data: memberships.map((m) => ({ ...m, active: m.orgId === principal.orgId, joinedAt: unixSeconds(m.joinedAt) })) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/api/core/bootstrap",
      summary: "Create the core-operator organization with the signed-in caller as owner; once (409 afterwards)",
      description: "When CORE_BOOTSTRAP_TOKEN is set the request must also carry it in x-bootstrap-token.",
      security: security.session,
      responses: {
        201: jsonContent(z.object({ orgId: z.string(), slug: z.string(), name: z.string() }), "The operator organization"),
        ...errorResponses(401, 403, 409),
      },
    }),
    async (c) => {
      const { principal, token } = await requireSession(c, ctx.session);
      const actor = actorOf(c, { kind: "principal", principal });
      const expected = ctx.config.bootstrapToken;
      if (expected && !sameSecret(c.req.header("x-bootstrap-token") ?? "", expected)) {
        await ctx.audit.record({ action: "organization.bootstrap", outcome: "failure", ...actor, metadata: { reason: "bad bootstrap token" } });
        throw forbidden("Bootstrap needs the x-bootstrap-token header with CORE_BOOTSTRAP_TOKEN");
      }
      const [existing] = await ctx.db.select({ id: organization.id }).from(organization).where(eq(organization.orgType, "core-operator")).limit(1);
      if (existing) throw new ApiError(409, "ALREADY_BOOTSTRAPPED", "The operator organization exists already");
      const org = await createOrganization(ctx.db, ctx.clock, { ...OPERATOR_ORG, ownerId: principal.userId, orgType: "core-operator" }).catch((err) => {
        if (err instanceof ApiError && err.code === "SLUG_TAKEN") throw new ApiError(409, "ALREADY_BOOTSTRAPPED", "The operator organization exists already");
        throw err;
      });
      // the bootstrapping session acts as an operator right away
      await ctx.db.update(session).set({ activeOrganizationId: org.id }).where(and(eq(session.token, token)));
      ctx.forgetPrincipals();
      await ctx.audit.record({ action: "organization.bootstrap", outcome: "success", ...actor, orgId: org.id, targetType: "organization", targetId: org.id });
      return c.json({ orgId: org.id, slug: org.slug, name: org.name }, 201);
    },
  );
}
