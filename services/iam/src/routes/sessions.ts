import { createRoute, z } from "@hono/zod-openapi";
import { and, desc, eq, gt } from "drizzle-orm";
import type { Context } from "hono";
import { errorResponses, jsonBody, jsonContent, notFound, readJsonBody, security, unauthenticated, type ServiceApp } from "@core/kit";
import { MAX_CREDENTIAL_LENGTH, PrincipalSchema, type Principal } from "@core/service-auth";
import { actorOf, requireSession, settledServiceCaller } from "../access.js";
import type { IamContext } from "../app.js";
import { session, user } from "../db/schema.js";
import { pathParam } from "./schemas.js";

const ValidateInput = z.object({ token: z.string().min(1).max(MAX_CREDENTIAL_LENGTH) }).openapi("ValidateSessionInput");
const ValidateAnswer = z
  .union([z.object({ valid: z.literal(true), principal: PrincipalSchema }), z.object({ valid: z.literal(false) })])
  .openapi("ValidateSessionAnswer");

const SessionItem = z
  .object({
    id: z.string(),
    createdAt: z.string(),
    expiresAt: z.string(),
    ipAddress: z.string().nullable(),
    userAgent: z.string().nullable(),
    current: z.boolean(),
  })
  .openapi("SessionItem");

/** Sessions (spec §4.2, DESIGN §4 service contracts). */
export function sessionRoutes(app: ServiceApp, ctx: IamContext) {
  // the hottest route of the system (DESIGN §4): described like every other route, but its body
  // is read by readJsonBody rather than the validator middleware, which costs a third of its time
  const validateSession = createRoute({
    method: "post",
    path: "/api/validate-session",
    summary: "Service-to-service session validation: a session token → its principal (hot path)",
    security: security.bearer,
    request: { body: jsonBody(ValidateInput) },
    responses: { 200: jsonContent(ValidateAnswer, "valid with the principal, or valid: false"), ...errorResponses(400, 401) },
  });
  app.openAPIRegistry.registerPath(validateSession);
  // the answer for a cached principal is serialized once: a service asks about the same session with
  // every request its user makes (ADR 0005); the principal object lives as long as its cache entry
  const answers = new WeakMap<object, string>();
  const INVALID = JSON.stringify({ valid: false });
  const answerText = (principal: Principal | null): string => {
    let body = principal ? answers.get(principal) : INVALID;
    if (body === undefined) answers.set(principal!, (body = JSON.stringify({ valid: true, principal })));
    return body;
  };
  const answer = (c: Context, principal: Principal | null): Response => c.body(answerText(principal), 200, { "content-type": "application/json" });
  // a cached token is answered without a single wait: the guard has settled the caller, the kit has
  // read the body, and the principal is in memory (ADR 0005)
  app.post(validateSession.path, (c): Response | Promise<Response> => {
    settledServiceCaller(c);
    const { token } = readJsonBody(c, ValidateInput);
    const cached = ctx.principals.cachedSessionToken(token);
    if (cached !== undefined) return answer(c, cached);
    return ctx.principals.bySessionToken(token).then((principal) => answer(c, principal));
  });

  app.openapi(
    createRoute({
      method: "get",
      path: "/api/core/session",
      summary: "The caller's session with permissions, tenant context and effective role",
      security: security.session,
      responses: {
        200: jsonContent(
          z.object({
            session: z.object({ id: z.string(), expiresAt: z.string() }),
            user: z.object({ id: z.string(), email: z.string(), name: z.string(), image: z.string().nullable() }),
            principal: PrincipalSchema,
          }),
          "The enriched session",
        ),
        ...errorResponses(401),
      },
    }),
    async (c) => {
      const { principal } = await requireSession(c, ctx.session);
      const [row] = await ctx.db
        .select({ id: user.id, email: user.email, name: user.name, image: user.image })
        .from(user)
        .where(eq(user.id, principal.userId));
      if (!row) throw unauthenticated("Your session is invalid or has expired");
      return c.json({ session: { id: principal.sessionId!, expiresAt: principal.expiresAt! }, user: row, principal }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/api/sessions",
      summary: "The caller's active sessions",
      security: security.session,
      responses: { 200: jsonContent(z.object({ data: z.array(SessionItem) }), "Active sessions, newest first"), ...errorResponses(401) },
    }),
    async (c) => {
      const { principal } = await requireSession(c, ctx.session);
      return c.json({ data: await activeSessions(ctx, principal) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "delete",
      path: "/api/sessions/{id}",
      summary: "Revoke one of the caller's sessions; it stops working at once on IAM and within 5 s elsewhere",
      security: security.session,
      request: { params: z.object({ id: pathParam("id") }) },
      responses: { 200: jsonContent(z.object({ id: z.string() }), "The revoked session's id"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const { principal } = await requireSession(c, ctx.session);
      const { id } = c.req.valid("param");
      await revokeSession(c, ctx, principal, id);
      return c.json({ id }, 200);
    },
  );
}

/** The caller's unexpired sessions, newest first; the JSON route and the account page share it. */
export async function activeSessions(ctx: IamContext, principal: Principal) {
  const rows = await ctx.db
    .select()
    .from(session)
    .where(and(eq(session.userId, principal.userId), gt(session.expiresAt, ctx.clock.now())))
    .orderBy(desc(session.createdAt));
  return rows.map((s) => ({
    id: s.id,
    createdAt: s.createdAt.toISOString(),
    expiresAt: s.expiresAt.toISOString(),
    ipAddress: s.ipAddress,
    userAgent: s.userAgent,
    current: s.id === principal.sessionId,
  }));
}

/**
 * Ends one of the caller's sessions at once (404 for anyone else's), with everything made through
 * it (session-revocation.ts), audited.
 */
export async function revokeSession(c: Context, ctx: IamContext, principal: Principal, id: string) {
  const ended = await ctx.sessionRevocation.revokeOwn(principal.userId, id);
  if (!ended) throw notFound("No such session of yours");
  await auditRevocation(c, ctx, principal, { targetType: "session", targetId: id }, { sessions: ended.length });
}

/**
 * "Sign out my other sessions": every session of the caller's but this one ends, with every CLI
 * login and MCP client's refresh token not made through this one, idle ones included; audited.
 */
export async function revokeOtherSessions(c: Context, ctx: IamContext, principal: Principal) {
  const ended = await ctx.sessionRevocation.revokeAllOf(principal.userId, principal.sessionId);
  await auditRevocation(c, ctx, principal, { targetType: "user", targetId: principal.userId }, { reason: "others", sessions: ended.length });
}

/** `session.revoke` in the audit log, by the caller, with how many sessions ended. */
const auditRevocation = (c: Context, ctx: IamContext, principal: Principal, target: { targetType: string; targetId: string }, metadata: Record<string, unknown>) =>
  ctx.audit.record({ action: "session.revoke", outcome: "success", ...actorOf(c, { kind: "principal", principal }), orgId: principal.orgId, ...target, metadata });
