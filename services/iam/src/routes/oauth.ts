import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { clientIpOf, ErrorEnvelopeSchema, errorResponses, jsonContent, notFound, security, type ServiceApp } from "@core/kit";
import type { Principal } from "@core/service-auth";
import { actorOf, requireSession } from "../access.js";
import type { IamContext } from "../app.js";
import { CLI_CLIENT_ID, DEVICE_CODE_GRANT, displayUserCode, OAuthError } from "../device-flow.js";
import { callAuthLibrary } from "../auth-library.js";
import { OAUTH_SCOPES } from "../oauth-provider.js";

/** RFC 6749 §5.1: token answers are never cached. */
const NO_STORE = { "cache-control": "no-store", pragma: "no-cache" };

/** Standard OAuth clients send forms; ours may send JSON. Both are read, nothing else. */
async function oauthParams(c: Context): Promise<Record<string, string>> {
  const type = (c.req.header("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
  let raw: unknown;
  try {
    if (type === "application/x-www-form-urlencoded" || type === "multipart/form-data") raw = await c.req.parseBody();
    else if (type === "application/json") raw = await c.req.json();
    else throw new OAuthError("invalid_request", "Send the parameters as application/x-www-form-urlencoded or JSON");
  } catch (err) {
    if (err instanceof OAuthError) throw err;
    throw new OAuthError("invalid_request", "The request body could not be read");
  }
  const params: Record<string, string> = {};
  if (raw && typeof raw === "object") for (const [k, v] of Object.entries(raw)) if (typeof v === "string") params[k] = v;
  return params;
}

function required(params: Record<string, string>, ...names: string[]) {
  for (const name of names) if (!params[name]) throw new OAuthError("invalid_request", `Missing parameter: ${name}`);
}

function requireClient(params: Record<string, string>) {
  required(params, "client_id");
  if (params.client_id !== CLI_CLIENT_ID) throw new OAuthError("invalid_client", `Unknown client "${params.client_id}"`);
}

/**
 * A token or revocation request of the OAuth provider's clients (oauth-provider.ts), passed to the
 * plugin's route as a form of the same parameters: the one token endpoint of the discovery document serves both families.
 */
function toProvider(c: Context, params: Record<string, string>, path: "/oauth2/token" | "/oauth2/revoke"): Request {
  const headers = new Headers(c.req.raw.headers);
  headers.delete("content-length");
  headers.set("content-type", "application/x-www-form-urlencoded");
  return new Request(new URL(`/api/auth${path}`, c.req.url), { method: "POST", headers, body: new URLSearchParams(params).toString() });
}

/** RFC 6749 §5.2: `{ error, error_description }` with HTTP 400. */
function oauthFailure(c: Context, err: unknown) {
  if (err instanceof OAuthError) return c.json({ error: err.error, error_description: err.description }, 400, NO_STORE);
  throw err;
}

const requester = (c: Context) => ({ ip: clientIpOf(c), userAgent: c.req.header("user-agent") ?? null });

const OAuthErrorSchema = z.object({ error: z.string(), error_description: z.string() }).openapi("OAuthError");
/** RFC errors from the routes; the input screen refuses what no route may read (U+0000, deep JSON) in our envelope. */
const oauthErrors = {
  400: jsonContent(z.union([OAuthErrorSchema, ErrorEnvelopeSchema]), "RFC 6749 §5.2 / RFC 8628 §3.5 error, or the error envelope for unreadable input"),
};
const TokenSchema = z
  .object({ access_token: z.string(), token_type: z.literal("bearer"), expires_in: z.number().int(), refresh_token: z.string() })
  .openapi("TokenResponse");
const ProviderTokenSchema = z
  .object({
    access_token: z.string(),
    token_type: z.literal("Bearer"),
    expires_in: z.number().int(),
    expires_at: z.number().int().optional(),
    refresh_token: z.string().optional(),
    scope: z.string(),
  })
  .passthrough()
  .openapi("ProviderTokenResponse");
const form = (schema: z.ZodType) => ({
  required: true,
  content: { "application/x-www-form-urlencoded": { schema }, "application/json": { schema } },
});

/** Members of the plugin's discovery document that IAM does not offer (see the metadata route). */
const NOT_OFFERED = [
  "introspection_endpoint",
  "introspection_endpoint_auth_methods_supported",
  "introspection_endpoint_auth_signing_alg_values_supported",
  "userinfo_endpoint",
  "end_session_endpoint",
  "backchannel_logout_supported",
  "backchannel_logout_session_supported",
  "dpop_signing_alg_values_supported",
  // signed client assertions: every client here is public (token_endpoint_auth_methods_supported: none)
  "token_endpoint_auth_signing_alg_values_supported",
  "revocation_endpoint_auth_signing_alg_values_supported",
];

/**
 * The OAuth 2.0 Device Authorization Grant for the `core` CLI (RFC 8628; spec §4.3, §7.3; DESIGN §5)
 * and refresh token rotation. Bodies arrive as forms or JSON, so these routes read their own.
 */
export function oauthRoutes(app: ServiceApp, ctx: IamContext) {
  const route = (definition: Parameters<typeof createRoute>[0]) => {
    const described = createRoute(definition);
    app.openAPIRegistry.registerPath(described);
    return described.path.replace(/\{(\w+)\}/g, ":$1");
  };

  /** RFC 8628 §3.4: one poll with the device code; the caller has checked grant_type. */
  async function deviceToken(c: Context, params: Record<string, string>) {
    required(params, "device_code");
    requireClient(params);
    const { tokens, userId } = await ctx.deviceFlow.poll(params.device_code!, params.client_id!, requester(c));
    await ctx.audit.record({ action: "device.token", outcome: "success", ...actorOf(c, null), actorType: "user", actorId: userId });
    return c.json(tokens, 200, NO_STORE);
  }

  // RFC 8414 metadata, one document for both grant families: the provider plugin's authorization
  // server (authorization code, registration; oauth-provider.ts) and the CLI's device flow. Token and
  // revocation requests of the plugin's clients go through our endpoints to the plugin (below).
  app.get("/.well-known/oauth-authorization-server", async (c) => {
    const provider: Record<string, unknown> = { ...(await ctx.auth.api.getOAuthServerConfig()) };
    // the plugin names features whose routes are off here (introspection) or that belong to
    // OpenID Connect, which is off: a client must find only what it can use
    for (const name of NOT_OFFERED) delete provider[name];
    return c.json(
      {
        ...provider,
        issuer: ctx.config.iamUrl,
        token_endpoint: `${ctx.config.iamUrl}/oauth/token`,
        revocation_endpoint: `${ctx.config.iamUrl}/oauth/revoke`,
        device_authorization_endpoint: `${ctx.config.iamUrl}/oauth/device/code`,
        grant_types_supported: ["authorization_code", "refresh_token", DEVICE_CODE_GRANT],
        response_types_supported: ["code"],
        code_challenge_methods_supported: ["S256"],
        token_endpoint_auth_methods_supported: ["none"],
        revocation_endpoint_auth_methods_supported: ["none"],
        scopes_supported: [...OAUTH_SCOPES],
      },
      200,
      { "cache-control": "public, max-age=300" },
    );
  });

  app.post(
    route({
      method: "post",
      path: "/oauth/device/code",
      summary: "RFC 8628 §3.1: start a device login (client_id core-cli)",
      request: { body: form(z.object({ client_id: z.literal(CLI_CLIENT_ID), scope: z.string().optional() })) },
      responses: {
        200: jsonContent(
          z.object({
            device_code: z.string(),
            user_code: z.string(),
            verification_uri: z.string(),
            verification_uri_complete: z.string(),
            expires_in: z.number().int(),
            interval: z.number().int(),
          }),
          "The device code response (spec §2.2), with verification_uri_complete",
        ),
        ...oauthErrors,
        ...errorResponses(429),
      },
    }),
    async (c) => {
      try {
        const params = await oauthParams(c);
        requireClient(params);
        const limits = ctx.config.rateLimits;
        if (limits.enabled) await ctx.rateLimiter.hit(`device-code:${clientIpOf(c)}`, 30, limits.windowSeconds);
        const started = await ctx.deviceFlow.start(requester(c));
        const userCode = displayUserCode(started.userCode);
        // the user code is a short-lived credential: the log names the request, never the code
        await ctx.audit.record({ action: "device.start", outcome: "success", ...actorOf(c, null), targetType: "device_code", targetId: started.id });
        return c.json(
          {
            device_code: started.deviceCode,
            user_code: userCode,
            verification_uri: ctx.config.activationUrl,
            verification_uri_complete: `${ctx.config.activationUrl}?user_code=${userCode}`,
            expires_in: started.expiresIn,
            interval: started.interval,
          },
          200,
          NO_STORE,
        );
      } catch (err) {
        return oauthFailure(c, err);
      }
    },
  );

  app.post(
    route({
      method: "post",
      path: "/oauth/device/token",
      summary: "RFC 8628 §3.4: poll for the tokens of a device code",
      request: { body: form(z.object({ grant_type: z.literal(DEVICE_CODE_GRANT), device_code: z.string(), client_id: z.literal(CLI_CLIENT_ID) })) },
      responses: { 200: jsonContent(TokenSchema, "The token response (spec §2.2)"), ...oauthErrors },
    }),
    async (c) => {
      try {
        const params = await oauthParams(c);
        required(params, "grant_type");
        if (params.grant_type !== DEVICE_CODE_GRANT) throw new OAuthError("unsupported_grant_type", `Use ${DEVICE_CODE_GRANT}`);
        return await deviceToken(c, params);
      } catch (err) {
        return oauthFailure(c, err);
      }
    },
  );

  app.post(
    route({
      method: "post",
      path: "/oauth/token",
      summary:
        "The token endpoint of both grant families. The CLI (client_id core-cli): a refresh token for new tokens (it rotates; reusing a spent one revokes its family), or the device_code grant. Other clients (registered with the OAuth provider): authorization_code with the PKCE verifier and the resource, or refresh_token (rotating; needs offline_access)",
      request: {
        body: form(
          z.object({
            grant_type: z.enum(["authorization_code", "refresh_token", DEVICE_CODE_GRANT]),
            client_id: z.string(),
            refresh_token: z.string().optional(),
            device_code: z.string().optional(),
            code: z.string().optional(),
            code_verifier: z.string().optional(),
            redirect_uri: z.string().optional(),
            resource: z.string().optional(),
            scope: z.string().optional(),
          }),
        ),
      },
      responses: {
        200: jsonContent(z.union([TokenSchema, ProviderTokenSchema]), "The token response: the CLI's (spec §2.2), or the OAuth provider's (RFC 6749 §5.1; a JWT access token for the resource)"),
        ...oauthErrors,
        401: jsonContent(OAuthErrorSchema, "The OAuth provider's refusal of a client, or of a wrong PKCE verifier (invalid_request)"),
      },
    }),
    async (c) => {
      try {
        const params = await oauthParams(c);
        required(params, "grant_type");
        if (params.grant_type === "authorization_code" || (params.grant_type === "refresh_token" && params.client_id && params.client_id !== CLI_CLIENT_ID)) {
          return await callAuthLibrary(c, ctx, toProvider(c, params, "/oauth2/token"));
        }
        if (params.grant_type === DEVICE_CODE_GRANT) return await deviceToken(c, params);
        if (params.grant_type !== "refresh_token") throw new OAuthError("unsupported_grant_type", "Use refresh_token or the device_code grant");
        required(params, "refresh_token");
        requireClient(params);
        const result = await ctx.deviceFlow.refresh(params.refresh_token!, params.client_id!, requester(c));
        if (result.outcome === "reused") {
          ctx.forgetPrincipals();
          await ctx.audit.record({
            action: "token.refresh_reuse",
            outcome: "failure",
            ...actorOf(c, null),
            actorType: "user",
            actorId: result.userId,
            metadata: { familyId: result.familyId, revoked: true },
          });
        }
        if (result.outcome !== "ok") throw new OAuthError("invalid_grant", "Unknown, expired, revoked or already used refresh token");
        await ctx.audit.record({ action: "token.refresh", outcome: "success", ...actorOf(c, null), actorType: "user", actorId: result.userId });
        return c.json(result.tokens, 200, NO_STORE);
      } catch (err) {
        return oauthFailure(c, err);
      }
    },
  );

  app.post(
    route({
      method: "post",
      path: "/oauth/revoke",
      summary: "RFC 7009: revoke a refresh token (with its family and sessions) or an access token",
      request: { body: form(z.object({ token: z.string(), token_type_hint: z.string().optional(), client_id: z.string() })) },
      responses: {
        200: jsonContent(z.object({}).passthrough(), "Revoked, or nothing to revoke (the CLI's tokens, or the OAuth provider's for its clients)"),
        ...oauthErrors,
        401: jsonContent(OAuthErrorSchema, "The OAuth provider's refusal of a client"),
      },
    }),
    async (c) => {
      try {
        const params = await oauthParams(c);
        required(params, "token");
        if (params.client_id && params.client_id !== CLI_CLIENT_ID) {
          // the plugin answers an empty 200; RFC 7009 §2.2 leaves the body open, and ours is {} for both families
          const answer = await callAuthLibrary(c, ctx, toProvider(c, params, "/oauth2/revoke"));
          return answer.ok ? c.json({}, 200, NO_STORE) : answer;
        }
        requireClient(params);
        const revoked = await ctx.deviceFlow.revoke(params.token!);
        if (revoked) {
          ctx.forgetPrincipals();
          await ctx.audit.record({
            action: "token.revoke",
            outcome: "success",
            ...actorOf(c, null),
            actorType: "user",
            actorId: revoked.userId,
            metadata: { kind: revoked.kind },
          });
        }
        return c.json({}, 200, NO_STORE);
      } catch (err) {
        return oauthFailure(c, err);
      }
    },
  );

  for (const approve of [true, false]) {
    app.openapi(
      createRoute({
        method: "post",
        path: approve ? "/oauth/device/authorize" : "/oauth/device/deny",
        summary: approve ? "Approve a device login by its user code (signed in)" : "Deny a device login by its user code (signed in)",
        security: security.session,
        request: {
          body: {
            required: true,
            content: { "application/json": { schema: z.object({ user_code: z.string().min(1).max(32) }).openapi("UserCodeInput") } },
          },
        },
        responses: { 200: jsonContent(z.object({ ok: z.literal(true) }), "Done"), ...errorResponses(400, 401, 403, 404, 429) },
      }),
      async (c) => {
        const { principal } = await requireSession(c, ctx.session);
        await decideDeviceLogin(c, ctx, principal, c.req.valid("json").user_code, approve);
        return c.json({ ok: true as const }, 200);
      },
    );
  }
}

const NO_PENDING_LOGIN = "No pending login with this code: it may be mistyped, used or expired";

/**
 * Wrong user codes are counted per user, and too many in a window are refused with 429 (DESIGN §5),
 * whether the code was looked up or answered; counted atomically, so parallel guesses do not pass.
 */
async function countingWrongCodes<T>(ctx: IamContext, userId: string, attempt: () => Promise<T | null>): Promise<T | null> {
  const limits = ctx.config.rateLimits;
  const failures = `user-code-failures:${userId}`;
  if (!limits.enabled) return attempt();
  return ctx.rateLimiter.limitFailures(failures, limits.userCodeFailures, limits.windowSeconds, attempt, (found) => !found);
}

/** The pending device login behind a user code, for the activation page to show; 404 when none. */
export async function findDeviceLogin(ctx: IamContext, userId: string, userCode: string) {
  const found = await countingWrongCodes(ctx, userId, () => ctx.deviceFlow.pending(userCode));
  if (!found) throw notFound(NO_PENDING_LOGIN);
  return found;
}

/**
 * Approves or denies a device login with a signed-in session — the JSON routes and the activation
 * page share it. The login is made with that session's strength (device-flow.ts). Wrong codes count
 * toward the user's limit (429).
 */
export async function decideDeviceLogin(c: Context, ctx: IamContext, approver: Principal, userCode: string, approve: boolean) {
  const userId = approver.userId;
  const approving = { userId, sessionId: approver.sessionId ?? "" };
  const decided = await countingWrongCodes(ctx, userId, () => ctx.deviceFlow.decide(userCode, approving, approve));
  const actor = actorOf(c, null);
  if (!decided) {
    await ctx.audit.record({ action: approve ? "device.approve" : "device.deny", outcome: "failure", ...actor, actorType: "user", actorId: userId, metadata: { reason: "unknown, used or expired code" } });
    throw notFound(NO_PENDING_LOGIN);
  }
  await ctx.audit.record({
    action: approve ? "device.approve" : "device.deny",
    outcome: "success",
    ...actor,
    actorType: "user",
    actorId: userId,
    targetType: "device_code",
    targetId: decided.id,
    metadata: { requesterIp: decided.requesterIp, requesterAgent: decided.requesterAgent },
  });
  return decided;
}
