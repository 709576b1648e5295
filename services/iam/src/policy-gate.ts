import { and, eq } from "drizzle-orm";
import type { Context } from "hono";
import { ApiError, forbidden } from "@core/kit";
import { MAX_CREDENTIAL_LENGTH, policyRefusal, type Caller, type Principal } from "@core/service-auth";
import type { Db } from "@core/storage";
import { sessionTokenOfRequest, type SessionOptions } from "./access.js";
import { apikey, invitation, organization } from "./db/schema.js";
import { allowedWhileRestricted } from "./org-policy.js";
import type { PrincipalResolver } from "./principals.js";

/**
 * The one policy gate (docs/vault/concepts/second-factors-and-policy.md, "Where the policy is
 * judged"). Every request to the auth library passes here first, judged against the session the
 * library will read (session-token.ts, whatever form the token takes) and the organization the
 * request or the credential it makes acts in, not only the one the session acts in:
 * - a session held back in the organization it acts in may only comply (ADR 0023);
 * - an API key is made only for an organization of its maker's whose policy the making session
 *   meets, and always names it (the key is excepted from the policy afterwards, so the policy is
 *   judged once, here); an update never moves it to another;
 * - a passkey is registered only by a session that meets the two-factor requirement of every
 *   organization of its person that has one (a passkey counts as two factors wherever it signs in);
 * - the authenticator's secret is shown, and backup codes are made, only to a session that gave
 *   the second factor, once the person has one;
 * - the library's organization routes read and write an organization only for a session its policy
 *   does not hold back, whichever organization the request names, and so do IAM's own routes that
 *   judge their caller by membership in the organization they name (`gateOrganizationRoute`).
 * Device approvals and OAuth consent are sessions acting in their organization (the first rule),
 * and the CLI logins and tokens they make carry the approving session's strength
 * (device-flow.ts, principals.ts oauthPermissions).
 */
export interface PolicyGateDeps {
  db: Db;
  principals: PrincipalResolver;
  session: Pick<SessionOptions, "secret" | "secureCookies">;
}

const PASSKEY_REGISTRATION = ["/passkey/generate-register-options", "/passkey/verify-registration"];

/**
 * What makes a second factor: the authenticator's secret and new backup codes. With the password
 * alone, a session that never gave the second factor (one kept from before enrolment, a CLI login
 * it approved, an SSO session) would get what signs in as two factors.
 */
const SECOND_FACTOR_MATERIAL = ["/two-factor/get-totp-uri", "/two-factor/generate-backup-codes"];
const SECOND_FACTOR_FIRST = "Showing the authenticator's secret or making new backup codes needs a session that gave your second factor: sign in again with a code from your app, a backup code or a passkey";

/** Organization routes that act in no organization of the caller's, or that only take the caller out of one. */
const ORGANIZATION_ROUTES_OF_THE_PERSON = new Set([
  "/organization/list",
  "/organization/check-slug",
  "/organization/set-active",
  "/organization/leave",
  "/organization/create",
  "/organization/list-user-invitations",
  "/organization/get-invitation",
  "/organization/accept-invitation",
  "/organization/reject-invitation",
]);

const text = (value: unknown) => (typeof value === "string" && value.length > 0 && value.length <= 256 ? value : null);

/** The JSON object of a request's body; null when it has none (the library answers that itself). */
async function jsonBody(request: Request): Promise<Record<string, unknown> | null> {
  if (request.method !== "POST" || !/json/i.test(request.headers.get("content-type") ?? "")) return null;
  const value: unknown = await request
    .clone()
    .json()
    .catch(() => null);
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
}

/** `request` with `body` as its JSON body. */
function withBody(request: Request, body: Record<string, unknown>): Request {
  const headers = new Headers(request.headers);
  headers.delete("content-length");
  return new Request(request.url, { method: request.method, headers, body: JSON.stringify(body), signal: request.signal });
}

/** The organization a session acts in: its own, or the one whose policy holds it back. */
const actingOrganization = (principal: Principal) => principal.orgId ?? principal.restriction?.orgId ?? null;

/**
 * Judges a request to the library at `path` (under /api/auth): the request to send on (an API key's
 * made with its organization), or the refusal to answer instead.
 */
export async function gateLibraryRequest(c: Context, deps: PolicyGateDeps, path: string, request: Request): Promise<Request | ApiError> {
  const found = sessionTokenOfRequest(c, deps.session);
  if (!found || found.token.length > MAX_CREDENTIAL_LENGTH) return request;
  const principal = await deps.principals.bySessionToken(found.token);
  if (!principal) return request; // the library finds no session either, and answers so
  if (principal.restriction && !allowedWhileRestricted(`/api/auth${path}`)) return policyRefusal(principal.restriction);
  if (path === "/api-key/create") return apiKeyCreation(deps, found.token, principal, request);
  if (path === "/api-key/update") return apiKeyUpdate(deps, principal, request);
  if (PASSKEY_REGISTRATION.includes(path)) {
    const unmet = await deps.principals.twoFactorStanding(found.token);
    return unmet ? policyRefusal(unmet) : request;
  }
  if (SECOND_FACTOR_MATERIAL.includes(path)) {
    const factor = await deps.principals.secondFactorOf(found.token);
    if (factor?.enabled && !factor.given) return forbidden(SECOND_FACTOR_FIRST);
  }
  if (path.startsWith("/organization/") && !ORGANIZATION_ROUTES_OF_THE_PERSON.has(path)) {
    const orgId = (await organizationOfRequest(deps.db, path, request)) ?? actingOrganization(principal);
    const standing = orgId ? await deps.principals.standingIn(found.token, orgId) : null;
    // a request for an organization the person is not in is the library's to refuse
    if (standing?.restriction) return policyRefusal(standing.restriction);
  }
  return request;
}

