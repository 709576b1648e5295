import type { Context } from "hono";
import { getCookie } from "hono/cookie";
import { clientIpOf, requestIdOf, traceOf, unauthenticated, type TraceSource } from "@core/kit";
import type { Caller, Principal } from "./principal.js";

/**
 * The request a credential came with: the client's address (IAM limits wrong API keys per address),
 * the request id (IAM logs its side of the check under the same id) and its trace (the check is a
 * call in it, DESIGN §10).
 */
export interface PresentedBy {
  ip: string;
  requestId?: string;
  trace?: TraceSource;
}

/** How a service turns each kind of credential into a caller (DESIGN §4). */
export interface CredentialResolvers {
  /** an IAM session token; null when unknown, expired or revoked */
  session(token: string, presentedBy?: PresentedBy): Promise<Principal | null>;
  /** a raw API key; null when unknown, expired or disabled */
  apiKey(key: string, presentedBy?: PresentedBy): Promise<Principal | null>;
  /** a service token (JWT); null when its signature, issuer, audience or lifetime is wrong */
  serviceToken(jwt: string): Promise<{ serviceId: string } | null>;
  /**
   * Valid credentials already in memory, answered without waiting (undefined: ask as above). The
   * hot path spares several waits per request with them (ADR 0005).
   */
  known?: {
    session(token: string): Principal | undefined;
    /** the service id of a service token that verified already */
    serviceToken(jwt: string): string | undefined;
  };
}

const CALLER = "core:caller";

/**
 * The longest session token or API key IAM takes (its validate routes refuse longer ones with 400).
 * Longer credentials are wrong credentials: 401 here, without asking IAM (issue 10: a refusal is
 * not an outage).
 */
export const MAX_CREDENTIAL_LENGTH = 512;
const JWT_SHAPE = /^eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/** Whether a bearer token has the shape of a JWT (a service or access token) rather than a session token. */
export const isJwt = (token: string): boolean => JWT_SHAPE.test(token);

/** The bearer token of a request, if any. */
export function bearerToken(c: Context): string | null {
  return bearerOf(c.req.header("authorization"));
}

/** The bearer token of an `Authorization` header, if any. */
export function bearerOf(header: string | undefined): string | null {
  if (!header) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1] ?? null;
}

/**
 * The caller of this request, or null when it carries no credential. Throws 401 for a credential
 * that is present but invalid: a wrong credential is never treated as no credential.
 * Resolved once per request.
 */
export function callerOf(c: Context, resolvers: CredentialResolvers): Promise<Caller | null> {
  // the pending answer is shared, so asking twice (route guard, then handler) resolves once
  let pending = c.get(CALLER as never) as Promise<Caller | null> | undefined;
  if (!pending) {
    const known = knownCaller(c, resolvers);
    if (known) c.set(SETTLED as never, known as never);
    pending = known
      ? Promise.resolve(known)
      : resolveCaller(c, resolvers).then((caller) => {
          c.set(SETTLED as never, caller as never);
          return caller;
        });
    c.set(CALLER as never, pending as never);
  }
  return pending;
}

function knownCaller(c: Context, resolvers: CredentialResolvers): Caller | undefined {
  return knownCallerOf(c.req.header("authorization"), c.req.header("x-api-key"), resolvers);
}

/**
 * The caller when its bearer credential is known valid already, from the request's `Authorization`
 * and `x-api-key` headers; undefined when it must be asked. API keys are always asked (IAM counts
 * them per client).
 */
export function knownCallerOf(authorization: string | undefined, apiKey: string | undefined, resolvers: CredentialResolvers): Caller | undefined {
  if (!resolvers.known || apiKey) return undefined;
  const token = bearerOf(authorization);
  if (!token) return undefined;
  if (JWT_SHAPE.test(token)) {
    const serviceId = resolvers.known.serviceToken(token);
    return serviceId ? { kind: "service", serviceId } : undefined;
  }
  const principal = resolvers.known.session(token);
  return principal ? { kind: "principal", principal } : undefined;
}

const SETTLED = "core:settledCaller";

/**
 * The caller a route guard has already resolved (`callerOf`), without waiting: null for a request
 * without a credential, undefined when nothing has resolved it yet. For hot routes whose guard
 * runs before them (ADR 0005); a route that cannot be sure of its guard awaits `callerOf`.
 */
export function settledCallerOf(c: Context): Caller | null | undefined {
  return c.get(SETTLED as never) as Caller | null | undefined;
}

