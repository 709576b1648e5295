import type { Context } from "hono";
import { ApiError, badRequest, fetchTraced, requestIdOf, resourceNotFound, serviceUnavailable, serviceUnreachable, traceOf, tracingFor, type TraceSource } from "@core/kit";
import { activeOrganizationHint, forbiddenFor, holds, isOperator, readAgainOnReset, requireCaller, TtlCache, type Caller, type CredentialResolvers, type ServiceTokenSource } from "@core/service-auth";
import type { Engine } from "./engine.js";
import { auditOperatorAction } from "./operator.js";

/** Who a billing request acts as, and on which platform (DESIGN §6.3, §6.7). */
export interface PlatformScope {
  caller: Caller;
  platformId: string;
}

/** Knows whether a platform exists, by asking the platform registry (with a service token), cached. */
export class PlatformDirectory {
  private readonly known = new TtlCache<{ name: string | null } | null>(10_000);

  constructor(
    private readonly registryUrl: string,
    private readonly tokens: ServiceTokenSource,
    private readonly doFetch: typeof fetch = fetch,
  ) {}

  /** `from`: the trace of the request that asks (DESIGN §10); without it the lookup starts a trace of its own */
  async exists(platformId: string, from: TraceSource = tracingFor("billing")): Promise<boolean> {
    return (await this.lookup(platformId, from)) !== null;
  }

  /**
   * The platform's name in the registry (its organization's, as set up), the buyer's name on its
   * invoices until the tenant gives billing details (DESIGN §6.11). Null when the registry has no
   * name for it or cannot be asked: a name is worth no failed request.
   */
  async nameOf(platformId: string, from: TraceSource = tracingFor("billing")): Promise<string | null> {
    try {
      return (await this.lookup(platformId, from))?.name ?? null;
    } catch {
      return null;
    }
  }

  private async lookup(platformId: string, from: TraceSource): Promise<{ name: string | null } | null> {
    const hit = this.known.get(platformId);
    if (hit !== undefined) return hit;
    let response: Response;
    try {
      response = await readAgainOnReset(async () =>
        fetchTraced(from, this.doFetch, `${this.registryUrl}/platforms/${encodeURIComponent(platformId)}`, {
          headers: { authorization: `Bearer ${await this.tokens.tokenFor("platform-registry", from)}` },
          signal: AbortSignal.timeout(5_000),
        }),
      );
    } catch (err) {
      // no service token to ask with: IAM's answer to that is the failure
      if (err instanceof ApiError) throw err;
      throw serviceUnreachable("The platform registry");
    }
    if (response.status !== 200) {
      await response.body?.cancel();
      if (response.status !== 404 && response.status !== 400) throw serviceUnavailable("The platform registry", response);
      this.known.set(platformId, null, 5_000);
      return null;
    }
    const body = (await response.json().catch(() => null)) as { name?: unknown } | null;
    const found = { name: typeof body?.name === "string" && body.name.trim() ? body.name.trim() : null };
    this.known.set(platformId, found, 300_000);
    return found;
  }

