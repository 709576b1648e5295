import { createRoute, z } from "@hono/zod-openapi";
import { errorResponses, jsonContent, security, type ServiceApp } from "@core/kit";
import { requireSession } from "../access.js";
import type { IamContext } from "../app.js";

const Identity = z
  .object({ email: z.string(), platformId: z.string(), role: z.string(), expiresAt: z.string() })
  .openapi("CliIdentity");

/** `POST /api/v1/cli/whoami` (spec §2.2, §4.3): who the CLI's access token stands for. */
export function cliRoutes(app: ServiceApp, ctx: IamContext) {
  app.openapi(
    createRoute({
      method: "post",
      path: "/api/v1/cli/whoami",
      summary: "The identity behind an access token, as the CLI shows it; errors carry no details (spec §2.3)",
      description: "platformId and role are empty strings for a user without an organization.",
      security: security.bearer,
      responses: { 200: jsonContent(Identity, "The identity response"), ...errorResponses(401) },
    }),
    async (c) => {
      const { principal } = await requireSession(c, ctx.session);
      return c.json(
        { email: principal.email, platformId: principal.platformId ?? "", role: principal.role ?? "", expiresAt: principal.expiresAt ?? "" },
        200,
      );
    },
  );
}