const presentedBy = (c: Context): PresentedBy => ({ ip: clientIpOf(c), requestId: requestIdOf(c), trace: traceOf(c) });

async function resolveCaller(c: Context, resolvers: CredentialResolvers): Promise<Caller | null> {
  const apiKey = c.req.header("x-api-key");
  if (apiKey) {
    if (apiKey.length > MAX_CREDENTIAL_LENGTH) throw unauthenticated("Invalid API key");
    const principal = await resolvers.apiKey(apiKey, presentedBy(c));
    if (!principal) throw unauthenticated("Invalid API key");
    return { kind: "principal", principal };
  }
  const token = bearerToken(c);
  if (!token) return null;
  if (JWT_SHAPE.test(token)) {
    const service = await resolvers.serviceToken(token);
    if (!service) throw unauthenticated("Invalid service token");
    return { kind: "service", serviceId: service.serviceId };
  }
  if (token.length > MAX_CREDENTIAL_LENGTH) throw unauthenticated("Invalid or expired session");
  const principal = await resolvers.session(token, presentedBy(c));
  if (!principal) throw unauthenticated("Invalid or expired session");
  return { kind: "principal", principal };
}

/** The caller, or 401 when the request carries no credential. */
export async function requireCaller(c: Context, resolvers: CredentialResolvers): Promise<Caller> {
  return present(await callerOf(c, resolvers));
}

/**
 * `requireCaller` as the kit's `guard` (a resource service's credential check): settled at once,
 * without a promise, when the credential is known valid already (ADR 0005), else a promise of the
 * same check. `accept` throws for a caller the routes behind it do not take (by default: none, 401;
 * IAM's service-only routes: anyone but a service). Routes read the caller with `requireCaller` or
 * `settledCallerOf`.
 */
export function guardCaller(c: Context, resolvers: CredentialResolvers, accept: (caller: Caller | null) => unknown = present): Promise<unknown> | undefined {
  const pending = callerOf(c, resolvers);
  const settled = settledCallerOf(c);
  if (settled === undefined) return pending.then(accept);
  accept(settled);
  return undefined;
}

function present(caller: Caller | null): Caller {
  if (!caller) throw unauthenticated();
  return caller;
}

/**
 * IAM's session cookie (better-auth's; the `__Secure-` name on https). Its value is
 * `<session token>.<signature>`: the signature is IAM's (its auth secret), and the token alone is
 * the credential, checked with IAM's `POST /api/validate-session` like a bearer token.
 */
export const SESSION_COOKIE_NAMES = ["__Secure-better-auth.session_token", "better-auth.session_token"] as const;

/** The IAM session token in this request's session cookie, or null. */
export function sessionCookieToken(c: Context): string | null {
  for (const name of SESSION_COOKIE_NAMES) {
    const value = getCookie(c, name);
    if (!value) continue;
    const dot = value.lastIndexOf(".");
    const token = dot > 0 ? value.slice(0, dot) : value;
    return token.length > 0 && token.length <= MAX_CREDENTIAL_LENGTH && /^[A-Za-z0-9_-]+$/.test(token) ? token : null;
  }
  return null;
}

/**
 * The caller of a page a browser opens (DESIGN §6.11: an invoice, its PDF): the request's own
 * credential as `callerOf` resolves it, or else, on a GET or HEAD only, the IAM session cookie the
 * browser sent. A cookie is sent by the browser on its own, so it never authorizes a write here (no
 * CSRF), and an unknown or expired one is no credential (null: the page sends the browser to sign
 * in) rather than a 401. Routes that accept it call this before `requireCaller`, which then answers
 * the same caller.
 */
export function browserCallerOf(c: Context, resolvers: CredentialResolvers): Promise<Caller | null> {
  const resolved = c.get(CALLER as never) as Promise<Caller | null> | undefined;
  if (resolved) return resolved;
  const explicit = c.req.header("authorization") !== undefined || c.req.header("x-api-key") !== undefined;
  const token = !explicit && (c.req.method === "GET" || c.req.method === "HEAD") ? sessionCookieToken(c) : null;
  if (!token) return callerOf(c, resolvers);
  const pending = resolvers.session(token, presentedBy(c)).then((principal): Caller | null => {
    const caller: Caller | null = principal ? { kind: "principal", principal } : null;
    c.set(SETTLED as never, caller as never);
    return caller;
  });
  c.set(CALLER as never, pending as never);
  return pending;
}
