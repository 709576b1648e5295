import { and, eq, gt, sql } from "drizzle-orm";
import { session, user } from "./db/schema.js";
import { unixSeconds, type Clock } from "@core/kit";
import { ReadBatcher, rowsOf, type Db } from "@core/storage";
import { IAM_POSITIVE_TTL_MS, NEGATIVE_TTL_MS, TtlCache, type Principal } from "@core/service-auth";
import { effectivePermissions, effectiveRole, rolesOf, type GrantLike, type OrgType } from "./permissions.js";
import { restricted, restrictionOf, unmetPolicy, type OrgPolicy, type Restriction } from "./org-policy.js";
import { meetsTwoFactor } from "./two-factor.js";

/** What a user's membership in one organization contributes to a principal. */
interface Membership {
  orgId: string;
  orgType: OrgType;
  platformId: string | null;
  platformStatus: "active" | "suspended" | null;
  roles: string[];
  overrides: Map<string, string[]>;
  grants: GrantLike[];
  slug: string;
  /** what the organization requires of its members' sessions (org-policy.ts) */
  policy: OrgPolicy;
}

interface MembershipRow {
  org_id: string;
  org_type: OrgType;
  platform_id: string | null;
  platform_status: "active" | "suspended" | null;
  member_role: string;
  overrides: { role: string; permissions: string[] }[] | null;
  grants: { permission: string; granted: boolean; expiresAt: number | string | null }[] | null;
  slug: string;
  require_two_factor: boolean | null;
  require_sso: boolean | null;
}

interface SessionRow {
  token: string;
  sessionId: string;
  expiresAt: Date;
  userId: string;
  email: string;
  orgId: string | null;
  signInMethod: string | null;
  ssoProviderId: string | null;
  twoFactorEnabled: boolean | null;
}

/** A session without an active organization acts in the user's operator organization, else their oldest. */
const defaultOrganization = (userId: SQLFragment) => sql`(
  select m2.organization_id from iam.member m2 join iam.organization o2 on o2.id = m2.organization_id
   where m2.user_id = ${userId} order by (o2.org_type = 'core-operator') desc, m2.created_at limit 1)`;
type SQLFragment = ReturnType<typeof sql>;

const iso = (value: Date | string | null) => (value === null ? null : new Date(value).toISOString());

/**
 * Turns session tokens into principals (DESIGN §4) — the hot path of every request in the system,
 * kept off better-auth's request handler. A token costs one indexed query (session + user); what
 * the membership adds (organization, role, overrides, grants, platform status) is cached per user
 * and organization, since many sessions share it. Answers are cached briefly; anything that revokes
 * a session or changes permissions calls `forget()`, so IAM itself never serves a stale answer and
 * other services' caches expire within 5 s.
 */
export class PrincipalResolver {
  private readonly principals = new TtlCache<Principal | null>(50_000);
  private readonly memberships = new TtlCache<Membership | null>(20_000);

