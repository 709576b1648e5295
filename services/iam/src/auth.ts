import { apiKey } from "@better-auth/api-key";
import { betterAuth } from "better-auth";
import { drizzleAdapter } from "better-auth/adapters/drizzle";
import { createAuthMiddleware, isAPIError } from "better-auth/api";
import { eq } from "drizzle-orm";
import { bearer, jwt, magicLink, openAPI, organization } from "better-auth/plugins";
import type { Logger, Mailer } from "@core/kit";
import type { Db } from "@core/storage";
import type { AuditInput, AuditLog } from "./audit.js";
import * as schema from "./db/schema.js";
import type { IamConfig } from "./config.js";
import { libraryLogger } from "./library-log.js";
import { ssoPlugin } from "./sso.js";
import { trustedOriginsWithProviderScope } from "./sso-connections.js";
import { signInMethodOf, TWO_FACTOR_PAGE, twoFactorHooks, twoFactorPlugin } from "./two-factor.js";
import type { UnprovenAccessRevocations } from "./unproven-access.js";
import { PASSKEY_AUDITED, PASSKEY_RATE_LIMITED, passkeyAuditTarget, passkeyPlugin } from "./passkeys.js";
import { OAUTH_DISABLED_PATHS, oauthProviderPlugins, type OAuthProviderDeps } from "./oauth-provider.js";
import type { SessionRevocation } from "./session-revocation.js";

/** Header our HTTP layer sets from the socket address; clients cannot supply it (stripped first). */
export const CLIENT_IP_HEADER = "x-core-client-ip";
/** Header our HTTP layer sets to the request's id, so audit records of library routes carry it. */
export const REQUEST_ID_HEADER = "x-core-request-id";
/**
 * Header our HTTP layer sets to the user of the request's session (cookie or bearer token): the
 * library's after hook knows the session of some routes only (not of organization routes called
 * with a bearer token), and the audit log must name the actor of each.
 */
export const ACTOR_HEADER = "x-core-actor";

export interface AuthDeps {
  db: Db;
  logger: Logger;
  config: IamConfig;
  mailer: Mailer;
  audit: AuditLog;
  /** called after anything that may change a session or a principal (sign-out, org changes) */
  onPrincipalsChanged: () => void;
  /** what the library takes from unproven accounts, noted per request (unproven-access.ts) */
  revocations: UnprovenAccessRevocations;
  /** a session the library ends (sign-out, its revoke routes, a password change or reset): what it made ends too */
  sessionRevocation: SessionRevocation;
  /** the organization and permissions OAuth access tokens carry (oauth-provider.ts) */
  oauthGrants: Pick<OAuthProviderDeps, "actingOrganization" | "grantedPermissions" | "clock">;
}

/**
 * Library routes that are off (a route that exists works fully): the jwt plugin's token route
 * signs whole user records (services use service tokens); no social provider is configured;
 * deleting users and organizations would orphan platforms and memberships, and email changes are
 * not offered; the OpenAPI plugin's routes are ours to serve (/openapi.json, /docs).
 */
export const DISABLED_PATHS = [
  "/token",
  "/sign-in/social",
  "/callback/:id",
  "/link-social",
  "/unlink-account",
  "/get-access-token",
  "/refresh-token",
  "/account-info",
  "/delete-user",
  "/delete-user/callback",
  "/change-email",
  "/organization/delete",
  "/open-api/generate-schema",
  "/reference",
  // single sign-on (sso.ts): owners configure providers through IAM's routes, which wrap these;
  // domains are approved by operators, not by the plugin's DNS check; OIDC only (no SAML), and
  // the callback is per provider
  "/sso/register",
  "/sso/update-provider",
  "/sso/delete-provider",
  "/sso/providers",
  "/sso/get-provider",
  "/sso/request-domain-verification",
  "/sso/verify-domain",
  "/sso/callback",
  "/sso/saml2/sp/metadata",
  "/sso/saml2/sp/acs/:providerId",
  "/sso/saml2/sp/slo/:providerId",
  "/sso/saml2/logout/:providerId",
  // two-factor by emailed or texted one-time codes: not offered (TOTP and backup codes are)
  "/two-factor/send-otp",
  "/two-factor/verify-otp",
  // the OAuth provider's routes beyond authorization, token, registration, revocation and consent
  ...OAUTH_DISABLED_PATHS,
];

