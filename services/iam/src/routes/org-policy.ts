import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { and, eq } from "drizzle-orm";
import { ApiError, errorResponses, forbidden, jsonBody, jsonContent, notFound, security, type ServiceApp } from "@core/kit";
import type { Principal } from "@core/service-auth";
import { actorOf, requireCaller } from "../access.js";
import type { IamContext } from "../app.js";
import { member, organization, session, user } from "../db/schema.js";
import { policyOf, setPolicy, unmetPolicy, type OrgPolicy } from "../org-policy.js";
import { gateOrganizationRoute } from "../policy-gate.js";
import { rolesOf } from "../permissions.js";
import { pathParam } from "./schemas.js";

const PolicySchema = z
  .object({
    requireTwoFactor: z.boolean().openapi({ description: "every member's session must have given a second factor (TOTP or backup code), or be a passkey's" }),
    requireSso: z.boolean().openapi({ description: "every member's session must come from one of the organization's SSO providers" }),
  })
  .strict()
  .openapi("OrganizationPolicy");

const OrgParams = z.object({ orgId: pathParam("orgId") });

/**
 * Organization policy (issue 28, ADR 0023): read by its members, set by its owners in person
 * (a session, not an API key: a key is excepted from the policy, so it must not be what turns it off).
 */
export function orgPolicyRoutes(app: ServiceApp, ctx: IamContext) {
  app.openapi(
    createRoute({
      method: "get",
      path: "/api/core/organizations/{orgId}/policy",
      summary: "What the organization requires of its members' sessions (members)",
      security: security.anyCredential,
      request: { params: OrgParams },
      responses: { 200: jsonContent(PolicySchema, "The policy"), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const { orgId } = c.req.valid("param");
      const caller = await requireCaller(c, ctx.credentials, ctx.session);
      if (caller.kind === "service") {
        const [org] = await ctx.db.select({ id: organization.id }).from(organization).where(eq(organization.id, orgId));
        if (!org) throw notFound("No such organization");
      } else {
        // held back by this organization's policy: refused as acting there would be (policy-gate.ts)
        await gateOrganizationRoute(c, ctx, caller, orgId);
        // a stranger is told the same whether or not the organization exists
        if ((await rolesIn(ctx, orgId, caller.principal.userId)) === null) throw forbidden(ONLY_MEMBERS);
      }
      return c.json(await policyOf(ctx.db, orgId), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "put",
      path: "/api/core/organizations/{orgId}/policy",
      summary: "Set what the organization requires of its members' sessions (owners, signed in); takes effect at once",
      security: security.session,
      request: { params: OrgParams, body: jsonBody(PolicySchema) },
      responses: { 200: jsonContent(PolicySchema, "The policy now in force"), ...errorResponses(400, 401, 403, 409) },
    }),
    async (c) => {
      const { orgId } = c.req.valid("param");
      const policy = c.req.valid("json");
      const caller = await requireCaller(c, ctx.credentials, ctx.session);
      if (caller.kind !== "principal" || caller.principal.sessionId === null) throw forbidden("An owner sets the policy from a signed-in session, not with a key or as a service");
      await updatePolicy(c, ctx, caller.principal, orgId, policy);
      return c.json(policy, 200);
    },
  );
}

/**
 * Sets an organization's policy for one of its owners (the route and the page): audited either way,
 * and every cached principal dropped, so it holds on IAM at once and elsewhere within seconds.
 */
export async function updatePolicy(c: Context, ctx: IamContext, principal: Principal, orgId: string, policy: OrgPolicy): Promise<void> {
  const audit = { action: "policy.update" as const, ...actorOf(c, { kind: "principal", principal }), orgId, targetType: "organization", targetId: orgId };
  const roles = await rolesIn(ctx, orgId, principal.userId);
  if (roles === null) {
    await ctx.audit.record({ ...audit, outcome: "failure", metadata: { reason: "not a member", ...policy } });
    throw forbidden(ONLY_MEMBERS);
  }
  // an owner held back by this policy (acting in another organization) cannot turn it off (policy-gate.ts)
  await gateOrganizationRoute(c, ctx, { kind: "principal", principal }, orgId).catch(async (err: unknown) => {
    await ctx.audit.record({ ...audit, outcome: "failure", metadata: { reason: "held back by the policy", ...policy } });
    throw err;
  });
  if (!roles.includes("owner")) {
    await ctx.audit.record({ ...audit, outcome: "failure", metadata: { reason: "not an owner", ...policy } });
    throw forbidden("Only the organization's owners set its policy");
  }
  await refuseSelfLockout(ctx, principal, orgId, policy);
  const before = await policyOf(ctx.db, orgId);
  await setPolicy(ctx.db, orgId, policy, principal.userId, ctx.clock.now());
  ctx.forgetPrincipals();
  await ctx.audit.record({ ...audit, outcome: "success", metadata: { before, after: policy } });
}

const ONLY_MEMBERS = "Only the organization's members see or set its policy";

/** The caller's roles in `orgId`, null when they are no member of it (or it does not exist). */
async function rolesIn(ctx: IamContext, orgId: string, userId: string): Promise<string[] | null> {
  const [row] = await ctx.db.select({ role: member.role }).from(member).where(and(eq(member.organizationId, orgId), eq(member.userId, userId)));
  return row ? rolesOf(row.role) : null;
}

/**
 * An owner cannot require what their own session does not meet: they would be held back at once,
 * and, for SSO, could lock every owner out before a provider works. 409 says what to do first.
 */
async function refuseSelfLockout(ctx: IamContext, principal: Principal, orgId: string, policy: OrgPolicy) {
  const [row] = await ctx.db
    .select({ signInMethod: session.signInMethod, ssoProviderId: session.ssoProviderId, twoFactorEnabled: user.twoFactorEnabled })
    .from(session)
    .innerJoin(user, eq(user.id, session.userId))
    .where(eq(session.id, principal.sessionId!));
  if (!row) return;
  const unmet = await unmetPolicy(ctx.db, policy, orgId, { ...row, twoFactorEnabled: row.twoFactorEnabled === true });
  if (unmet === "TWO_FACTOR_REQUIRED") throw new ApiError(409, "CONFLICT", "Turn on two-factor authentication and sign in with a code before requiring it of everyone", { policy: unmet });
  if (unmet === "SSO_REQUIRED") throw new ApiError(409, "CONFLICT", "Sign in through one of the organization's SSO providers before requiring it of everyone", { policy: unmet });
}
