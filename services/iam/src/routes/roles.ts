import { createRoute, z } from "@hono/zod-openapi";
import { and, eq } from "drizzle-orm";
import { errorResponses, forbidden, jsonBody, jsonContent, notFound, security, type ServiceApp } from "@core/kit";
import { actorOf, requireCaller, requirePermission } from "../access.js";
import type { IamContext } from "../app.js";
import { roleMappings } from "../db/schema.js";
import { changeKeepingAManager } from "../org-managers.js";
import { findOrganization } from "../organizations.js";
import { defaultPermissions, isOperatorOnly, ORG_ROLES } from "../permissions.js";
import { Id, pathParam, Permission } from "./schemas.js";

const RoleMappingSchema = z
  .object({
    orgId: z.string(),
    role: z.string(),
    permissions: z.array(z.string()),
    source: z.enum(["default", "custom"]).openapi({ description: "custom once the organization overrides the default" }),
  })
  .openapi("RoleMapping");

const RoleMappingInput = z
  .object({ orgId: Id, role: z.string().min(1).max(64), permissions: z.array(Permission).max(64) })
  .openapi("RoleMappingInput");

/** Role → permission mappings of an organization (spec §2.6, §4.3; DESIGN §4). */
export function roleRoutes(app: ServiceApp, ctx: IamContext) {
  app.openapi(
    createRoute({
      method: "get",
      path: "/api/core/roles",
      summary: "The organization's role mappings: its overrides, and the defaults of the roles it did not override",
      security: security.anyCredential,
      request: { query: z.object({ orgId: Id.openapi({ param: { name: "orgId", in: "query" } }) }) },
      responses: { 200: jsonContent(z.object({ data: z.array(RoleMappingSchema) }), "Role mappings"), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const { orgId } = c.req.valid("query");
      const caller = await requireCaller(c, ctx.credentials, ctx.session);
      if (caller.kind === "principal" && caller.principal.orgType !== "core-operator" && caller.principal.orgId !== orgId) {
        throw forbidden("You are not a member of this organization");
      }
      const org = await findOrganization(ctx.db, orgId);
      const custom = await ctx.db.select().from(roleMappings).where(eq(roleMappings.orgId, orgId));
      const data = [
        ...ORG_ROLES.filter((r) => !custom.some((m) => m.role === r)).map((role) => ({
          orgId,
          role,
          permissions: defaultPermissions(org.orgType, role).sort(),
          source: "default" as const,
        })),
        ...custom.map((m) => ({ orgId, role: m.role, permissions: m.permissions, source: "custom" as const })),
      ].sort((a, b) => a.role.localeCompare(b.role));
      return c.json({ data }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/api/core/roles",
      summary: "Set the permissions of a role in an organization (replaces the default); an empty list is allowed",
      security: security.anyCredential,
      request: { body: jsonBody(RoleMappingInput) },
      responses: { 200: jsonContent(RoleMappingSchema, "The mapping now in force"), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const input = c.req.valid("json");
      const caller = await requireCaller(c, ctx.credentials, ctx.session);
      requirePermission(caller, "org:manage", { orgId: input.orgId });
      const org = await findOrganization(ctx.db, input.orgId);
      const permissions = [...new Set(input.permissions)].sort();
      const forbiddenHere = permissions.filter(isOperatorOnly);
      if (org.orgType !== "core-operator" && forbiddenHere.length > 0) {
        throw forbidden(`Only the operator organization can hold ${forbiddenHere.join(", ")}`);
      }
      const updatedBy = caller.kind === "service" ? caller.serviceId : caller.principal.userId;
      await changeKeepingAManager(ctx, input.orgId, { kind: "role-mapping", role: input.role, permissions }, actorOf(c, caller), (tx) =>
        tx
          .insert(roleMappings)
          .values({ orgId: input.orgId, role: input.role, permissions, updatedAt: ctx.clock.now(), updatedBy })
          .onConflictDoUpdate({ target: [roleMappings.orgId, roleMappings.role], set: { permissions, updatedAt: ctx.clock.now(), updatedBy } }),
      );
      ctx.forgetPrincipals();
      await ctx.audit.record({
        action: "role.upsert",
        outcome: "success",
        ...actorOf(c, caller),
        orgId: input.orgId,
        targetType: "role",
        targetId: input.role,
        metadata: { permissions },
      });
      return c.json({ orgId: input.orgId, role: input.role, permissions, source: "custom" as const }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "delete",
      path: "/api/core/roles/{orgId}/{role}",
      summary: "Remove an organization's override of a role; the default applies again",
      security: security.anyCredential,
      request: { params: z.object({ orgId: pathParam("orgId"), role: z.string().min(1).max(64).openapi({ param: { name: "role", in: "path" } }) }) },
      responses: { 200: jsonContent(z.object({ orgId: z.string(), role: z.string() }), "The removed mapping"), ...errorResponses(401, 403, 404, 409) },
    }),
    async (c) => {
      const { orgId, role } = c.req.valid("param");
      const caller = await requireCaller(c, ctx.credentials, ctx.session);
      requirePermission(caller, "org:manage", { orgId });
      const deleted = await changeKeepingAManager(ctx, orgId, { kind: "role-mapping", role, permissions: null }, actorOf(c, caller), (tx) =>
        tx
          .delete(roleMappings)
          .where(and(eq(roleMappings.orgId, orgId), eq(roleMappings.role, role)))
          .returning({ role: roleMappings.role }),
      );
      if (deleted.length === 0) throw notFound(`No custom mapping for role "${role}" in this organization`);
      ctx.forgetPrincipals();
      await ctx.audit.record({ action: "role.delete", outcome: "success", ...actorOf(c, caller), orgId, targetType: "role", targetId: role });
      return c.json({ orgId, role }, 200);
    },
  );
}