/**
 * Routes the library declares but cannot serve as configured: a POST to get-session needs a
 * session option we do not use, and answers 405 otherwise. Ours is the 404 envelope.
 */
export const UNSERVED_ROUTES = [
  "POST /get-session",
  // the OAuth provider's token and revocation routes take forms, which /api/auth/* does not; the
  // discovery document's endpoints, /oauth/token and /oauth/revoke, pass its clients' requests to them
  "POST /oauth2/token",
  "POST /oauth2/revoke",
];

/** Library paths whose outcome goes to the audit log, with the action they stand for. */
const AUDITED: Record<string, AuditInput["action"]> = {
  "/sign-in/email": "auth.sign_in",
  "/sign-up/email": "auth.sign_up",
  "/sign-out": "auth.sign_out",
  "/sign-in/magic-link": "auth.magic_link.request",
  "/magic-link/verify": "auth.magic_link.verify",
  "/revoke-session": "session.revoke",
  "/revoke-sessions": "session.revoke",
  "/revoke-other-sessions": "session.revoke",
  "/api-key/create": "apikey.create",
  "/api-key/delete": "apikey.delete",
  "/send-verification-email": "auth.email_verification.request",
  "/verify-email": "auth.email_verify",
  "/request-password-reset": "auth.password_reset.request",
  "/reset-password": "auth.password_reset",
  "/change-password": "auth.password_change",
  ...PASSKEY_AUDITED,
  "/sign-in/sso": "auth.sso.start",
  "/sso/callback/:providerId": "auth.sso.sign_in",
  "/two-factor/enable": "auth.two_factor.enrol",
  "/two-factor/get-totp-uri": "auth.two_factor.secret_view",
  "/two-factor/verify-totp": "auth.two_factor.verify",
  "/two-factor/verify-backup-code": "auth.two_factor.backup_code",
  "/two-factor/disable": "auth.two_factor.disable",
  "/two-factor/generate-backup-codes": "auth.two_factor.backup_codes_regenerate",
  // the OAuth provider (oauth-provider.ts): clients registering, people consenting, tokens issued or refused
  "/oauth2/register": "oauth.client.register",
  "/oauth2/consent": "oauth.consent",
  "/oauth2/token": "oauth.token",
};

/** Whether a library path's outcome goes to the audit log. */
export const isAuditedLibraryPath = (path: string) => path in AUDITED || path.startsWith("/organization/");

/** Library paths after which sessions or permissions may have changed: IAM's caches are dropped. */
const CHANGES_PRINCIPALS = /^\/(organization|revoke|api-key|two-factor)\b|^\/(sign-out|reset-password|change-password|magic-link\/verify)$/;

/**
 * list-sessions answers each session without its token: a token is a bearer credential, and one
 * stolen session must not give away every other (issue 26). The caller's own is marked `current`;
 * any of them is revoked by id with `DELETE /api/sessions/{id}` (the library's revoke-session takes
 * a token, so it serves the caller's own).
 */
export const withoutTokens = (sessions: unknown[], currentId: string | undefined) =>
  sessions.map((listed) => {
    const { token: _token, ...rest } = listed as { id: string; token?: string };
    return { ...rest, current: rest.id === currentId };
  });

/** The library's redirect answer (a thrown 302), with the address it sends the browser to. */
const redirectTarget = (returned: unknown): string | null => {
  const headers = (returned as { headers?: Headers } | null)?.headers;
  return isAPIError(returned) && headers instanceof Headers ? headers.get("location") : null;
};

/**
 * better-auth, configured per issue 2 and DESIGN §4: email/password, magic link (tokens stored
 * hashed), organizations (owner/admin/member, org types), API keys (hashed, no per-key daily cap),
 * bearer sessions and a JWKS (EdDSA) for service tokens. The library's rate limiter is on in every
 * mode and counts in the database so limits hold across replicas.
 */
