import { createRoute, z } from "@hono/zod-openapi";
import { ApiError, errorResponses, jsonBody, jsonContent, security, traceOf, type ServiceApp } from "@core/kit";
import { actorOf, requireCaller, requirePermission } from "../access.js";
import type { IamContext } from "../app.js";
import { platformStatus } from "../db/schema.js";
import { Id } from "./schemas.js";

const PlatformStatusInput = z
  .object({ platformId: Id, status: z.enum(["suspended", "active"]) })
  .openapi("PlatformStatusInput");

/**
 * `POST /internal/platform-status` (spec §3, §4.3): suspends or reactivates a platform. The
 * platform registry is told first (it refuses writes while suspended), then IAM records the status
 * that principals carry; a failure at the registry changes nothing.
 */
export function platformStatusRoutes(app: ServiceApp, ctx: IamContext) {
  app.openapi(
    createRoute({
      method: "post",
      path: "/internal/platform-status",
      summary: "Set a platform's suspension status (services, operators with platforms:manage)",
      security: security.anyCredential,
      request: { body: jsonBody(PlatformStatusInput) },
      responses: {
        200: jsonContent(z.object({ platformId: z.string(), status: z.enum(["suspended", "active"]) }), "The status now in force"),
        ...errorResponses(400, 401, 403, 404, 502, 503),
      },
    }),
    async (c) => {
      const { platformId, status } = c.req.valid("json");
      const caller = await requireCaller(c, ctx.credentials, ctx.session);
      requirePermission(caller, "platforms:manage");
      const actor = actorOf(c, caller);
      try {
        await ctx.registry.setStatus(platformId, status, traceOf(c));
      } catch (err) {
        // suspending a suspended platform changes nothing at the registry, and it says so
        const alreadySuspended = status === "suspended" && err instanceof ApiError && err.code === "PLATFORM_SUSPENDED";
        if (!alreadySuspended) {
          await ctx.audit.record({ action: "platform.status", outcome: "failure", ...actor, targetType: "platform", targetId: platformId, metadata: { status } });
          throw err;
        }
      }
      const now = ctx.clock.now();
      await ctx.db
        .insert(platformStatus)
        .values({ platformId, status, updatedAt: now, updatedBy: actor.actorId })
        .onConflictDoUpdate({ target: platformStatus.platformId, set: { status, updatedAt: now, updatedBy: actor.actorId } });
      ctx.forgetPrincipals();
      await ctx.audit.record({ action: "platform.status", outcome: "success", ...actor, targetType: "platform", targetId: platformId, metadata: { status } });
      return c.json({ platformId, status }, 200);
    },
  );
}
