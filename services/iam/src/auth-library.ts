import { eq } from "drizzle-orm";
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { ApiError, clientIpOf, errorResponse, loggablePathOf, upstreamUnavailable, withRequestId, type ErrorCode } from "@core/kit";
import { MAX_CREDENTIAL_LENGTH } from "@core/service-auth";
import { sessionTokenOfRequest } from "./access.js";
import { gateLibraryRequest } from "./policy-gate.js";
import type { IamContext } from "./app.js";
import { user } from "./db/schema.js";
import { isOutage, OUTAGE_RETRY_SECONDS } from "./outage.js";
import { unverifiedRegistrationAsRefusal } from "./passkeys.js";
import { revokedNoticeCookie, tellOwnerOfRevokedAccess, type RevokedAccess } from "./unproven-access.js";
import { ACTOR_HEADER, CLIENT_IP_HEADER, DISABLED_PATHS, isAuditedLibraryPath, REQUEST_ID_HEADER, UNSERVED_ROUTES, type Auth } from "./auth.js";

interface LibraryEndpoint {
  path?: string;
  options?: { method?: string | string[]; metadata?: { SERVER_ONLY?: boolean } };
}

/**
 * Whether the library serves `method path` (a path under /api/auth): every endpoint it routes over
 * HTTP, less the disabled ones. Anything else is our 404 envelope, not the library's bare 404.
 */
export function libraryServes(auth: Auth): (method: string, path: string) => boolean {
  const routes = Object.values(auth.api as Record<string, LibraryEndpoint>)
    .filter((e) => e.path && !e.options?.metadata?.SERVER_ONLY && !DISABLED_PATHS.includes(e.path))
    .map((e) => ({
      methods: new Set([e.options?.method ?? []].flat().filter((m) => !UNSERVED_ROUTES.includes(`${m} ${e.path}`))),
      pattern: new RegExp(`^/api/auth${e.path!.replace(/:\w+/g, "[^/]+")}$`),
    }));
  return (method, path) => routes.some((r) => r.methods.has(method) && r.pattern.test(path));
}

const FETCH_METADATA = ["sec-fetch-site", "sec-fetch-mode", "sec-fetch-dest", "sec-fetch-user"];

/**
 * A request no browser sent on a user's behalf: no cookie, no Origin or Referer, and no browser's
 * cross-site marker. Such a request cannot be a CSRF (DESIGN §4), yet the library demands an Origin
 * of any request with fetch metadata, which Node's fetch and many HTTP clients send on their own
 * (`Sec-Fetch-Mode: cors`): scripts and apps could not sign in. A foreign Origin is still refused,
 * and a cookie-carrying write still needs a trusted one.
 */
function isCookielessScript(headers: Headers): boolean {
  if (headers.has("cookie") || headers.has("origin") || headers.has("referer")) return false;
  const site = headers.get("sec-fetch-site");
  return site === null || site === "none";
}

/**
 * A request through better-auth's own handler, exactly as its `/api/auth/*` routes run it (spec
 * §4.2): with the library's origin checks, rate limits and hooks. Our client address and request
 * id, and the user of its session (for the audit log), ride along in headers a client cannot set.
 */
export async function callAuthLibrary(c: Context, deps: LibraryDeps, request: Request): Promise<Response> {
  const path = new URL(request.url).pathname.slice("/api/auth".length);
  // the policy gate judges the request first, and may send it on with a body of its own (policy-gate.ts)
  const gated = await gateLibraryRequest(c, deps, path, request);
  if (gated instanceof ApiError) return withRequestId(c, errorResponse(c, gated));
  const headers = new Headers(gated.headers);
  const requestId: string = c.get("requestId");
  // our values replace anything a client sent under these names
  headers.set(CLIENT_IP_HEADER, clientIpOf(c));
  headers.set(REQUEST_ID_HEADER, requestId);
  headers.delete(ACTOR_HEADER);
  const actor = isAuditedLibraryPath(path) ? await sessionUserOf(c, deps) : null;
  if (actor) headers.set(ACTOR_HEADER, actor);
  if (isCookielessScript(headers)) for (const name of FETCH_METADATA) headers.delete(name);
  const response = await unverifiedRegistrationAsRefusal(deps.db, new URL(request.url).pathname, await deps.auth.handler(new Request(gated, { headers })));
  const revoked = deps.revocations.take(requestId);
  if (revoked) return withRequestId(c, await afterRevocation(c, deps, revoked, response));
  if (response.status === 429) return withRequestId(c, await afterRateLimit(c, deps, request, response));
  if (response.status >= 400) return withRequestId(c, await withErrorBody(c, deps, response));
  return withRequestId(c, response);
}

/** The library's 429: with `Retry-After` (it names it otherwise), and audited. */
async function afterRateLimit(c: Context, deps: LibraryDeps, request: Request, response: Response): Promise<Response> {
  const limited = new Response(response.body, response);
  limited.headers.set("retry-after", response.headers.get("x-retry-after") ?? "60");
  await deps.audit.record({
    action: "auth.rate_limited",
    outcome: "failure",
    actorType: "anonymous",
    ip: clientIpOf(c),
    userAgent: c.req.header("user-agent") ?? null,
    requestId: c.get("requestId"),
    metadata: { path: loggablePathOf(c, new URL(request.url).pathname) },
  });
  return limited;
}