export function createAuth(deps: AuthDeps) {
  const { config } = deps;
  // sign-out deletes the session, and a reset needs none, before the after hook runs: who it was is noted on the way
  const actingUser = new WeakMap<object, string>();
  const twoFactorSteps = twoFactorHooks({
    db: deps.db,
    audit: deps.audit,
    noteActor: (request, userId) => actingUser.set(request, userId),
    headersOf: (ctx) => {
      const headers = ctx.headers ?? ctx.request?.headers;
      return { ip: headers?.get(CLIENT_IP_HEADER) ?? null, userAgent: headers?.get("user-agent") ?? null, requestId: headers?.get(REQUEST_ID_HEADER) ?? null };
    },
    codePage: (next) => `${TWO_FACTOR_PAGE}?next=${encodeURIComponent(next)}`,
    signOutOthers: (ctx, userId, keep) => signOutOthers(ctx, userId, keep, "two_factor_enrol"),
  });
  /**
   * Turning two-factor on and changing the password sign the other sessions out unless asked not to
   * (`revokeOtherSessions: false`), and with them every CLI login and MCP client's refresh token not
   * made through the session that remains (session-revocation.ts revokeAllOf); audited.
   */
  const signOutOthers = async (ctx: { headers?: Headers; request?: Request }, userId: string, keep: string | null, reason: "password_change" | "two_factor_enrol") => {
    const ended = await deps.sessionRevocation.revokeAllOf(userId, keep);
    const headers = ctx.headers ?? ctx.request?.headers;
    await deps.audit.record({
      action: "session.revoke",
      outcome: "success",
      actorType: "user",
      actorId: userId,
      targetType: "user",
      targetId: userId,
      ip: headers?.get(CLIENT_IP_HEADER) ?? null,
      userAgent: headers?.get("user-agent") ?? null,
      requestId: headers?.get(REQUEST_ID_HEADER) ?? null,
      metadata: { reason, sessions: ended.length },
    });
  };
  return betterAuth({
    appName: "Core",
    baseURL: config.iamUrl,
    basePath: "/api/auth",
    secret: config.authSecret,
    // IAM's own and the operator's; an organization's identity provider only during IAM's own call
    // into the SSO plugin for it, whose connections go through the SSRF guard (ADR 0026)
    trustedOrigins: trustedOriginsWithProviderScope(config.trustedOrigins),
    telemetry: { enabled: false },
    // the library's own messages go to our structured log: refused input at info without the client's text
    logger: libraryLogger(deps.logger),
    // the library's refusals (its APIErrors) are answers, which its router turns into responses; any
    // other failure is thrown on to our handler, so the kit answers it as every service does: the
    // database out of reach is 503 UPSTREAM_UNAVAILABLE, anything else a logged 500 (DESIGN §3).
    // (A hook of onAPIError cannot do this: the library swallows what the hook throws.)
    onAPIError: { throw: true },
    database: drizzleAdapter(deps.db, {
      provider: "pg",
      transaction: true,
      schema: {
        user: schema.user,
        session: schema.session,
        account: schema.account,
        verification: schema.verification,
        organization: schema.organization,
        member: schema.member,
        invitation: schema.invitation,
        apikey: schema.apikey,
        jwks: schema.jwks,
        rateLimit: schema.rateLimit,
        passkey: schema.passkey,
        ssoProvider: schema.ssoProvider,
        twoFactor: schema.twoFactor,
        oauthClient: schema.oauthClient,
        oauthResource: schema.oauthResource,
        oauthClientResource: schema.oauthClientResource,
        oauthRefreshToken: schema.oauthRefreshToken,
        oauthAccessToken: schema.oauthAccessToken,
        oauthConsent: schema.oauthConsent,
        oauthClientAssertion: schema.oauthClientAssertion,
      },
    }),
    emailAndPassword: {
      enabled: true,
      minPasswordLength: 8,
      maxPasswordLength: 128,
      autoSignIn: true,
      // DESIGN §4: signing in needs no proven address; proving it keeps the password when a magic link is used
      requireEmailVerification: false,
      // a reset signs every session out, the CLI's included (the pages say so)
      revokeSessionsOnPasswordReset: true,
      resetPasswordTokenExpiresIn: 3600,
      sendResetPassword: async ({ user, token }) => {
        await deps.mailer.send(passwordResetMail(config.iamUrl, user.email, token));
      },
      onPasswordReset: async ({ user }, request) => {
        if (request) actingUser.set(request, user.id);
        // every session ends, and so does every CLI login (an idle one has only its refresh token
        // left) and every MCP client's refresh token, whatever session it came through
        await deps.sessionRevocation.revokeAllOf(user.id);
        await deps.mailer.send(passwordChangedMail(config.iamUrl, user.email));
      },
    },
    emailVerification: {
      // DESIGN §4: sign-up answers with a session at once and mails a verification link
      sendOnSignUp: true,
      expiresIn: 24 * 3600,
      sendVerificationEmail: async ({ user, token }) => {
        await deps.mailer.send(verificationMail(config.iamUrl, user.email, token));
      },
    },
    // verification identifiers (password-reset tokens among them) are stored hashed, like magic-link tokens
    verification: { storeIdentifier: "hashed" },
    session: {
      expiresIn: config.sessionSeconds,
      // how the session was made (two-factor.ts), for the organization policy; set by our hook only
      additionalFields: {
        signInMethod: { type: "string", required: false, input: false },
        ssoProviderId: { type: "string", required: false, input: false },
      },
    },
    rateLimit: {
      enabled: config.rateLimits.enabled,
      storage: "database",
      window: 60,
      max: 300,
      customRules: {
        "/sign-in/email": { window: config.rateLimits.windowSeconds, max: config.rateLimits.signIn },
        "/sign-up/email": { window: config.rateLimits.windowSeconds, max: config.rateLimits.signUp },
        "/sign-in/magic-link": { window: config.rateLimits.windowSeconds, max: config.rateLimits.magicLink },
        "/magic-link/verify": { window: config.rateLimits.windowSeconds, max: config.rateLimits.signIn },
        // routes that send mail count as magic links do; routes that take a secret as sign-in does
        "/request-password-reset": { window: config.rateLimits.windowSeconds, max: config.rateLimits.magicLink },
        "/send-verification-email": { window: config.rateLimits.windowSeconds, max: config.rateLimits.magicLink },
        "/reset-password": { window: config.rateLimits.windowSeconds, max: config.rateLimits.signIn },
        "/change-password": { window: config.rateLimits.windowSeconds, max: config.rateLimits.signIn },
        // it answers whether a password is right: as guessable as signing in
        "/verify-password": { window: config.rateLimits.windowSeconds, max: config.rateLimits.signIn },
        "/verify-email": { window: config.rateLimits.windowSeconds, max: config.rateLimits.signIn },
        ...Object.fromEntries(PASSKEY_RATE_LIMITED.map((path) => [path, { window: config.rateLimits.windowSeconds, max: config.rateLimits.passkey }])),
        "/sign-in/sso": { window: config.rateLimits.windowSeconds, max: config.rateLimits.ssoStart },
        // codes and what changes the second factor (the plugin's own rule is 3 in 10 s)
        ...Object.fromEntries(
          ["/two-factor/verify-totp", "/two-factor/verify-backup-code", "/two-factor/enable", "/two-factor/disable", "/two-factor/get-totp-uri", "/two-factor/generate-backup-codes"].map((path) => [
            path,
            { window: config.rateLimits.windowSeconds, max: config.rateLimits.twoFactor },
          ]),
        ),
      },
    },
    disabledPaths: DISABLED_PATHS,
    advanced: {
      useSecureCookies: config.secureCookies,
      defaultCookieAttributes: { httpOnly: true, sameSite: "lax" },
      ipAddress: { ipAddressHeaders: [CLIENT_IP_HEADER] },
      // origin checks stay on in every environment, tests included
      disableOriginCheck: false,
    },
    databaseHooks: {
      session: {
        create: {
          // how the session was made: the library path that creates it (two-factor.ts)
          before: async (created, ctx) => {
            const method = await signInMethodOf(ctx, (created as { signInMethod?: string | null }).signInMethod);
            if (method) return { data: { ...created, ...method } };
          },
        },
        update: {
          // The library refreshes a session it reads once it is a day old: expiry = now + CORE_SESSION_SECONDS.
          // A CLI access token (one with a refresh token) keeps its own expiry (CORE_ACCESS_TOKEN_SECONDS):
          // `core org switch` and every other library call with it must not make an hour a week.
          before: async (changes, ctx) => {
            if (!("expiresAt" in changes)) return;
            const current = (ctx?.context.session as { session?: { id: string; expiresAt: Date } } | null | undefined)?.session;
            if (!current || !(await issuedWithRefreshToken(deps.db, current.id))) return;
            return { data: { ...changes, expiresAt: current.expiresAt } };
          },
        },
        delete: {
          before: async (deleted, ctx) => {
            if (ctx?.path === "/sign-out" && ctx.request) actingUser.set(ctx.request, deleted.userId);
            // the library revoking an unproven account's sessions; not the link's own session, which the
            // second step withholds until the code is given (two-factor.ts)
            const requestId = ctx?.path === "/magic-link/verify" ? ctx.request?.headers.get(REQUEST_ID_HEADER) : null;
            if (requestId && deleted.id !== ctx?.context.newSession?.session.id) deps.revocations.noteSession(requestId, deleted.userId);
          },
          // after the library's transaction commits; an expired session's clean-up revokes nothing
          after: async (deleted, ctx) => {
            if (new Date(deleted.expiresAt).getTime() <= Date.now()) return;
            const replacement = replacementOf(ctx, deleted);
            if (replacement) await deps.sessionRevocation.handOver(deleted.id, replacement);
            else await deps.sessionRevocation.revoke([deleted.id]);
          },
        },
      },
      account: {
        delete: {
          before: async (deleted, ctx) => {
            // only the magic link's proof deletes accounts (better-auth's revokeUnprovenAccountAccess)
            const requestId = ctx?.path === "/magic-link/verify" ? ctx.request?.headers.get(REQUEST_ID_HEADER) : null;
            if (requestId) deps.revocations.noteAccount(requestId, deleted.userId, deleted.providerId);
          },
        },
      },
    },
    hooks: {
      before: createAuthMiddleware(async (ctx) => {
        await twoFactorSteps.before(ctx);
        // a password change signs the others out unless the request says not to (the library's default is to keep them)
        const body = ctx.body as { revokeOtherSessions?: unknown } | undefined;
        if (ctx.path === "/change-password" && body && typeof body === "object" && body.revokeOtherSessions === undefined) {
          return { context: { body: { ...body, revokeOtherSessions: true } } };
        }
      }),
      after: createAuthMiddleware(async (ctx) => {
        if (CHANGES_PRINCIPALS.test(ctx.path)) deps.onPrincipalsChanged();
        if (ctx.path === "/change-password" && !isAPIError(ctx.context.returned) && (ctx.body as { revokeOtherSessions?: unknown } | undefined)?.revokeOtherSessions === true) {
          const kept = ctx.context.newSession;
          if (kept) await signOutOthers(ctx, kept.user.id, kept.session.id, "password_change");
        }
        // the library's own "sign out the others" and "sign out everywhere" delete the sessions that
        // have not lapsed; like ours, they end every CLI login and app token of the person too, idle
        // ones included (session-revocation.ts revokeAllOf), all but what the kept session holds
        if (SIGNS_OUT_THE_PERSON.includes(ctx.path) && !isAPIError(ctx.context.returned)) {
          const current = (ctx.context.session as { session?: { id: string; userId: string } } | null)?.session;
          if (current) await deps.sessionRevocation.revokeAllOf(current.userId, ctx.path === "/revoke-other-sessions" ? current.id : null);
        }
        // a magic link held at the second step is a redirect thrown by the hook: audited first, then thrown on
        const replaced = await twoFactorSteps.after(ctx).catch((held: unknown) => {
          if (!isAPIError(held)) throw held;
          return { held };
        });
        // the library signed an unproven account's sessions out: its CLI logins and apps' tokens end too,
        // idle ones included (session-revocation.ts revokeAllOf), all but the session the link made
        const unproven = ctx.path === "/magic-link/verify" ? deps.revocations.peek((ctx.headers ?? ctx.request?.headers)?.get(REQUEST_ID_HEADER) ?? "") : null;
        if (unproven) await deps.sessionRevocation.revokeAllOf(unproven, ctx.context.newSession?.session.id ?? null);
        if (ctx.path === "/list-sessions" && Array.isArray(ctx.context.returned)) {
          const current = (ctx.context.session as { session?: { id: string } } | null)?.session?.id;
          return ctx.json(withoutTokens(ctx.context.returned, current));
        }
        const action = AUDITED[ctx.path] ?? (ctx.path.startsWith("/organization/") ? "organization.library_action" : undefined);
        if (!action) return replaced && typeof replaced === "object" && "held" in replaced ? Promise.reject(replaced.held) : replaced;
        const returned = ctx.context.returned;
        // redirects (magic-link and email verify) are thrown as 302 APIErrors: successes, unless they carry ?error=
        const location = redirectTarget(returned);
        const refusedByRedirect = location !== null && new URL(location, config.iamUrl).searchParams.has("error");
        const failed = (isAPIError(returned) && Number(returned.statusCode) >= 400) || refusedByRedirect;
        const newSession = ctx.context.newSession;
        const session = ctx.context.session as { user?: { id: string } } | null;
        const noted = ctx.request ? actingUser.get(ctx.request) : undefined;
        const headers = ctx.headers ?? ctx.request?.headers;
        const body = (ctx.body ?? {}) as Record<string, unknown>;
        const target = passkeyAuditTarget(ctx.path, body, failed ? null : returned);
        await deps.audit.record({
          action,
          outcome: failed ? "failure" : "success",
          actorType: newSession || session?.user || noted || headers?.get(ACTOR_HEADER) ? "user" : "anonymous",
          actorId: newSession?.user.id ?? session?.user?.id ?? noted ?? headers?.get(ACTOR_HEADER) ?? null,
          orgId: typeof body.organizationId === "string" ? body.organizationId.slice(0, 128) : null,
          targetType: target?.targetType ?? (typeof body.email === "string" ? "email" : null),
          targetId: target?.targetId ?? (typeof body.email === "string" ? body.email.toLowerCase().slice(0, 320) : null),
          ip: headers?.get(CLIENT_IP_HEADER) ?? null,
          userAgent: headers?.get("user-agent") ?? null,
          requestId: headers?.get(REQUEST_ID_HEADER) ?? null,
          metadata: {
            path: ctx.path,
            ...(refusedByRedirect
              ? { code: new URL(location!, config.iamUrl).searchParams.get("error")?.slice(0, 64) ?? null }
              : failed
                ? { code: (returned as { body?: { code?: string } }).body?.code ?? null, status: Number((returned as { statusCode: unknown }).statusCode) }
                : {}),
          },
        });
        if (replaced && typeof replaced === "object" && "held" in replaced) throw replaced.held;
        return replaced;
      }),
    },
    plugins: [
      bearer(),
      magicLink({
        storeToken: "hashed",
        expiresIn: 600,
        disableSignUp: false,
        sendMagicLink: async ({ email, url }) => {
          await deps.mailer.send({
            to: email,
            subject: "Your Core sign-in link",
            text: `Sign in to Core by opening this link within 10 minutes:\n\n${url}\n\nIf you did not ask for it, ignore this message.`,
          });
        },
      }),
      organization({
        // organizations come from org-setup, bootstrap and the operators' route, never bare
        allowUserToCreateOrganization: false,
        // deleting an organization would orphan its platform; org-setup's rollback deletes directly
        disableOrganizationDeletion: true,
        creatorRole: "owner",
        invitationExpiresIn: config.invitationSeconds,
        sendInvitationEmail: async (data) => {
          await deps.mailer.send(
            invitationMail(config.iamUrl, {
              email: data.email,
              orgName: data.organization.name,
              invitationId: data.id,
              role: String(data.role ?? "member"),
              inviter: { name: data.inviter.user.name, email: data.inviter.user.email },
              expiresAt: new Date(data.invitation.expiresAt),
            }),
          );
        },
        schema: {
          organization: {
            additionalFields: {
              orgType: { type: "string", required: false, input: false, defaultValue: "tenant" },
              platformId: { type: "string", required: false, input: false },
            },
          },
        },
      }),
      apiKey({
        defaultPrefix: "core_",
        enableMetadata: true,
        // the plugin's default caps every key at 10 verifications a day; our limits live elsewhere
        rateLimit: { enabled: false },
      }),
      jwt({
        jwks: {
          keyPairConfig: { alg: "EdDSA", crv: "Ed25519" },
          rotationInterval: 60 * 60 * 24 * 30,
          gracePeriod: 60 * 60 * 24 * 7,
        },
        jwt: { issuer: config.iamUrl, audience: "iam", expirationTime: "5m" },
        disableSettingJwtHeader: true,
      }),
      passkeyPlugin(config),
      twoFactorPlugin(),
      // describes the library's routes for IAM's own description (auth-description.ts), never served
      openAPI({ disableDefaultReference: true }),
      ssoPlugin(),
      ...oauthProviderPlugins({
        db: deps.db,
        config,
        ...deps.oauthGrants,
        // a client known by its metadata document is registered by its first use: audited as /oauth2/register is
        recordRegistration: ({ clientId, refused, headers }) =>
          deps.audit.record({
            action: "oauth.client.register",
            outcome: refused ? "failure" : "success",
            actorType: headers?.get(ACTOR_HEADER) ? "user" : "anonymous",
            actorId: headers?.get(ACTOR_HEADER) ?? null,
            targetType: "oauth_client",
            targetId: clientId.slice(0, 512),
            ip: headers?.get(CLIENT_IP_HEADER) ?? null,
            userAgent: headers?.get("user-agent") ?? null,
            requestId: headers?.get(REQUEST_ID_HEADER) ?? null,
            metadata: { source: "client_metadata_document", ...(refused && { reason: refused }) },
          }),
      }),
    ],
  });
}

