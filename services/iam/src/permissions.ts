import { OPERATOR_PERMISSIONS } from "@core/service-auth";

/** The organization roles of spec §5.7. */
export const ORG_ROLES = ["owner", "admin", "member"] as const;
export type OrgRole = (typeof ORG_ROLES)[number];
export type OrgType = "core-operator" | "tenant";

/** Every permission string the services check (DESIGN §4). */
export const TENANT_PERMISSIONS = [
  "org:manage",
  "members:invite",
  "platform:read",
  "platform:write",
  "billing:read",
  "billing:manage",
  "apikeys:manage",
  "audit:read",
  // reading the vault's documents over MCP (issue 29): every role holds it until an organization takes it away
  "vault:read",
] as const;

export const ALL_PERMISSIONS = [...TENANT_PERMISSIONS, ...OPERATOR_PERMISSIONS] as const;

const OPERATOR_ONLY = new Set<string>(OPERATOR_PERMISSIONS);
export const isOperatorOnly = (permission: string) => OPERATOR_ONLY.has(permission);

/**
 * Default role mappings, used until an organization overrides a role through `/api/core/roles`
 * (ADR 0004). Operators' owners and admins also hold the operator-only permissions.
 */
export function defaultPermissions(orgType: OrgType, role: string): string[] {
  const tenant: Record<string, string[]> = {
    owner: [...TENANT_PERMISSIONS],
    admin: TENANT_PERMISSIONS.filter((p) => p !== "billing:manage"),
    member: ["platform:read", "billing:read", "vault:read"],
  };
  const base = tenant[role] ?? [];
  if (orgType !== "core-operator") return base;
  if (role === "owner" || role === "admin") return [...base, ...OPERATOR_PERMISSIONS];
  if (role === "member") return [...base, "audit:read"];
  return base;
}

export interface GrantLike {
  permission: string;
  granted: boolean;
  expiresAt: number | null;
}

/**
 * Effective permissions (DESIGN §4): the role's mapping (the organization's override, else the
 * default) plus unexpired grants, minus unexpired denials — a denial always wins, an expired grant
 * or denial counts for nothing. Operator-only permissions never reach a non-operator organization.
 */
export function effectivePermissions(input: {
  orgType: OrgType;
  roles: string[];
  overrides: Map<string, string[]>;
  grants: GrantLike[];
  nowSeconds: number;
}): string[] {
  const result = new Set<string>();
  for (const role of input.roles) {
    for (const p of input.overrides.get(role) ?? defaultPermissions(input.orgType, role)) result.add(p);
  }
  const live = input.grants.filter((g) => g.expiresAt === null || g.expiresAt > input.nowSeconds);
  for (const g of live) if (g.granted) result.add(g.permission);
  for (const g of live) if (!g.granted) result.delete(g.permission);
  if (input.orgType !== "core-operator") for (const p of OPERATOR_ONLY) result.delete(p);
  return [...result].sort();
}

/** better-auth keeps several roles of one member comma-separated in one column. */
export const rolesOf = (role: string | null | undefined) =>
  (role ?? "")
    .split(",")
    .map((r) => r.trim())
    .filter(Boolean);

/** The highest of a member's roles, shown as the principal's effective role. */
export function effectiveRole(roles: string[]): string | null {
  for (const r of ORG_ROLES) if (roles.includes(r)) return r;
  return roles[0] ?? null;
}
