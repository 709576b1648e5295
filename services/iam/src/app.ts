import type { Context } from "hono";
import { createMailer, createServiceApp, systemClock, type Clock, type HealthCheck, type Logger, type Mailer, type ServiceMetrics } from "@core/kit";
import { basicChallenge, guardServiceCaller, requireCaller, requireSession } from "./access.js";
import type { CredentialResolvers } from "@core/service-auth";
import type { Db } from "@core/storage";
import { AuditLog } from "./audit.js";
import { createAuth, type Auth } from "./auth.js";
import { authLibraryDescription } from "./auth-description.js";
import type { IamConfig } from "./config.js";
import { UnprovenAccessRevocations } from "./unproven-access.js";
import { PrincipalResolver } from "./principals.js";
import { SessionRevocation } from "./session-revocation.js";
import { RateLimiter } from "./rate-limiter.js";
import { RegistryClient } from "./registry-client.js";
import { ServiceTokens } from "./service-tokens.js";
import { ApiKeyResolver } from "./api-keys.js";
import { SsoConnections } from "./sso-connections.js";
import { auditRoutes } from "./routes/audit.js";
import { auditEndpointRoutes } from "./routes/audit-endpoints.js";
import { grantRoutes } from "./routes/grants.js";
import { invitationRoutes } from "./routes/invitations.js";
import { orgSetupRoutes } from "./routes/org-setup.js";
import { organizationRoutes } from "./routes/organizations.js";
import { orgPolicyRoutes } from "./routes/org-policy.js";
import { platformStatusRoutes } from "./routes/platform-status.js";
import { profileRoutes } from "./routes/profile.js";
import { roleRoutes } from "./routes/roles.js";
import { serviceRoutes } from "./routes/service-auth.js";
import { sessionRoutes } from "./routes/sessions.js";
import { ssoRoutes } from "./routes/sso.js";
import { authLibraryRoutes } from "./routes/auth-library.js";
import { oauthRoutes } from "./routes/oauth.js";
import { cliRoutes, requireCliPrincipal } from "./routes/cli.js";
import { DeviceFlow } from "./device-flow.js";
import { isPagePath, pageRoutes } from "./pages/index.js";

export interface IamDeps {
  db: Db;
  logger: Logger;
  config: IamConfig;
  /** service id → secret (DESIGN §4) */
  serviceCredentials: Map<string, string>;
  clock?: Clock;
  mailer?: Mailer;
  /** fetch used for calls to the platform registry (tests point it at a failing registry) */
  fetch?: typeof fetch;
  healthChecks?: HealthCheck[];
  /** what `/health/ready` checks: the database and its migrations */
  readinessChecks?: HealthCheck[];
  metrics?: ServiceMetrics;
}

/** Everything IAM's route modules share. */
export interface IamContext {
  db: Db;
  clock: Clock;
  logger: Logger;
  config: IamConfig;
  auth: Auth;
  audit: AuditLog;
  principals: PrincipalResolver;
  apiKeys: ApiKeyResolver;
  /** drops cached principals everywhere in this process: after revocations and permission changes */
  forgetPrincipals: () => void;
  serviceTokens: ServiceTokens;
  registry: RegistryClient;
  rateLimiter: RateLimiter;
  deviceFlow: DeviceFlow;
  /** ends sessions and everything made through them: the one way a session ends (session-revocation.ts) */
  sessionRevocation: SessionRevocation;
  credentials: CredentialResolvers;
  mailer: Mailer;
  revocations: UnprovenAccessRevocations;
  /** connections to organizations' identity providers, through the SSRF guard (ADR 0026) */
  ssoConnections: SsoConnections;
  session: { secret: string; secureCookies: boolean; trustedOrigins: string[]; principals: PrincipalResolver };
}