const EMPTY_ERROR_CODES: Record<number, ErrorCode> = { 400: "BAD_REQUEST", 401: "UNAUTHENTICATED", 403: "FORBIDDEN", 404: "NOT_FOUND" };

/**
 * Some library refusals have no body (organization routes without a session answer a bare 401):
 * those get our envelope, so every error a client meets says what it is. A failure of the library
 * while the database does not answer is an outage, 503 UPSTREAM_UNAVAILABLE with Retry-After, as
 * every service answers one (the library keeps the cause to itself, and takes a session it could
 * not read for none: a 401 to a request with a session is asked about too); any other 5xx is our
 * 500: logged with the request id, its text never shown.
 */
async function withErrorBody(c: Context, deps: LibraryDeps, response: Response): Promise<Response> {
  const mayBeOutage = response.status >= 500 || (response.status === 401 && sessionTokenOfRequest(c, deps.session) !== null);
  if (mayBeOutage && (await isOutage(deps.db))) {
    deps.logger.warn({ requestId: c.get("requestId"), path: loggablePathOf(c), status: response.status }, "the auth library failed while the database is unreachable");
    return errorResponse(c, upstreamUnavailable("The database is unavailable; try again shortly", OUTAGE_RETRY_SECONDS));
  }
  if (response.status >= 500) {
    deps.logger.error({ requestId: c.get("requestId"), path: loggablePathOf(c), status: response.status }, "the auth library failed");
    return errorResponse(c, new ApiError(500, "INTERNAL", "Internal error"));
  }
  // the library's own media-type refusal, in our envelope as the kit's is (DESIGN §3)
  if (response.status === 415) return errorResponse(c, new ApiError(415, "UNSUPPORTED_MEDIA_TYPE", "Request bodies must be JSON (Content-Type: application/json)"));
  const text = await response.clone().text();
  if (text.trim() !== "") return response;
  const code = EMPTY_ERROR_CODES[response.status] ?? "REFUSED";
  const message = response.status === 401 ? "Sign in first: this route needs a session" : response.statusText || "The request was refused";
  return errorResponse(c, new ApiError(response.status as ContentfulStatusCode, code, message));
}

/** The user of the request's session as the library reads it (session-token.ts), for the audit log; null without one. */
async function sessionUserOf(c: Context, deps: LibraryDeps): Promise<string | null> {
  const found = sessionTokenOfRequest(c, deps.session);
  if (!found || found.token.length > MAX_CREDENTIAL_LENGTH) return null;
  return (await deps.principals.bySessionToken(found.token))?.userId ?? null;
}

/** What a call of the library needs: the library, and what tells users and the audit log about it. */
export type LibraryDeps = Pick<IamContext, "auth" | "audit" | "db" | "mailer" | "revocations" | "config" | "forgetPrincipals" | "principals" | "session" | "logger">;

/**
 * The library stripped an unproven account (unproven-access.ts): the owner is told by mail and the
 * audit log, and a browser carries a notice to the page it lands on.
 */
async function afterRevocation(c: Context, deps: LibraryDeps, revoked: RevokedAccess, response: Response): Promise<Response> {
  const [owner] = await deps.db.select({ email: user.email }).from(user).where(eq(user.id, revoked.userId));
  await tellOwnerOfRevokedAccess(
    { audit: deps.audit, mailer: deps.mailer, iamUrl: deps.config.iamUrl, forgetPrincipals: deps.forgetPrincipals },
    revoked,
    owner?.email ?? null,
    { ip: clientIpOf(c), userAgent: c.req.header("user-agent") ?? null, requestId: c.get("requestId") },
  );
  const told = new Response(response.body, response);
  told.headers.append("set-cookie", revokedNoticeCookie(deps.config.secureCookies));
  return told;
}

/**
 * A JSON call of a library route on behalf of the browser request `c` (the pages post forms to us,
 * we post JSON to the library): the browser's cookie, origin and fetch metadata go with it. The
 * library failing (5xx) is no refusal to show in a form: it is thrown, and the page's failure
 * handler answers it (a 503 page while the database is down).
 */
export async function callAuthLibraryAs(c: Context, deps: LibraryDeps, method: "GET" | "POST", path: string, body?: unknown): Promise<Response> {
  const answer = await callLibraryAs(c, deps, method, path, body);
  if (answer.status >= 500) throw new Error(`the auth library answered ${answer.status} to ${method} ${path}`);
  return answer;
}

function callLibraryAs(c: Context, deps: LibraryDeps, method: "GET" | "POST", path: string, body?: unknown) {
  const headers = new Headers(c.req.raw.headers);
  headers.delete("content-length");
  headers.delete("content-type");
  headers.delete("transfer-encoding");
  if (body !== undefined) headers.set("content-type", "application/json");
  const url = new URL(`/api/auth${path}`, c.req.url);
  return callAuthLibrary(c, deps, new Request(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) }));
}
