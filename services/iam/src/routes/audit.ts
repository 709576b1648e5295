import { createRoute, z } from "@hono/zod-openapi";
import { cursorParam, errorResponses, forbidden, integerQuery, jsonContent, limitParam, notFound, security, type ServiceApp } from "@core/kit";
import { holds, type Principal } from "@core/service-auth";
import { requireSession } from "../access.js";
import type { IamContext } from "../app.js";
import type { AuditEvent } from "../audit.js";
import { auditEventJson } from "../audit-stream.js";
import { Id, pathParam } from "./schemas.js";

export const AuditEventSchema = z
  .object({
    id: z.string(),
    at: z.number().int().openapi({ description: "Unix seconds" }),
    action: z.string(),
    outcome: z.enum(["success", "failure"]),
    actorType: z.string(),
    actorId: z.string().nullable(),
    orgId: z.string().nullable(),
    targetType: z.string().nullable(),
    targetId: z.string().nullable(),
    ip: z.string().nullable(),
    userAgent: z.string().nullable(),
    requestId: z.string().nullable(),
    metadata: z.record(z.string(), z.unknown()).nullable(),
  })
  .openapi("AuditEvent");

const Seconds = integerQuery(0, 99_999_999_999).openapi({ description: "Unix seconds" });

const isOperatorReader = (p: Principal) => p.orgType === "core-operator" && p.permissions.includes("audit:read");

/** Audit reads (spec §4.2, §6; DESIGN §4): org admins see their organization, operators all. */
export function auditRoutes(app: ServiceApp, ctx: IamContext) {
  // the one definition of an event's answer, which audit endpoints receive too (audit-stream.ts)
  const json = (e: AuditEvent) => auditEventJson(e);

  app.openapi(
    createRoute({
      method: "get",
      path: "/api/audit/events",
      summary: "Audit events, newest first, filtered and paged",
      security: security.session,
      request: {
        query: z.object({
          orgId: Id.optional().openapi({ param: { name: "orgId", in: "query" } }),
          actorId: Id.optional().openapi({ param: { name: "actorId", in: "query" } }),
          action: z.string().min(1).max(64).optional().openapi({ param: { name: "action", in: "query" } }),
          since: Seconds.optional().openapi({ param: { name: "since", in: "query" } }),
          until: Seconds.optional().openapi({ param: { name: "until", in: "query" } }),
          cursor: cursorParam(),
          limit: limitParam(50, 100),
        }),
      },
      responses: {
        200: jsonContent(z.object({ data: z.array(AuditEventSchema), cursor: z.string().nullable() }).openapi("AuditPage"), "A page of events"),
        ...errorResponses(400, 401, 403),
      },
    }),
    async (c) => {
      const { principal } = await requireSession(c, ctx.session);
      const query = c.req.valid("query");
      let orgId = query.orgId;
      if (!isOperatorReader(principal)) {
        // an org admin reads their own organization's events, and only those
        orgId ??= principal.orgId ?? undefined;
        if (!orgId || !holds(principal, "audit:read", { orgId })) throw forbidden("You need audit:read in this organization");
      }
      const page = await ctx.audit.list({ ...query, orgId });
      return c.json({ data: page.data.map(json), cursor: page.cursor }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/api/audit/events/{id}",
      summary: "One audit event",
      security: security.session,
      request: { params: z.object({ id: pathParam("id") }) },
      responses: { 200: jsonContent(AuditEventSchema, "The event"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const { principal } = await requireSession(c, ctx.session);
      const event = await ctx.audit.find(c.req.valid("param").id);
      if (!event) throw notFound("No such audit event");
      if (!isOperatorReader(principal) && !(event.orgId && holds(principal, "audit:read", { orgId: event.orgId }))) {
        // events outside the reader's organization look like missing ones
        throw notFound("No such audit event");
      }
      return c.json(json(event), 200);
    },
  );
}
