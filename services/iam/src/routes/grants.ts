import { createRoute, z } from "@hono/zod-openapi";
import { and, asc, eq } from "drizzle-orm";
import { errorResponses, forbidden, jsonBody, jsonContent, newId, notFound, security, unixSeconds, type ServiceApp } from "@core/kit";
import { isOperator, type Caller } from "@core/service-auth";
import { actorOf, requireCaller, requirePermission } from "../access.js";
import type { IamContext } from "../app.js";
import { grants, member, organization } from "../db/schema.js";
import { changeKeepingAManager } from "../org-managers.js";
import { isOperatorOnly } from "../permissions.js";
import { Id, pathParam, Permission } from "./schemas.js";

const GrantSchema = z
  .object({
    id: z.string(),
    userId: z.string(),
    orgId: z.string(),
    permission: z.string(),
    granted: z.boolean(),
    grantedBy: z.string(),
    expiresAt: z.number().int().nullable(),
    createdAt: z.number().int(),
    active: z.boolean().openapi({ description: "false once expiresAt has passed" }),
  })
  .openapi("Grant");

/** spec §4.3 and §8: expiresAt is an integer > 0 and < 100000000000 (Unix seconds, DESIGN §2). */
const GrantInput = z
  .object({
    userId: Id,
    orgId: Id,
    permission: Permission,
    granted: z.boolean(),
    grantedBy: Id,
    expiresAt: z.number().int().gt(0).lt(100_000_000_000).optional(),
  })
  .openapi("GrantInput");

type GrantRow = typeof grants.$inferSelect;

/** Whether a record of `orgId` is the caller's to know of: services and operators know every organization's, anyone else their own's. */
const within = (caller: Caller, orgId: string) => caller.kind === "service" || isOperator(caller.principal) || caller.principal.orgId === orgId;

/** Per-user grants and denials (spec §2.6, §4.3; DESIGN §4). */
export function grantRoutes(app: ServiceApp, ctx: IamContext) {
  const grantJson = (g: GrantRow) => ({
    id: g.id,
    userId: g.userId,
    orgId: g.orgId,
    permission: g.permission,
    granted: g.granted,
    grantedBy: g.grantedBy,
    expiresAt: g.expiresAt,
    createdAt: unixSeconds(g.createdAt),
    active: g.expiresAt === null || g.expiresAt > unixSeconds(ctx.clock.now()),
  });

  app.openapi(
    createRoute({
      method: "get",
      path: "/api/core/grants",
      summary: "Grants and denials of an organization, optionally of one user",
      security: security.anyCredential,
      request: {
        query: z.object({
          orgId: Id.openapi({ param: { name: "orgId", in: "query" } }),
          userId: Id.optional().openapi({ param: { name: "userId", in: "query" } }),
        }),
      },
      responses: { 200: jsonContent(z.object({ data: z.array(GrantSchema) }), "Grants"), ...errorResponses(400, 401, 403) },
    }),
    async (c) => {
      const { orgId, userId } = c.req.valid("query");
      const caller = await requireCaller(c, ctx.credentials, ctx.session);
      requirePermission(caller, "org:manage", { orgId });
      const rows = await ctx.db
        .select()
        .from(grants)
        .where(and(eq(grants.orgId, orgId), userId ? eq(grants.userId, userId) : undefined))
        .orderBy(asc(grants.createdAt), asc(grants.id));
      return c.json({ data: rows.map(grantJson) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/api/core/grants",
      summary: "Grant (granted: true) or deny (false) one permission to a member; a denial wins over any grant or role",
      security: security.anyCredential,
      request: { body: jsonBody(GrantInput) },
      responses: { 201: jsonContent(GrantSchema, "The created grant or denial"), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const input = c.req.valid("json");
      const caller = await requireCaller(c, ctx.credentials, ctx.session);
      requirePermission(caller, "org:manage", { orgId: input.orgId });
      if (caller.kind === "principal" && input.grantedBy !== caller.principal.userId) {
        throw forbidden("grantedBy must be your own user id");
      }
      const [org] = await ctx.db.select({ orgType: organization.orgType }).from(organization).where(eq(organization.id, input.orgId));
      if (!org) throw notFound(`No organization ${input.orgId}`);
      if (input.granted && isOperatorOnly(input.permission) && org.orgType !== "core-operator") {
        throw forbidden(`Only the operator organization can hold ${input.permission}`);
      }
      const [membership] = await ctx.db
        .select({ id: member.id })
        .from(member)
        .where(and(eq(member.organizationId, input.orgId), eq(member.userId, input.userId)));
      if (!membership) throw notFound(`User ${input.userId} is not a member of this organization`);
      const expiresAt = input.expiresAt ?? null;
      const change = { kind: "grant", userId: input.userId, permission: input.permission, granted: input.granted, expiresAt } as const;
      const [row] = await changeKeepingAManager(ctx, input.orgId, change, actorOf(c, caller), (tx) =>
        tx
          .insert(grants)
          .values({ id: newId("grt"), ...input, expiresAt, createdAt: ctx.clock.now() })
          .returning(),
      );
      ctx.forgetPrincipals();
      await ctx.audit.record({
        action: "grant.create",
        outcome: "success",
        ...actorOf(c, caller),
        orgId: input.orgId,
        targetType: "user",
        targetId: input.userId,
        metadata: { permission: input.permission, granted: input.granted, expiresAt: input.expiresAt ?? null, grantId: row!.id },
      });
      return c.json(grantJson(row!), 201);
    },
  );

  app.openapi(
    createRoute({
      method: "delete",
      path: "/api/core/grants/{id}",
      summary: "Remove a grant or denial",
      security: security.anyCredential,
      request: { params: z.object({ id: pathParam("id") }) },
      responses: { 200: jsonContent(z.object({ id: z.string() }), "The removed grant's id"), ...errorResponses(401, 403, 404, 409) },
    }),
    async (c) => {
      const { id } = c.req.valid("param");
      const caller = await requireCaller(c, ctx.credentials, ctx.session);
      const [row] = await ctx.db.select().from(grants).where(eq(grants.id, id));
      // another organization's grant looks like one that does not exist (docs/vault/cross-cutting/security.md)
      if (!row || !within(caller, row.orgId)) throw notFound("No such grant in your organization");
      requirePermission(caller, "org:manage", { orgId: row.orgId });
      await changeKeepingAManager(ctx, row.orgId, { kind: "grant-removed", grantId: id }, actorOf(c, caller), (tx) => tx.delete(grants).where(eq(grants.id, id)));
      ctx.forgetPrincipals();
      await ctx.audit.record({
        action: "grant.delete",
        outcome: "success",
        ...actorOf(c, caller),
        orgId: row.orgId,
        targetType: "user",
        targetId: row.userId,
        metadata: { permission: row.permission, granted: row.granted, grantId: id },
      });
      return c.json({ id }, 200);
    },
  );
}
