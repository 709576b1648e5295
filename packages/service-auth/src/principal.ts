import { z } from "@hono/zod-openapi";

/** The principal of DESIGN §4: who a session token or API key stands for, resolved by IAM. */
export const PrincipalSchema = z
  .object({
    type: z.enum(["user", "apikey"]),
    userId: z.string(),
    email: z.string(),
    sessionId: z.string().nullable(),
    apiKeyId: z.string().nullable(),
    expiresAt: z.string().nullable().openapi({ description: "ISO 8601" }),
    orgId: z.string().nullable(),
    orgType: z.enum(["core-operator", "tenant"]).nullable(),
    platformId: z.string().nullable(),
    platformStatus: z.enum(["active", "suspended"]).nullable(),
    role: z.string().nullable(),
    permissions: z.array(z.string()),
    /**
     * Set when the session does not meet its organization's policy (issue 28, ADR 0023): the
     * principal then acts in no organization and holds no permission until the person complies.
     */
    restriction: z
      .object({
        code: z.enum(["TWO_FACTOR_REQUIRED", "SSO_REQUIRED"]),
        orgId: z.string(),
        location: z.string().openapi({ description: "the IAM page that resolves it (enrolment, or the organization's SSO sign-in)" }),
      })
      .optional(),
  })
  .openapi("Principal");

export type Principal = z.infer<typeof PrincipalSchema>;

/** Who is calling: a person (through a session or API key) or another service (service token). */
export type Caller = { kind: "principal"; principal: Principal } | { kind: "service"; serviceId: string };

/** Permissions only members of the `core-operator` organization can hold (DESIGN §4). */
export const OPERATOR_PERMISSIONS = ["stacks:publish", "platforms:manage", "billing:operate", "orgs:create"] as const;

export const isOperator = (p: Principal) => p.orgType === "core-operator";

/**
 * Whether a principal holds `permission` over a resource of `scope`. Operators act platform-wide;
 * everyone else only inside their own organization or platform.
 */
export function holds(p: Principal, permission: string, scope: { orgId?: string | null; platformId?: string | null } = {}): boolean {
  if (!p.permissions.includes(permission)) return false;
  if (isOperator(p)) return true;
  if (scope.orgId !== undefined && scope.orgId !== p.orgId) return false;
  if (scope.platformId !== undefined && scope.platformId !== p.platformId) return false;
  return true;
}

/**
 * Why a person may be refused a platform that is theirs: they act in one organization at a time
 * (DESIGN §4), and the platform may belong to another. A sentence for 403 messages that says which
 * organization is active and how to switch.
 */
export function activeOrganizationHint(p: Principal): string {
  if (!p.orgId) return "You are in no organization yet: set one up on the onboarding page, or accept an invitation.";
  const where = p.platformId ? `whose platform is ${p.platformId}` : "which has no platform";
  return (
    `You act in organization ${p.orgId}, ${where}. If the platform belongs to another of your organizations, ` +
    "switch to it: core org list, then core org switch <slug>, or Switch on your account page."
  );
}