/**
 * The gate of IAM's own routes that name an organization and judge their caller by membership
 * there rather than by the organization the credential acts in (its policy, its single sign-on):
 * a session held back by that organization's policy is refused as it would be acting there,
 * whichever organization it acts in, and an API key acts in the one it was made for only. A
 * service passes; what the caller may do there is the route's to judge.
 */
export async function gateOrganizationRoute(c: Context, deps: PolicyGateDeps, caller: Caller, orgId: string): Promise<void> {
  if (caller.kind !== "principal") return;
  const { principal } = caller;
  if (principal.type === "apikey") {
    if (principal.orgId !== orgId) throw forbidden("An API key acts only in the organization it was made for");
    return;
  }
  const found = sessionTokenOfRequest(c, deps.session);
  if (found) await refuseHeldBackIn(deps.principals, found.token, orgId);
}

/** 403 naming the policy when `orgId`'s policy holds the session of `token` back (a member's only; a stranger's is the route's to refuse). */
export async function refuseHeldBackIn(principals: Pick<PrincipalResolver, "standingIn">, token: string, orgId: string): Promise<void> {
  const standing = token.length > MAX_CREDENTIAL_LENGTH ? null : await principals.standingIn(token, orgId);
  if (standing?.restriction) throw policyRefusal(standing.restriction);
}

/** An API key is made for the organization its body names, else the one its session acts in, and says so in its metadata. */
async function apiKeyCreation(deps: PolicyGateDeps, token: string, principal: Principal, request: Request): Promise<Request | ApiError> {
  const body = await jsonBody(request);
  if (!body) return request;
  const metadata = body.metadata ?? {};
  if (typeof metadata !== "object" || metadata === null || Array.isArray(metadata)) {
    return new ApiError(400, "VALIDATION_ERROR", "metadata must be an object", [{ path: "metadata", message: "Expected an object" }]);
  }
  const named = (metadata as { orgId?: unknown }).orgId;
  if (named !== undefined && text(named) === null) {
    return new ApiError(400, "VALIDATION_ERROR", "metadata.orgId must be an organization id", [{ path: "metadata.orgId", message: "Expected an organization id" }]);
  }
  const orgId = text(named) ?? actingOrganization(principal);
  if (orgId) {
    const standing = await deps.principals.standingIn(token, orgId);
    if (!standing?.member) return forbidden("An API key can be made only for an organization you are a member of");
    if (standing.restriction) return policyRefusal(standing.restriction);
  }
  return withBody(request, { ...body, metadata: { ...metadata, orgId } });
}

/** An update keeps the organization its key was made for: metadata may change, `orgId` may not. */
async function apiKeyUpdate(deps: PolicyGateDeps, principal: Principal, request: Request): Promise<Request | ApiError> {
  const body = await jsonBody(request);
  if (!body || body.metadata === undefined) return request;
  const keyId = text(body.keyId);
  const [key] = keyId ? await deps.db.select({ metadata: apikey.metadata }).from(apikey).where(and(eq(apikey.id, keyId), eq(apikey.referenceId, principal.userId))) : [];
  if (!key) return request; // the library answers an unknown key
  const metadata = body.metadata;
  if (typeof metadata !== "object" || metadata === null || Array.isArray(metadata)) {
    return new ApiError(400, "VALIDATION_ERROR", "metadata must be an object", [{ path: "metadata", message: "Expected an object" }]);
  }
  const madeFor = organizationOfKey(key.metadata);
  const named = (metadata as { orgId?: unknown }).orgId;
  if (named !== undefined && named !== madeFor) {
    return new ApiError(400, "VALIDATION_ERROR", "An API key acts in the organization it was made for: make a new key for another", [{ path: "metadata.orgId", message: "Cannot be changed" }]);
  }
  return withBody(request, { ...body, metadata: { ...metadata, orgId: madeFor } });
}

function organizationOfKey(metadata: string | null): string | null {
  try {
    const parsed: unknown = metadata ? JSON.parse(metadata) : null;
    return text((parsed as { orgId?: unknown } | null)?.orgId) ?? null;
  } catch {
    return null;
  }
}

/**
 * The organization a library organization route names: `organizationId` in its body or query, its
 * `organizationSlug`, or the invitation it cancels; null when it names none (the session's active
 * one is meant).
 */
async function organizationOfRequest(db: Db, path: string, request: Request): Promise<string | null> {
  const query = new URL(request.url).searchParams;
  const body = (await jsonBody(request)) ?? {};
  const named = text(body.organizationId) ?? text(query.get("organizationId"));
  if (named) return named;
  const slug = text(body.organizationSlug) ?? text(query.get("organizationSlug"));
  if (slug) {
    const [row] = await db.select({ id: organization.id }).from(organization).where(eq(organization.slug, slug));
    return row?.id ?? null;
  }
  const invitationId = path === "/organization/cancel-invitation" ? text(body.invitationId) : null;
  if (invitationId) {
    const [row] = await db.select({ orgId: invitation.organizationId }).from(invitation).where(eq(invitation.id, invitationId));
    return row?.orgId ?? null;
  }
  return null;
}