  /**
   * The one query of tokens not in the cache: the tokens that arrive in one turn of the event loop
   * are read together (ReadBatcher), by a named prepared statement that PostgreSQL parses and plans
   * once per connection (ADR 0005).
   */
  private readonly sessions: ReadBatcher<string, SessionRow>;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly ttl = { positiveMs: IAM_POSITIVE_TTL_MS, negativeMs: NEGATIVE_TTL_MS },
  ) {
    const byTokens = db
      .select({
        token: session.token,
        sessionId: session.id,
        expiresAt: session.expiresAt,
        userId: session.userId,
        email: user.email,
        orgId: sql<string | null>`coalesce(${session.activeOrganizationId}, ${defaultOrganization(sql`${session.userId}`)})`,
        signInMethod: session.signInMethod,
        ssoProviderId: session.ssoProviderId,
        twoFactorEnabled: user.twoFactorEnabled,
      })
      .from(session)
      .innerJoin(user, eq(user.id, session.userId))
      .where(and(sql`${session.token} = any(${sql.placeholder("tokens")}::text[])`, gt(session.expiresAt, sql`${sql.placeholder("now")}::timestamptz`)))
      .prepare("iam_sessions_by_token");
    this.sessions = new ReadBatcher(async (tokens) => {
      const rows = await byTokens.execute({ tokens, now: this.clock.now().toISOString() });
      return new Map(rows.map((row) => [row.token, row]));
    });
  }

  /**
   * The cached answer for a session token, without waiting: the principal, null for a token known to
   * be invalid, undefined when nothing is cached (ask `bySessionToken`).
   */
  cachedSessionToken(token: string): Principal | null | undefined {
    const hit = this.principals.get(token);
    // a cached session may have expired since it was cached
    if (hit?.expiresAt && Date.parse(hit.expiresAt) <= this.clock.now().getTime()) return null;
    return hit;
  }

  async bySessionToken(token: string): Promise<Principal | null> {
    const hit = this.cachedSessionToken(token);
    if (hit !== undefined) return hit;
    const row = await this.sessions.load(token);
    const membership = row?.orgId ? await this.membership(row.userId, row.orgId) : null;
    let principal = row
      ? this.build({
          type: "user",
          userId: row.userId,
          email: row.email,
          sessionId: row.sessionId,
          apiKeyId: null,
          expiresAt: iso(row.expiresAt),
          membership,
        })
      : null;
    // a session that does not meet its organization's policy acts nowhere until it does (org-policy.ts)
    const unmet = principal && row && membership ? await this.unmet(membership, row) : null;
    if (principal && unmet && membership) principal = restricted(principal, unmet, membership.orgId, membership.slug);
    this.principals.set(token, principal, principal ? this.ttl.positiveMs : this.ttl.negativeMs);
    return principal;
  }

  /**
   * How the session of `token` stands in `orgId`, for the policy gate (policy-gate.ts): null when it
   * is no live session; `member: false` when its user is not a member there; else the restriction
   * that organization's policy puts on this session (null when it meets it).
   */
  async standingIn(token: string, orgId: string): Promise<{ userId: string; member: boolean; restriction: Restriction | null } | null> {
    const row = await this.sessions.load(token);
    if (!row) return null;
    const membership = await this.membership(row.userId, orgId);
    if (!membership) return { userId: row.userId, member: false, restriction: null };
    const unmet = await this.unmet(membership, row);
    return { userId: row.userId, member: true, restriction: unmet ? restrictionOf(unmet, membership.orgId, membership.slug) : null };
  }

  /**
   * The first of the user's organizations whose two-factor requirement the session of `token` does
   * not meet, as a restriction; null when it meets all of them (or none asks). A passkey counts as two
   * factors wherever its person signs in with it, so registering one is judged against all of them.
   */
  async twoFactorStanding(token: string): Promise<Restriction | null> {
    const row = await this.sessions.load(token);
    if (!row || meetsTwoFactor(row.signInMethod, row.twoFactorEnabled === true)) return null;
    const result = await this.db.execute(sql`
      select o.id, o.slug from iam.member m
        join iam.organization o on o.id = m.organization_id
        join iam.org_policies op on op.org_id = o.id and op.require_two_factor
       where m.user_id = ${row.userId} order by m.created_at limit 1`);
    const strict = rowsOf<{ id: string; slug: string }>(result)[0];
    return strict ? restrictionOf("TWO_FACTOR_REQUIRED", strict.id, strict.slug) : null;
  }

  /**
   * Whether the person of the session of `token` has two-factor on, and whether this session gave
   * the second factor (or is a passkey's); null when it is no live session.
   */
  async secondFactorOf(token: string): Promise<{ enabled: boolean; given: boolean } | null> {
    const row = await this.sessions.load(token);
    if (!row) return null;
    const enabled = row.twoFactorEnabled === true;
    return { enabled, given: meetsTwoFactor(row.signInMethod, enabled) };
  }

  /** What `membership`'s policy finds missing in the session `row`, or null. */
  private async unmet(membership: Membership, row: SessionRow) {
    if (!membership.policy.requireTwoFactor && !membership.policy.requireSso) return null;
    return unmetPolicy(this.db, membership.policy, membership.orgId, { signInMethod: row.signInMethod, ssoProviderId: row.ssoProviderId, twoFactorEnabled: row.twoFactorEnabled === true });
  }

  /**
   * The principal of an API key's user acting in the organization the key was made for (api-keys.ts),
   * or in none: a key never follows its user's default organization.
   */
  async forUser(userId: string, orgId: string | null, extra: { apiKeyId: string; expiresAt: string | null }): Promise<Principal | null> {
    const [row] = await this.db.select({ email: user.email }).from(user).where(eq(user.id, userId));
    if (!row) return null;
    return this.build({
      type: "apikey",
      userId,
      email: row.email,
      sessionId: null,
      apiKeyId: extra.apiKeyId,
      expiresAt: extra.expiresAt,
      membership: orgId ? await this.membership(userId, orgId) : null,
    });
  }

  /**
   * What an OAuth access token carries for a user in one organization (oauth-provider.ts), at
   * issuance and at every refresh: their effective permissions there, none when they are no longer
   * a member, and none when the organization's policy holds back the session the token was issued
   * through (or that session has ended), as it holds back the session itself.
   */
  async oauthPermissions(userId: string, orgId: string, sessionId: string | undefined): Promise<string[]> {
    const m = await this.membership(userId, orgId);
    if (!m) return [];
    if (m.policy.requireTwoFactor || m.policy.requireSso) {
      const [facts] = sessionId
        ? await this.db
            .select({ signInMethod: session.signInMethod, ssoProviderId: session.ssoProviderId, twoFactorEnabled: user.twoFactorEnabled })
            .from(session)
            .innerJoin(user, eq(user.id, session.userId))
            .where(and(eq(session.id, sessionId), eq(session.userId, userId)))
        : [];
      if (!facts || (await unmetPolicy(this.db, m.policy, orgId, { ...facts, twoFactorEnabled: facts.twoFactorEnabled === true }))) return [];
    }
    return effectivePermissions({ orgType: m.orgType, roles: m.roles, overrides: m.overrides, grants: m.grants, nowSeconds: unixSeconds(this.clock.now()) });
  }

  /** The organization a user's session acts in: its active one, else the user's operator organization, else their oldest. */
  async actingOrganization(userId: string, activeOrganizationId: string | null): Promise<string | null> {
    const result = await this.db.execute(sql`select coalesce(${activeOrganizationId}::text, ${defaultOrganization(sql`${userId}`)}) as org_id`);
    return rowsOf<{ org_id: string | null }>(result)[0]?.org_id ?? null;
  }

  /** Drops every cached answer: called on revocations and permission changes. */
  forget(): void {
    this.principals.clear();
    this.memberships.clear();
  }

  private async membership(userId: string, orgId: string): Promise<Membership | null> {
    const key = `${userId}\n${orgId}`;
    const hit = this.memberships.get(key);
    if (hit !== undefined) return hit;
    const result = await this.db.execute(sql`
      select o.id as org_id, o.slug, o.org_type, o.platform_id, ps.status as platform_status, m.role as member_role,
             op.require_two_factor, op.require_sso,
             (select json_agg(json_build_object('role', rm.role, 'permissions', rm.permissions))
                from iam.role_mappings rm where rm.org_id = o.id) as overrides,
             (select json_agg(json_build_object('permission', g.permission, 'granted', g.granted, 'expiresAt', g.expires_at))
                from iam.grants g where g.org_id = o.id and g.user_id = m.user_id) as grants
        from iam.member m
        join iam.organization o on o.id = m.organization_id
        left join iam.platform_status ps on ps.platform_id = o.platform_id
        left join iam.org_policies op on op.org_id = o.id
       where m.user_id = ${userId} and m.organization_id = ${orgId}`);
    const row = rowsOf<MembershipRow>(result)[0];
    const membership: Membership | null = row
      ? {
          orgId: row.org_id,
          orgType: row.org_type,
          platformId: row.platform_id,
          platformStatus: row.platform_id ? (row.platform_status ?? "active") : null,
          roles: rolesOf(row.member_role),
          overrides: new Map((row.overrides ?? []).map((o) => [o.role, o.permissions] as const)),
          grants: (row.grants ?? []).map((g) => ({ ...g, expiresAt: g.expiresAt === null ? null : Number(g.expiresAt) })),
          slug: row.slug,
          policy: { requireTwoFactor: row.require_two_factor === true, requireSso: row.require_sso === true },
        }
      : null;
    this.memberships.set(key, membership, membership ? this.ttl.positiveMs : this.ttl.negativeMs);
    return membership;
  }

  private build(input: Omit<Principal, "orgId" | "orgType" | "platformId" | "platformStatus" | "role" | "permissions" | "restriction"> & { membership: Membership | null }): Principal {
    const { membership: m, ...identity } = input;
    return {
      ...identity,
      orgId: m?.orgId ?? null,
      orgType: m?.orgType ?? null,
      platformId: m?.platformId ?? null,
      platformStatus: m?.platformStatus ?? null,
      role: m ? effectiveRole(m.roles) : null,
      // grants carry their own expiry, so permissions are computed at the moment of asking
      permissions: m
        ? effectivePermissions({ orgType: m.orgType, roles: m.roles, overrides: m.overrides, grants: m.grants, nowSeconds: unixSeconds(this.clock.now()) })
        : [],
    };
  }
}