/** IAM's HTTP app (spec §4.2, §4.3; DESIGN §4). */
export function createApp(deps: IamDeps) {
  const clock = deps.clock ?? systemClock;
  const { db, config, logger } = deps;
  const mailer = deps.mailer ?? createMailer({ smtpUrl: config.smtpUrl, from: config.mailFrom, outboxDir: config.outboxDir, logger });
  const audit = new AuditLog(db, clock, logger);
  const principals = new PrincipalResolver(db, clock);
  const forgetPrincipals = () => {
    principals.forget();
    apiKeys.forget();
  };
  const revocations = new UnprovenAccessRevocations();
  const sessionRevocation = new SessionRevocation(db, clock, () => forgetPrincipals());
  const deviceFlow = new DeviceFlow(db, clock, config, sessionRevocation);
  const auth = createAuth({
    db,
    logger,
    config,
    mailer,
    audit,
    onPrincipalsChanged: forgetPrincipals,
    revocations,
    sessionRevocation,
    oauthGrants: {
      clock,
      actingOrganization: (userId, active) => principals.actingOrganization(userId, active),
      grantedPermissions: (userId, orgId, sessionId) => principals.oauthPermissions(userId, orgId, sessionId),
    },
  });
  const rateLimiter = new RateLimiter(db, clock);
  const apiKeys: ApiKeyResolver = new ApiKeyResolver(auth, principals, { limiter: rateLimiter, config: config.rateLimits });
  const serviceTokens = new ServiceTokens(auth, config.iamUrl, deps.serviceCredentials, clock);
  const credentials: CredentialResolvers = {
    session: (token) => principals.bySessionToken(token),
    // a key sent to IAM itself counts against its client like one sent through a registry
    apiKey: async (key, by) => {
      const check = await apiKeys.checkFrom(key, `iam:${by?.ip ?? "unknown"}`);
      if (check.valid) return check.principal;
      await audit.record({ action: "apikey.validate", outcome: "failure", actorType: "anonymous", ip: by?.ip ?? null, requestId: by?.requestId ?? null, metadata: { code: check.code, route: "iam" } });
      return null;
    },
    serviceToken: (jwt) => serviceTokens.verify(jwt),
    known: {
      session: (token) => principals.cachedSessionToken(token) ?? undefined,
      serviceToken: (jwt) => serviceTokens.known(jwt),
    },
  };
  const ctx: IamContext = {
    db,
    clock,
    logger,
    config,
    auth,
    audit,
    principals,
    apiKeys,
    forgetPrincipals,
    serviceTokens,
    registry: new RegistryClient(config.registryUrl, serviceTokens, deps.fetch),
    rateLimiter,
    deviceFlow,
    sessionRevocation,
    credentials,
    mailer,
    revocations,
    ssoConnections: new SsoConnections(config.ssoProviders),
    session: { secret: config.authSecret, secureCookies: config.secureCookies, trustedOrigins: config.trustedOrigins, principals },
  };

  // who is calling is settled before any input is validated (no credential is 401, never 400);
  // each route still decides what the caller may do
  const guards: [RegExp, (c: Context) => Promise<unknown> | undefined][] = [
    [/^\/oauth\/device\/(authorize|deny)$/, (c) => requireSession(c, ctx.session)],
    [/^\/api\/v1\/cli\//, (c) => requireCliPrincipal(c, ctx)],
    [/^\/api\/core\/org-setup$/, (c) => requireSession(c, { ...ctx.session, cookieOnly: true })],
    [/^\/api\/(validate-session|core\/apikey\/validate)$/, (c) => guardServiceCaller(c, credentials)],
    [/^\/api\/core\/service-token$/, async (c) => {
      if (!/^Basic\s/i.test(c.req.header("authorization") ?? "")) throw basicChallenge();
    }],
    [/^\/api\/(core\/session|core\/bootstrap|sessions|audit\/|auth\/profile$)/, (c) => requireSession(c, ctx.session)],
    [/^\/(api\/core|internal)\//, (c) => requireCaller(c, credentials, ctx.session)],
  ];

  const app = createServiceApp({
    service: "iam",
    title: "Core IAM",
    description: "Identity and access: sessions, organizations, roles, grants, invitations, API keys, service tokens, audit.",
    logger,
    healthChecks: deps.healthChecks ?? [],
    readinessChecks: deps.readinessChecks ?? [],
    metrics: deps.metrics,
    // spec §2.3: the whoami route's errors carry no details
    omitsErrorDetails: (path) => path.startsWith("/api/v1/cli/"),
    extendDescription: authLibraryDescription(auth),
    // the auth library, the OAuth endpoints (forms, RFC 6749) and the pages' forms read their own bodies
    ownsBody: (path) => (path.startsWith("/api/auth/") && path !== "/api/auth/profile") || path.startsWith("/oauth/") || isPagePath(path),
    // a guard settled at once (a known credential) returns nothing to wait for
    guard: (c) => guards.find(([pattern]) => pattern.test(c.req.path))?.[1](c),
    // secrets in paths that have no shape of their own (docs/vault/cross-cutting/security.md#Logs):
    // the library's reset link, and an invitation's id, which its mailed link carries
    secretPathParameters: {
      "/api/auth/reset-password/:token": ["token"],
      "/invitations/:id": ["id"],
      "/api/core/organizations/:orgId/invitations/:invitationId": ["invitationId"],
    },
  });

  sessionRoutes(app, ctx);
  serviceRoutes(app, ctx);
  orgSetupRoutes(app, ctx);
  organizationRoutes(app, ctx);
  orgPolicyRoutes(app, ctx);
  roleRoutes(app, ctx);
  grantRoutes(app, ctx);
  invitationRoutes(app, ctx);
  platformStatusRoutes(app, ctx);
  auditRoutes(app, ctx);
  auditEndpointRoutes(app, ctx);
  profileRoutes(app, ctx);
  oauthRoutes(app, ctx);
  cliRoutes(app, ctx);
  ssoRoutes(app, ctx);
  pageRoutes(app, ctx);

  // better-auth's own routes (spec §4.2), after ours so /api/auth/profile stays ours
  authLibraryRoutes(app, ctx);

  return Object.assign(app, { ctx });
}

export type IamApp = ReturnType<typeof createApp>;
