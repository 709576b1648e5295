import { createRoute, z } from "@hono/zod-openapi";
import { ApiError, errorResponses, forbidden, jsonBody, jsonContent, security, SERVICES, unauthenticated, type ServiceApp } from "@core/kit";
import { MAX_CREDENTIAL_LENGTH, PrincipalSchema } from "@core/service-auth";
import { actorOf, basicChallenge, requireServiceCaller } from "../access.js";
import type { IamContext } from "../app.js";
import { SERVICE_TOKEN_SECONDS } from "../service-tokens.js";

const ServiceName = z.string().min(1).max(64);

const ServiceTokenInput = z.object({ serviceId: ServiceName, targetService: ServiceName }).openapi("ServiceTokenInput");
const ServiceTokenAnswer = z
  .object({ token: z.string(), tokenType: z.literal("Bearer"), expiresIn: z.number().int() })
  .openapi("ServiceToken");

const ApiKeyInput = z
  .object({
    key: z.string().min(1).max(MAX_CREDENTIAL_LENGTH),
    clientIp: z.string().min(1).max(64).optional().openapi({ description: "the address of the client that presented the key, for rate limiting" }),
  })
  .openapi("ApiKeyValidateInput");
const ApiKeyAnswer = z
  .union([z.object({ valid: z.literal(true), principal: PrincipalSchema }), z.object({ valid: z.literal(false) })])
  .openapi("ApiKeyValidateAnswer");

function basicCredentials(header: string | undefined): { id: string; secret: string } | null {
  const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header ?? "");
  if (!match) return null;
  const decoded = Buffer.from(match[1]!, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  if (colon <= 0) return null;
  return { id: decoded.slice(0, colon), secret: decoded.slice(colon + 1) };
}

/** Service tokens and API key validation (spec §4.3, §5.3-5.4; DESIGN §4). */
export function serviceRoutes(app: ServiceApp, ctx: IamContext) {
  app.openapi(
    createRoute({
      method: "post",
      path: "/api/core/service-token",
      summary: "Issue a short-lived (5 minute) service-to-service JWT; the caller authenticates with Basic serviceId:secret",
      security: security.basic,
      request: { body: jsonBody(ServiceTokenInput) },
      responses: { 200: jsonContent(ServiceTokenAnswer, "The service token"), ...errorResponses(400, 401, 403) },
    }),
    async (c) => {
      const { serviceId, targetService } = c.req.valid("json");
      const basic = basicCredentials(c.req.header("authorization"));
      const audit = { action: "service_token.issue" as const, ...actorOf(c, null), targetType: "service", targetId: targetService };
      if (!basic || !ctx.serviceTokens.authenticate(basic.id, basic.secret)) {
        await ctx.audit.record({ ...audit, outcome: "failure", actorId: basic?.id ?? null, metadata: { reason: "bad credentials" } });
        throw basicChallenge();
      }
      if (basic.id !== serviceId) {
        await ctx.audit.record({ ...audit, outcome: "failure", actorType: "service", actorId: basic.id, metadata: { reason: "serviceId mismatch" } });
        throw forbidden("A service may only ask for tokens in its own name");
      }
      // own keys only: `in` would also accept inherited names such as "constructor"
      if (!Object.hasOwn(SERVICES, targetService) && !ctx.serviceTokens.isKnownService(targetService)) {
        throw new ApiError(400, "BAD_REQUEST", `Unknown target service "${targetService}"`, { path: "targetService" });
      }
      const token = await ctx.serviceTokens.issue(serviceId, targetService);
      await ctx.audit.record({ ...audit, outcome: "success", actorType: "service", actorId: serviceId });
      return c.json({ token, tokenType: "Bearer" as const, expiresIn: SERVICE_TOKEN_SECONDS }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/api/core/apikey/validate",
      summary: "Validate a raw API key (services, with a service token); failed attempts are rate limited per calling service and client address",
      security: security.bearer,
      request: { body: jsonBody(ApiKeyInput) },
      responses: { 200: jsonContent(ApiKeyAnswer, "valid with the principal, or valid: false"), ...errorResponses(400, 401, 429) },
    }),
    async (c) => {
      const caller = await requireServiceCaller(c, ctx.credentials);
      const { key, clientIp } = c.req.valid("json");
      // per client address when the service names one: one client's wrong keys must not lock out
      // every other client of that service
      const check = await ctx.apiKeys.checkFrom(key, `${caller.serviceId}${clientIp ? `:${clientIp}` : ""}`);
      if (check.valid) return c.json({ valid: true as const, principal: check.principal }, 200);
      await ctx.audit.record({
        action: "apikey.validate",
        outcome: "failure",
        ...actorOf(c, caller),
        metadata: { code: check.code, ...(clientIp ? { clientIp } : {}) },
      });
      return c.json({ valid: false as const }, 200);
    },
  );
}