export type Auth = ReturnType<typeof createAuth>;

/** The library's routes that sign every session of the person out, or every one but the caller's. */
const SIGNS_OUT_THE_PERSON = ["/revoke-other-sessions", "/revoke-sessions"];

/** The two-factor routes that replace the caller's session with a new one (the plugin's token rotation). */
const REPLACING_PATHS = ["/two-factor/verify-totp", "/two-factor/verify-backup-code", "/two-factor/enable", "/two-factor/disable"];

/**
 * The id of the session the library made in place of `deleted` during this request: a two-factor
 * route rotating the caller's own session (the new one is made before the old is deleted). Null for
 * any other deletion, which ends the session (session-revocation.ts).
 */
function replacementOf(ctx: { path?: string; context: { session?: unknown; newSession?: { session: { id: string; userId: string } } | null } } | null | undefined, deleted: { id: string; userId: string }): string | null {
  if (!ctx?.path || !REPLACING_PATHS.includes(ctx.path)) return null;
  const current = (ctx.context.session as { session?: { id: string } } | null | undefined)?.session?.id;
  const made = ctx.context.newSession?.session;
  return current === deleted.id && made && made.userId === deleted.userId && made.id !== deleted.id ? made.id : null;
}

/** Whether a session is a CLI access token: one issued together with a refresh token (device-flow.ts). */
async function issuedWithRefreshToken(db: Db, sessionId: string): Promise<boolean> {
  const [found] = await db.select({ id: schema.refreshTokens.id }).from(schema.refreshTokens).where(eq(schema.refreshTokens.sessionId, sessionId)).limit(1);
  return found !== undefined;
}

