import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { clientIpOf, errorResponses, jsonContent, security, unauthenticated, type ServiceApp } from "@core/kit";
import type { Principal } from "@core/service-auth";
import { actorOf, requireSession } from "../access.js";
import type { IamContext } from "../app.js";

const Identity = z
  .object({ email: z.string(), platformId: z.string(), role: z.string(), expiresAt: z.string() })
  .openapi("CliIdentity");

/**
 * The principal of an API key sent as `x-api-key` (DESIGN §4): what a CI job logs the CLI in with.
 * Wrong keys count against the client's address, like wrong passwords, and are audited.
 */
async function apiKeyPrincipal(c: Context, ctx: IamContext, key: string): Promise<Principal> {
  const check = await ctx.apiKeys.checkFrom(key, `iam:${clientIpOf(c)}`);
  if (check.valid) return check.principal;
  await ctx.audit.record({ action: "apikey.validate", outcome: "failure", ...actorOf(c, null), metadata: { code: check.code, route: "cli/whoami" } });
  throw unauthenticated("This API key is invalid, expired or revoked");
}

/** The caller of the CLI's routes: an API key sent as `x-api-key`, else a session. Settled once per request. */
export async function requireCliPrincipal(c: Context, ctx: IamContext): Promise<Principal> {
  const memo = c.get("core:cli-principal" as never) as Principal | undefined;
  if (memo) return memo;
  const key = c.req.header("x-api-key");
  const principal = key ? await apiKeyPrincipal(c, ctx, key) : (await requireSession(c, ctx.session)).principal;
  c.set("core:cli-principal" as never, principal as never);
  return principal;
}

/** `POST /api/v1/cli/whoami` (spec §2.2, §4.3): who the CLI's access token, or a CI job's API key, stands for. */
export function cliRoutes(app: ServiceApp, ctx: IamContext) {
  app.openapi(
    createRoute({
      method: "post",
      path: "/api/v1/cli/whoami",
      summary: "The identity behind an access token or an API key, as the CLI shows it; errors carry no details (spec §2.3)",
      description:
        "An access token (an IAM session) as `Authorization: Bearer`, or an API key as `x-api-key`. platformId and role are empty " +
        "strings for a user without an organization; expiresAt is empty for an API key that does not expire.",
      security: security.anyCredential,
      responses: { 200: jsonContent(Identity, "The identity response"), ...errorResponses(401, 429) },
    }),
    async (c) => {
      const principal = await requireCliPrincipal(c, ctx);
      return c.json(
        { email: principal.email, platformId: principal.platformId ?? "", role: principal.role ?? "", expiresAt: principal.expiresAt ?? "" },
        200,
      );
    },
  );
}
