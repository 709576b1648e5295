import { z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { integerQuery, notFound, rawRequestOf, validationError, withRequestId, type ServiceApp } from "@core/kit";
import type { Principal } from "@core/service-auth";
import { actorOf, requireSession } from "../access.js";
import type { IamContext } from "../app.js";
import { callAuthLibrary, libraryServes } from "../auth-library.js";
import { expireLapsedInvitations, isSecondPendingInvitation } from "../invitations.js";
import { checkKeepsAManager, isSecondMembership, memberUserOf, withManagerLock, type ManagerChange } from "../org-managers.js";
import { rolesOf } from "../permissions.js";
import { ProfileName } from "./schemas.js";

/**
 * What IAM holds some library bodies to before the library sees them (its own checks run after):
 * a name is bounded on sign-up as on the profile (issue 10), and an email as on invitations.
 */
export const LIBRARY_BOUNDS: Record<string, z.ZodObject> = {
  "/sign-up/email": z.looseObject({ name: ProfileName, email: z.string().max(320) }),
  // the library keeps whatever `image` is as text ("[object Object]"): only an address, or null, is kept
  "/update-user": z.looseObject({ name: ProfileName.optional(), image: z.string().max(2048).nullable().optional() }),
  "/sign-in/magic-link": z.looseObject({ email: z.string().max(320), name: ProfileName.optional() }),
  // a passkey's name is bounded as a key's is; adding a passkey never makes a second session (passkeys.ts)
  "/passkey/verify-registration": z.looseObject({ name: z.string().max(100).optional(), createSession: z.literal(false).optional() }),
  "/passkey/update-passkey": z.looseObject({ name: z.string().max(100) }),
  // every key starts `core_`: the CLI tells a key from a token by it, and the log rule redacts it by it
  "/api-key/create": z.looseObject({ prefix: z.literal("core_").optional() }),
};

// the member columns the library may sort by; filters compare text columns only (a date compared to text fails in the database)
const MEMBER_SORT = z.enum(["id", "organizationId", "userId", "role", "createdAt"]);
const MEMBER_FILTER = z.enum(["id", "organizationId", "userId", "role"]);

/**
 * Query parameters of library routes that the library passes to the database unchecked: a column
 * that does not exist, or a negative or fractional offset, failed there (500). Held to what works.
 */
export const LIBRARY_QUERY_BOUNDS: Record<string, z.ZodObject> = {
  "/api-key/list": z.looseObject({ sortBy: z.enum(["createdAt", "updatedAt", "name", "expiresAt", "lastRequest"]).optional() }),
  "/organization/list-members": z.looseObject({
    limit: integerQuery(1, 1000).optional(),
    offset: integerQuery(0, 1_000_000).optional(),
    sortBy: MEMBER_SORT.optional(),
    filterField: MEMBER_FILTER.optional(),
  }),
};

/** Library routes that take members out of an organization or change their roles. */
const MEMBER_CHANGES: Record<string, (body: Record<string, unknown>, caller: Principal, ctx: IamContext) => Promise<{ orgId: string; change: ManagerChange } | null>> = {
  "/organization/remove-member": async (body, caller, ctx) => {
    const orgId = text(body.organizationId) ?? caller.orgId;
    const who = text(body.memberIdOrEmail);
    if (!orgId || !who) return null;
    const userId = await memberUserOf(ctx.db, orgId, who, { orEmail: true });
    return userId ? { orgId, change: { kind: "member-removed", userId } } : null;
  },
  "/organization/update-member-role": async (body, caller, ctx) => {
    const orgId = text(body.organizationId) ?? caller.orgId;
    const memberId = text(body.memberId);
    const roles = typeof body.role === "string" ? rolesOf(body.role) : Array.isArray(body.role) ? body.role.filter((r): r is string => typeof r === "string") : null;
    if (!orgId || !memberId || !roles) return null;
    const userId = await memberUserOf(ctx.db, orgId, memberId, { orEmail: false });
    return userId ? { orgId, change: { kind: "member-roles", userId, roles } } : null;
  },
  "/organization/leave": async (body, caller) => {
    const orgId = text(body.organizationId);
    return orgId ? { orgId, change: { kind: "member-removed", userId: caller.userId } } : null;
  },
};

/** The library routes whose changes keep an organization's last manager (409 LAST_ORG_MANAGER). */
export const MEMBER_CHANGE_PATHS = Object.keys(MEMBER_CHANGES);

const text = (value: unknown) => (typeof value === "string" && value.length > 0 ? value : null);

/** The JSON object of the request's body, or null when there is none (the library answers that itself). */
async function bodyObject(c: Context): Promise<Record<string, unknown> | null> {
  if (!/json/i.test(c.req.header("content-type") ?? "")) return null;
  try {
    const value: unknown = JSON.parse(await c.req.text());
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * better-auth's own routes at /api/auth/* (spec §4.2), behind what IAM adds: routes the library does
 * not serve get our 404 envelope; IAM's bounds answer VALIDATION_ERROR; member changes keep an
 * organization's last manager (409 LAST_ORG_MANAGER). Everything else is the library's own answer.
 */
export function authLibraryRoutes(app: ServiceApp, ctx: IamContext) {
  const serves = libraryServes(ctx.auth);
  app.on(["GET", "POST"], "/api/auth/*", async (c) => {
    if (!serves(c.req.method, c.req.path)) throw notFound(`No route for ${c.req.method} ${c.req.path}`);
    const path = c.req.path.slice("/api/auth".length);
    const queryBounds = c.req.method === "GET" ? LIBRARY_QUERY_BOUNDS[path] : undefined;
    if (queryBounds) {
      const checked = queryBounds.safeParse(c.req.query());
      if (!checked.success) throw validationError(checked.error, "query");
    }
    const bounds = LIBRARY_BOUNDS[path];
    const memberChange = MEMBER_CHANGES[path];
    const inviting = c.req.method === "POST" && path === INVITE_MEMBER;
    let planned: PlannedChange | null = null;
    if (c.req.method === "POST" && (bounds || memberChange || inviting)) {
      const body = await bodyObject(c);
      if (body && bounds) {
        const checked = bounds.safeParse(body);
        if (!checked.success) throw validationError(checked.error, "body");
      }
      if (body && memberChange) planned = await plannedChange(c, ctx, body, memberChange);
      if (body && inviting) await expireLapsedBefore(c, ctx, body);
    }
    if (planned) return keepingAManager(c, ctx, planned);
    const indexed = c.req.method === "POST" ? HELD_BY_AN_INDEX[path] : undefined;
    return indexed ? throughTheIndex(c, ctx, indexed) : callAuthLibrary(c, ctx, await libraryRequestOf(c));
  });
}

/** The library's route that invites someone: behind the index of one pending invitation per address (invitations.ts). */
const INVITE_MEMBER = "/organization/invite-member";

/**
 * Library routes that check and then insert, where an index of ours holds what the check meant to
 * (a burst of requests may all pass the check): the insert it refuses gets the library's own answer,
 * as the request would have had a moment later. One pending invitation per address
 * (invitations.ts); one membership per person and organization (`member_organization_user_unique`:
 * accepting an invitation to an organization the person joined meanwhile, through its single
 * sign-on's provisioning, made a second one).
 */
const HELD_BY_AN_INDEX: Record<string, { refused: (err: unknown) => boolean; answer: { code: string; message: string } }> = {
  [INVITE_MEMBER]: { refused: isSecondPendingInvitation, answer: { code: "USER_IS_ALREADY_INVITED_TO_THIS_ORGANIZATION", message: "User is already invited to this organization" } },
  "/organization/accept-invitation": { refused: isSecondMembership, answer: { code: "USER_IS_ALREADY_A_MEMBER_OF_THIS_ORGANIZATION", message: "User is already a member of this organization" } },
};

async function throughTheIndex(c: Context, ctx: IamContext, indexed: (typeof HELD_BY_AN_INDEX)[string]): Promise<Response> {
  try {
    return await callAuthLibrary(c, ctx, await libraryRequestOf(c));
  } catch (err) {
    if (!indexed.refused(err)) throw err;
    // the organization plugin's refusal, as its router answers it
    return withRequestId(c, Response.json(indexed.answer, { status: 400 }));
  }
}

/**
 * The lapsed invitations of the address, marked expired before the library inserts its new one (a
 * lapsed invitation still pending would hold the index). The organization is the body's, else the
 * session's; a request without either is the library's to refuse.
 */
async function expireLapsedBefore(c: Context, ctx: IamContext, body: Record<string, unknown>) {
  const email = text(body.email);
  const orgId = text(body.organizationId) ?? (await requireSession(c, ctx.session).catch(() => null))?.principal.orgId;
  if (email && orgId) await expireLapsedInvitations(ctx.db, orgId, email, ctx.clock.now());
}

/**
 * The request as the library gets it. A POST with no body at all (sign-out, which the description
 * says takes an optional body) is sent as `{}`: the library wants JSON even where it reads nothing.
 */
async function libraryRequestOf(c: Context): Promise<Request> {
  const raw = await rawRequestOf(c);
  const length = c.req.header("content-length");
  const bodiless = length === "0" || (length === undefined && c.req.header("transfer-encoding") === undefined);
  if (raw.method !== "POST" || c.req.header("content-type") !== undefined || !bodiless) return raw;
  const headers = new Headers(raw.headers);
  headers.set("content-type", "application/json");
  headers.delete("content-length");
  return new Request(raw.url, { method: "POST", headers, body: "{}", signal: raw.signal });
}

interface PlannedChange {
  orgId: string;
  change: ManagerChange;
  actor: ReturnType<typeof actorOf>;
}

/** The member change a library request asks for, as the manager rule sees it; null when it names none (the library answers that). */
async function plannedChange(c: Context, ctx: IamContext, body: Record<string, unknown>, changeOf: (typeof MEMBER_CHANGES)[string]): Promise<PlannedChange | null> {
  // without a session the library refuses the request itself
  const caller = await requireSession(c, ctx.session).catch(() => null);
  if (!caller) return null;
  const planned = await changeOf(body, caller.principal, ctx);
  return planned && { ...planned, actor: actorOf(c, { kind: "principal", principal: caller.principal }) };
}

/**
 * The library's member change, checked and written under the organization's manager lock
 * (org-managers.ts): two owners demoting or removing each other at once each passed the check
 * before either wrote, and left the organization without a manager.
 */
function keepingAManager(c: Context, ctx: IamContext, planned: PlannedChange): Promise<Response> {
  return withManagerLock(ctx, planned.orgId, async () => {
    await checkKeepsAManager(ctx, planned.orgId, planned.change, planned.actor);
    return callAuthLibrary(c, ctx, await libraryRequestOf(c));
  });
}
