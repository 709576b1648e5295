import { z } from "@hono/zod-openapi";
import { ApiError, forbidden } from "@core/kit";

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
        code: z.enum(["TWO_FACTOR_REQUIRED", "SSO_REQUIRED"]).openapi({ description: "what the policy asks: two-factor authentication, or signing in through the organization's SSO provider" }),
        orgId: z.string().openapi({ description: "the organization whose policy holds the session back" }),
        location: z.string().openapi({
          description:
            "the IAM page that resolves it (enrolment, or the organization's SSO sign-in): a path on IAM as IAM answers it; the other services make it an absolute IAM address in their refusals (docs/vault/cross-cutting/service-auth.md#Policy refusals)",
        }),
      })
      .optional()
      .openapi({ description: "present only when the session does not meet its organization's policy (ADR 0023); every service then refuses it with 403 FORBIDDEN naming the policy" }),
  })
  .openapi("Principal");

export type Principal = z.infer<typeof PrincipalSchema>;

/** What holds a session back: the policy, its organization, and the IAM page that resolves it (ADR 0023). */
export type Restriction = NonNullable<Principal["restriction"]>;

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
  if (p.restriction) return `${policyMessage(p.restriction.code)}: ${p.restriction.location}`;
  if (!p.orgId) return "You are in no organization yet: set one up on the onboarding page, or accept an invitation.";
  const where = p.platformId ? `whose platform is ${p.platformId}` : "which has no platform";
  return (
    `You act in organization ${p.orgId}, ${where}. If the platform belongs to another of your organizations, ` +
    "switch to it: core org list, then core org switch <slug>, or Switch on your account page."
  );
}

/** The sentence that tells a person what their organization's policy asks of them (ADR 0023). */
export const policyMessage = (code: Restriction["code"]): string =>
  code === "TWO_FACTOR_REQUIRED"
    ? "Your organization requires two-factor authentication: set it up, or sign in again with your code"
    : "Your organization requires signing in through its single sign-on provider";

/**
 * 403 FORBIDDEN for a session held back by its organization's policy, the same in every service
 * (docs/vault/cross-cutting/errors.md): the policy's sentence, and `details: { policy, orgId,
 * location }`, `location` the IAM page where the person complies (a client or page sends them there).
 */
export function policyRefusal(restriction: Restriction): ApiError {
  return new ApiError(403, "FORBIDDEN", policyMessage(restriction.code), { policy: restriction.code, orgId: restriction.orgId, location: restriction.location });
}

/**
 * The refusal of a caller that lacks what a route needs (an organization, a platform, a
 * permission): `message` as 403 FORBIDDEN, except for a principal held back by its organization's
 * policy, which holds nothing because of that policy: it is told the policy (`policyRefusal`).
 * Every such refusal of a resource service goes through here.
 */
export function forbiddenFor(who: Caller | Principal | null | undefined, message: string): ApiError {
  const principal = who && "kind" in who ? (who.kind === "principal" ? who.principal : null) : who;
  return principal?.restriction ? policyRefusal(principal.restriction) : forbidden(message);
}