  /**
   * The id of every platform the registry knows, a page at a time, oldest first: its `GET /platforms`,
   * which a service token sees whole, at its largest page (100). The registry has no count route, so
   * a count is a walk of the pages: one request per hundred platforms, never one per platform. An
   * ApiError (503 UPSTREAM_UNAVAILABLE, 429) when the registry or IAM cannot be asked.
   */
  async *platformIdPages(from: TraceSource = tracingFor("billing")): AsyncGenerator<string[]> {
    let cursor: string | null = null;
    do {
      const url = `${this.registryUrl}/platforms?limit=${REGISTRY_PAGE}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
      let response: Response;
      try {
        response = await readAgainOnReset(async () =>
          fetchTraced(from, this.doFetch, url, { headers: { authorization: `Bearer ${await this.tokens.tokenFor("platform-registry", from)}` }, signal: AbortSignal.timeout(5_000) }),
        );
      } catch (err) {
        if (err instanceof ApiError) throw err;
        throw serviceUnreachable("The platform registry");
      }
      if (response.status !== 200) {
        await response.body?.cancel();
        throw serviceUnavailable("The platform registry", response);
      }
      const page = (await response.json().catch(() => null)) as { data?: { id?: unknown }[]; cursor?: unknown } | null;
      const ids = Array.isArray(page?.data) ? page.data.map((p) => p?.id) : null;
      const next = page?.cursor;
      // an answer that is not a page of platforms, or the same cursor again (walked forever), is a registry that cannot serve
      if (!ids || !ids.every((id): id is string => typeof id === "string") || (next !== null && typeof next !== "string") || (next !== null && next === cursor)) {
        throw serviceUnavailable("The platform registry", response);
      }
      yield ids;
      cursor = next;
    } while (cursor);
  }
}

/** The platform registry's largest page (its `limit` is 1-100). */
const REGISTRY_PAGE = 100;

/** Operators act on every platform with their permission; services on every platform. */
const platformWide = (caller: Caller, permission: string) => caller.kind === "service" || (isOperator(caller.principal) && holds(caller.principal, permission));

/**
 * Table A's access rule (DESIGN §6.7): reads need `billing:read`, writes and upgrade `billing:manage`,
 * in the platform's organization; operators and services act on any platform and name it with
 * `platformId` (400 without one). A tenant's own platform is the default, and another tenant's
 * platform is 404, as if it did not exist.
 */
export async function platformScope(
  c: Context,
  deps: { credentials: CredentialResolvers; platforms: PlatformDirectory },
  permission: "billing:read" | "billing:manage",
  named: string | undefined,
): Promise<PlatformScope> {
  const caller = await requireCaller(c, deps.credentials);
  if (platformWide(caller, permission)) {
    if (!named) throw badRequest("Name the platform: operators and services pass ?platformId=", { path: "platformId" });
    if (!(await deps.platforms.exists(named, traceOf(c)))) throw resourceNotFound("platform");
    return { caller, platformId: named };
  }
  const principal = caller.kind === "principal" ? caller.principal : null;
  const own = principal?.platformId;
  if (!principal || !own) throw forbiddenFor(principal, principal ? `Your active organization has no platform to bill. ${activeOrganizationHint(principal)}` : "Your organization has no platform to bill");
  if (named !== undefined && named !== own) throw resourceNotFound("platform");
  if (!holds(principal, permission, { platformId: own })) throw forbiddenFor(principal, `You need ${permission} on this platform`);
  return { caller, platformId: own };
}

/**
 * The scope of a read of one platform's resource found by its own id (an invoice): `named` is
 * checked as `platformScope` checks it; without it a tenant reads its own platform, and an operator
 * or a service the resource's (null when there is no such resource). A resource outside the scope is
 * then simply not found, and the answer names nothing of its owner (DESIGN §6.9).
 */
export async function resourceScope(
  c: Context,
  deps: { credentials: CredentialResolvers; platforms: PlatformDirectory },
  permission: "billing:read" | "billing:manage",
  named: string | undefined,
  resourcePlatformId: string | null,
): Promise<PlatformScope | null> {
  const caller = await requireCaller(c, deps.credentials);
  if (named === undefined && platformWide(caller, permission)) return resourcePlatformId ? { caller, platformId: resourcePlatformId } : null;
  return platformScope(c, deps, permission, named);
}

/** Table B and `/operator/*` (DESIGN §6.7): `billing:operate` (operators) and services. */
export async function requireOperator(c: Context, credentials: CredentialResolvers): Promise<Caller> {
  const caller = await requireCaller(c, credentials);
  if (platformWide(caller, "billing:operate")) return caller;
  throw forbiddenFor(caller, "This route is for operators (billing:operate) and services");
}

/** The caller as the audit and idempotency records name it. */
export function callerKey(caller: Caller): string {
  if (caller.kind === "service") return `service:${caller.serviceId}`;
  return caller.principal.type === "apikey" ? `apikey:${caller.principal.apiKeyId}` : `user:${caller.principal.userId}`;
}

export function actorOf(caller: Caller): { actorType: string; actorId: string | null } {
  if (caller.kind === "service") return { actorType: "service", actorId: caller.serviceId };
  return { actorType: caller.principal.type, actorId: caller.principal.type === "apikey" ? caller.principal.apiKeyId : caller.principal.userId };
}

/** What an audited request did: the action, its target, and the target before and after. */
export interface AuditedAction {
  action: string;
  targetType: string;
  targetId: string;
  before?: unknown;
  after?: unknown;
}

/** The operator audit's line of a request (DESIGN §6.4): its caller is the actor, its id the request id, the time the wall clock's. */
export function auditRequest(c: Context, engine: Pick<Engine, "db" | "time">, caller: Caller, entry: AuditedAction): Promise<void> {
  return auditOperatorAction(engine.db, { now: () => engine.time.wallNow() }, { ...actorOf(caller), ...entry, requestId: requestIdOf(c) });
}
