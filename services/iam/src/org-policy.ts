import { eq, sql } from "drizzle-orm";
import type { Principal } from "@core/service-auth";
import { rowsOf, type Db } from "@core/storage";
import { orgPolicies } from "./db/schema.js";
import { meetsTwoFactor } from "./two-factor.js";

/**
 * Organization policy (issue 28, ADR 0023): an owner can require two-factor and/or single sign-on of
 * every member. A session that does not meet the policy of the organization it acts in resolves to
 * a restricted principal: no organization, no role, no permission, and a `restriction` naming what
 * is missing and the IAM page that resolves it. API keys and service tokens are not sessions and
 * are not restricted: they are the credentials of programs, which can give no second factor.
 */
export interface OrgPolicy {
  requireTwoFactor: boolean;
  requireSso: boolean;
}

export const NO_POLICY: OrgPolicy = { requireTwoFactor: false, requireSso: false };

/** The IAM page where a member enrols in two-factor. */
export const ENROL_PAGE = "/account/two-factor?required=1";

/** The SSO helper's sign-in route for an organization, coming back to `next`. */
export const ssoSignInAddress = (slug: string, next = "/account") => `/sign-in/sso?organization=${encodeURIComponent(slug)}&next=${encodeURIComponent(next)}`;

export async function policyOf(db: Db, orgId: string): Promise<OrgPolicy> {
  const [row] = await db.select({ requireTwoFactor: orgPolicies.requireTwoFactor, requireSso: orgPolicies.requireSso }).from(orgPolicies).where(eq(orgPolicies.orgId, orgId));
  return row ?? NO_POLICY;
}

export async function setPolicy(db: Db, orgId: string, policy: OrgPolicy, by: string | null, at: Date): Promise<void> {
  await db
    .insert(orgPolicies)
    .values({ orgId, ...policy, updatedAt: at, updatedBy: by })
    .onConflictDoUpdate({ target: orgPolicies.orgId, set: { ...policy, updatedAt: at, updatedBy: by } });
}

/**
 * Whether a session made through SSO provider `providerId` meets the SSO requirement of `orgId`:
 * the provider is one of that organization's. The providers live in the SSO plugin's table
 * (`iam.sso_provider`, its `provider_id` and `organization_id`); without that table no session
 * meets an SSO requirement.
 */
async function ssoProviderOf(db: Db, providerId: string, orgId: string): Promise<boolean> {
  try {
    const result = await db.execute(sql`select 1 from iam.sso_provider where provider_id = ${providerId} and organization_id = ${orgId} limit 1`);
    return rowsOf(result).length > 0;
  } catch {
    return false;
  }
}

export interface SessionFacts {
  signInMethod: string | null;
  ssoProviderId: string | null;
  twoFactorEnabled: boolean;
}

/** What a session lacks under its organization's policy, or null when it meets it. */
export async function unmetPolicy(db: Db, policy: OrgPolicy, orgId: string, session: SessionFacts): Promise<PolicyCode | null> {
  if (policy.requireSso && !(session.ssoProviderId && (await ssoProviderOf(db, session.ssoProviderId, orgId)))) return "SSO_REQUIRED";
  if (policy.requireTwoFactor && !meetsTwoFactor(session.signInMethod, session.twoFactorEnabled)) return "TWO_FACTOR_REQUIRED";
  return null;
}

export type PolicyCode = "TWO_FACTOR_REQUIRED" | "SSO_REQUIRED";

/** What an organization's policy holds against a session: what is missing, and the IAM page that resolves it. */
export type Restriction = NonNullable<Principal["restriction"]>;

export const restrictionOf = (code: PolicyCode, orgId: string, slug: string): Restriction => ({ code, orgId, location: code === "SSO_REQUIRED" ? ssoSignInAddress(slug) : ENROL_PAGE });

/** The principal of a session that does not meet its organization's policy: acting nowhere, until it complies. */
export function restricted(principal: Principal, code: PolicyCode, orgId: string, slug: string): Principal {
  return {
    ...principal,
    orgId: null,
    orgType: null,
    platformId: null,
    platformStatus: null,
    role: null,
    permissions: [],
    restriction: restrictionOf(code, orgId, slug),
  };
}

/** What a restricted session may still do on IAM: comply, look at itself, end sessions, switch organization. */
export function allowedWhileRestricted(path: string): boolean {
  return (
    /^\/account\/two-factor(\/|$)/.test(path) ||
    /^\/sign-in(\/|$)/.test(path) ||
    path === "/sign-out" ||
    path === "/account/organization" ||
    path === "/api/core/session" ||
    /^\/api\/sessions(\/|$)/.test(path) ||
    /^\/api\/auth\/(two-factor\/|passkey\/|sign-out$|get-session$|list-sessions$|revoke-|organization\/set-active$|sign-in\/sso$)/.test(path)
  );
}

/** A sentence for the refusal of a restricted session: the one every service gives (`@core/service-auth`). */
export { policyMessage as restrictionMessage } from "@core/service-auth";
