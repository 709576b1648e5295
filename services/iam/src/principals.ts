import { sql, type SQL } from "drizzle-orm";
import { unixSeconds, type Clock } from "@core/kit";
import { rowsOf, type Db } from "@core/storage";
import { TtlCache, type Principal } from "@core/service-auth";
import { effectivePermissions, effectiveRole, rolesOf, type GrantLike, type OrgType } from "./permissions.js";

interface PrincipalRow {
  session_id: string | null;
  expires_at: Date | string | null;
  user_id: string;
  email: string;
  org_id: string | null;
  org_type: OrgType | null;
  platform_id: string | null;
  platform_status: "active" | "suspended" | null;
  member_role: string | null;
  overrides: { role: string; permissions: string[] }[] | null;
  grants: { permission: string; granted: boolean; expiresAt: number | null }[] | null;
}

/**
 * Everything a principal needs in one round trip: the user, the organization, the membership,
 * the organization's role overrides, the user's live grants there and the platform's status.
 */
function principalQuery(from: SQL, orgIdExpr: SQL, nowSeconds: number) {
  return sql`
    select s_id as session_id, s_expires as expires_at, u.id as user_id, u.email,
           o.id as org_id, o.org_type, o.platform_id, ps.status as platform_status, m.role as member_role,
           (select json_agg(json_build_object('role', rm.role, 'permissions', rm.permissions))
              from iam.role_mappings rm where rm.org_id = o.id) as overrides,
           (select json_agg(json_build_object('permission', g.permission, 'granted', g.granted, 'expiresAt', g.expires_at))
              from iam.grants g
             where g.org_id = o.id and g.user_id = u.id and (g.expires_at is null or g.expires_at > ${nowSeconds})) as grants
      from ${from}
      join iam."user" u on u.id = src.user_id
      left join iam.member m on m.user_id = u.id and m.organization_id = ${orgIdExpr}
      left join iam.organization o on o.id = m.organization_id
      left join iam.platform_status ps on ps.platform_id = o.platform_id`;
}

function toPrincipal(row: PrincipalRow, type: "user" | "apikey", apiKeyId: string | null, expiresAt: string | null, nowSeconds: number): Principal {
  const roles = rolesOf(row.member_role);
  const inOrg = row.org_id !== null && row.org_type !== null;
  const overrides = new Map((row.overrides ?? []).map((o) => [o.role, o.permissions] as const));
  return {
    type,
    userId: row.user_id,
    email: row.email,
    sessionId: row.session_id,
    apiKeyId,
    expiresAt,
    orgId: inOrg ? row.org_id : null,
    orgType: inOrg ? row.org_type : null,
    platformId: inOrg ? row.platform_id : null,
    platformStatus: inOrg && row.platform_id ? (row.platform_status ?? "active") : null,
    role: inOrg ? effectiveRole(roles) : null,
    permissions: inOrg
      ? effectivePermissions({
          orgType: row.org_type!,
          roles,
          overrides,
          grants: (row.grants ?? []).map((g): GrantLike => ({ ...g, expiresAt: g.expiresAt === null ? null : Number(g.expiresAt) })),
          nowSeconds,
        })
      : [],
  };
}

const iso = (value: Date | string | null) => (value === null ? null : new Date(value).toISOString());

/**
 * Turns session tokens into principals (DESIGN §4) — the hot path of every request in the system,
 * kept off better-auth's request handler: one indexed query, then a short cache. Anything that
 * revokes a session or changes permissions calls `forget()`, so IAM itself never serves a stale
 * answer; other services' caches expire within 5 s.
 */
export class PrincipalResolver {
  private readonly cache = new TtlCache<Principal | null>(50_000);

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly ttl = { positiveMs: 5_000, negativeMs: 1_000 },
  ) {}

  async bySessionToken(token: string): Promise<Principal | null> {
    const hit = this.cache.get(token);
    if (hit !== undefined) {
      // a cached session may have expired since it was cached
      if (hit && hit.expiresAt && Date.parse(hit.expiresAt) <= this.clock.now().getTime()) return null;
      return hit;
    }
    const now = this.clock.now();
    const nowSeconds = unixSeconds(now);
    const from = sql`(select s.id as s_id, s.expires_at as s_expires, s.user_id, s.active_organization_id
                        from iam.session s where s.token = ${token} and s.expires_at > ${now.toISOString()}) src`;
    // a session without an active organization acts in the user's operator organization, else their oldest
    const orgId = sql`coalesce(src.active_organization_id, (
      select m2.organization_id from iam.member m2 join iam.organization o2 on o2.id = m2.organization_id
       where m2.user_id = src.user_id order by (o2.org_type = 'core-operator') desc, m2.created_at limit 1))`;
    const result = await this.db.execute(principalQuery(from, orgId, nowSeconds));
    const row = rowsOf<PrincipalRow>(result)[0];
    const principal = row ? toPrincipal(row, "user", null, iso(row.expires_at), nowSeconds) : null;
    this.cache.set(token, principal, principal ? this.ttl.positiveMs : this.ttl.negativeMs);
    return principal;
  }

  /** The principal of a user acting in one organization (API keys carry their organization). */
  async forUser(userId: string, orgId: string | null, extra: { apiKeyId: string; expiresAt: string | null }): Promise<Principal | null> {
    const nowSeconds = unixSeconds(this.clock.now());
    const from = sql`(select null::text as s_id, null::timestamptz as s_expires, ${userId}::text as user_id) src`;
    const result = await this.db.execute(principalQuery(from, sql`${orgId}::text`, nowSeconds));
    const row = rowsOf<PrincipalRow>(result)[0];
    return row ? toPrincipal(row, "apikey", extra.apiKeyId, extra.expiresAt, nowSeconds) : null;
  }

  /** Drops every cached answer: called on revocations and permission changes. */
  forget(): void {
    this.cache.clear();
  }
}
