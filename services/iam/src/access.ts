import type { Context } from "hono";
import { ApiError, clientIpOf, forbidden, requestIdOf, unauthenticated } from "@core/kit";
import { bearerToken, callerOf, guardCaller, holds, MAX_CREDENTIAL_LENGTH, policyRefusal, settledCallerOf, type Caller, type CredentialResolvers, type Principal } from "@core/service-auth";
import type { AuditInput } from "./audit.js";
import { allowedWhileRestricted } from "./org-policy.js";
import { sessionTokenOf } from "./session-token.js";

/**
 * A session that does not meet its organization's policy may only comply (ADR 0023): anything else
 * on IAM is 403 FORBIDDEN, its details naming the policy and the page that resolves it.
 */
export function refuseRestricted(c: Context, principal: Principal, path = c.req.path): void {
  const restriction = principal.restriction;
  if (!restriction || allowedWhileRestricted(path)) return;
  throw policyRefusal(restriction);
}

/**
 * The session token the auth library will read from this request (session-token.ts), when the
 * request carries one; every IAM check of a session reads it through here.
 */
export function sessionTokenOfRequest(c: Context, options: Pick<SessionOptions, "secret" | "secureCookies" | "cookieOnly">) {
  return sessionTokenOf(c.req.raw.headers, options);
}

export interface SessionCaller {
  principal: Principal;
  token: string;
  via: "cookie" | "bearer";
}

export interface SessionOptions {
  secret: string;
  /** the library's session cookie is then `__Secure-` prefixed (session-token.ts) */
  secureCookies: boolean;
  trustedOrigins: string[];
  principals: { bySessionToken(token: string): Promise<Principal | null> };
  /** org-setup accepts the session cookie only (spec §5.2) */
  cookieOnly?: boolean;
}

/**
 * The caller's IAM session, from the cookie or (unless cookie-only) a bearer token. A write made
 * with a cookie must come from a trusted origin (CSRF); bearer tokens are not sent by browsers
 * on their own, so they need no such check.
 */
export async function requireSession(c: Context, options: SessionOptions): Promise<SessionCaller> {
  // settled once per request: the route guard in app.ts and the handler ask the same question
  const key = options.cookieOnly ? "core:session-cookie" : "core:session";
  const memo = c.get(key as never) as SessionCaller | undefined;
  if (memo) return memo;
  const session = await resolveSession(c, options);
  c.set(key as never, session as never);
  return session;
}

async function resolveSession(c: Context, options: SessionOptions): Promise<SessionCaller> {
  const found = sessionTokenOfRequest(c, options);
  if (!found) throw unauthenticated(options.cookieOnly ? "Sign in first: this route needs a session cookie" : "Sign in first");
  if (found.token.length > MAX_CREDENTIAL_LENGTH) throw unauthenticated("Your session is invalid or has expired");
  const principal = await options.principals.bySessionToken(found.token);
  if (!principal) throw unauthenticated("Your session is invalid or has expired");
  refuseRestricted(c, principal);
  if (found.via === "cookie" && !["GET", "HEAD", "OPTIONS"].includes(c.req.method)) requireTrustedOrigin(c, options.trustedOrigins);
  return { principal, token: found.token, via: found.via };
}

export function requireTrustedOrigin(c: Context, trusted: string[]): void {
  const origin = c.req.header("origin") ?? originOf(c.req.header("referer"));
  if (!origin || origin === "null" || !trusted.includes(origin)) {
    throw forbidden("Cross-origin request refused: this write needs an Origin header from a trusted origin");
  }
}

function originOf(url: string | undefined): string | undefined {
  if (!url) return undefined;
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}

/** A person (session or API key) or a service; 401 without a credential. */
export async function requireCaller(c: Context, resolvers: CredentialResolvers, options: SessionOptions): Promise<Caller> {
  // IAM also takes its own session cookie (without another credential), and the signed form of a
  // bearer session the library takes (session-token.ts); a plain bearer token, an API key or a
  // service token goes to callerOf, as in every service
  const session = c.req.header("x-api-key") ? null : sessionTokenOfRequest(c, options);
  if (session && (session.via === "cookie" ? !c.req.header("authorization") : session.token !== bearerToken(c))) {
    return { kind: "principal", principal: (await requireSession(c, options)).principal };
  }
  const caller = await callerOf(c, resolvers);
  if (!caller) throw unauthenticated();
  if (caller.kind === "principal") refuseRestricted(c, caller.principal);
  return caller;
}

/** 401 with the Basic challenge of `POST /api/core/service-token` (RFC 7617). */
export const basicChallenge = () =>
  new ApiError(401, "UNAUTHENTICATED", "Authenticate with Basic base64(serviceId:secret)", null, {
    "www-authenticate": 'Basic realm="core-services"',
  });

/** A service with a service token addressed to IAM; anyone else is 401 (DESIGN §4 contracts). */
export async function requireServiceCaller(c: Context, resolvers: CredentialResolvers): Promise<ServiceCaller> {
  return asServiceCaller(await callerOf(c, resolvers));
}

/**
 * `requireServiceCaller` as a route guard: settled at once, without a promise, when the credential
 * is known already (ADR 0005: the hot routes), else a promise of the same check.
 */
export function guardServiceCaller(c: Context, resolvers: CredentialResolvers): Promise<unknown> | undefined {
  return guardCaller(c, resolvers, asServiceCaller);
}

/**
 * The service caller the route's guard has already settled, without waiting (ADR 0005: the hot
 * routes); 401 like `requireServiceCaller` when it is not one, or when no guard has run.
 */
export function settledServiceCaller(c: Context): ServiceCaller {
  return asServiceCaller(settledCallerOf(c));
}

type ServiceCaller = Extract<Caller, { kind: "service" }>;

function asServiceCaller(caller: Caller | null | undefined): ServiceCaller {
  if (caller?.kind !== "service") throw unauthenticated("This route is for services: present a service token");
  return caller;
}

/** Services pass; principals need `permission` within the organization (operators everywhere). */
export function requirePermission(caller: Caller, permission: string, scope: { orgId?: string | null; platformId?: string | null } = {}): void {
  if (caller.kind === "service") return;
  if (!holds(caller.principal, permission, scope)) throw forbidden(`You need the ${permission} permission here`);
}

/** Who did it, for the audit log. */
export function actorOf(c: Context, caller: Caller | null): Pick<AuditInput, "actorType" | "actorId" | "ip" | "userAgent" | "requestId"> {
  const base = { ip: clientIpOf(c), userAgent: c.req.header("user-agent") ?? null, requestId: requestIdOf(c) };
  if (!caller) return { ...base, actorType: "anonymous", actorId: null };
  if (caller.kind === "service") return { ...base, actorType: "service", actorId: caller.serviceId };
  return { ...base, actorType: caller.principal.type, actorId: caller.principal.userId };
}