export function verificationMail(iamUrl: string, email: string, token: string) {
  return {
    to: email,
    subject: "Confirm your email address for Core",
    text:
      `Confirm that ${email} is your address by opening this link within 24 hours:\n\n${iamUrl}/verify-email?token=${encodeURIComponent(token)}\n\n` +
      "A confirmed address keeps your password and sessions when you sign in with an emailed link.\n" +
      "If you did not create a Core account, ignore this message.\n",
  };
}

export function passwordResetMail(iamUrl: string, email: string, token: string) {
  return {
    to: email,
    subject: "Set a new Core password",
    text:
      `Set a new password for ${email} by opening this link within 1 hour:\n\n${iamUrl}/reset-password?token=${encodeURIComponent(token)}\n\n` +
      "Setting it signs every session of the account out, command-line logins included.\n" +
      "If you did not ask for it, ignore this message: your password stays as it is.\n",
  };
}

export function passwordChangedMail(iamUrl: string, email: string) {
  return {
    to: email,
    subject: "Your Core password was changed",
    text:
      `The password of ${email} on Core was just set anew, and every session was signed out.\n\n` +
      `If this was not you, set a new password at once: ${iamUrl}/forgot-password\n`,
  };
}

/** The invitation mail: who invites to what with which role, and the page that answers it. */
export function invitationMail(iamUrl: string, invite: { email: string; orgName: string; invitationId: string; role: string; inviter: { name: string; email: string }; expiresAt: Date }) {
  const role = invite.role || "member";
  return {
    to: invite.email,
    subject: `${invite.inviter.name} invites you to ${invite.orgName} on Core`,
    text:
      `${invite.inviter.name} (${invite.inviter.email}) invites you to join ${invite.orgName} on Core as ${/^[aeiou]/.test(role) ? "an" : "a"} ${role}.\n\n` +
      `Accept or decline here (sign in, or create an account, with ${invite.email}):\n` +
      `  ${iamUrl}/invitations/${invite.invitationId}\n\n` +
      `The invitation is open until ${invite.expiresAt.toISOString().slice(0, 10)}. If you did not expect it, ignore this mail.\n`,
  };
}
