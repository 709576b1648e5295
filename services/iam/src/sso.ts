import { sso } from "@better-auth/sso";
import { APIError } from "better-auth/api";
import { and, desc, eq, ne } from "drizzle-orm";
import { ApiError, conflict, forbidden, notFound } from "@core/kit";
import type { Db } from "@core/storage";
import type { IamContext } from "./app.js";
import type { AuditInput } from "./audit.js";
import type { Auth } from "./auth.js";
import { member, organization, ssoProvider } from "./db/schema.js";
import { rolesOf } from "./permissions.js";
import { refuseHeldBackIn } from "./policy-gate.js";

/**
 * Single sign-on per organization (issue 28, ADR 0026), on the auth library's SSO plugin: its
 * routes do the OpenID Connect work (discovery, state, PKCE, the code exchange, the id token's
 * signature, issuer and audience, account linking, joining the organization). What the plugin
 * leaves open is ours, here:
 * - who may configure a provider: an organization's owners (the plugin also lets admins), so
 *   IAM's routes (routes/sso.ts) wrap the plugin's register/update/delete calls;
 * - which domains an organization may claim: none another organization claims (the plugin checks
 *   nothing), and none that signs anyone in before an operator approved the claim (the plugin's
 *   `domainVerified`, set by approval instead of its DNS check, see the ADR);
 * - which people a provider may sign in: only addresses in its domains, and only addresses the
 *   provider says it verified (the plugin signs in any address a provider asserts);
 * - which providers IAM talks to, and how: any https origin that resolves to a public address, each
 *   connection through the SSRF guard (sso-connections.ts); IAM reads the discovery document itself.
 */

/** Error codes the SSO callback sends to the error page (`?error=`), besides the plugin's own. */
export const SSO_REFUSALS = {
  outsideDomains: "EMAIL_OUTSIDE_SSO_DOMAINS",
  unverifiedEmail: "EMAIL_NOT_VERIFIED_BY_PROVIDER",
  /** an address of the provider's configuration is one IAM does not connect to now (sso-connections.ts) */
  providerNotAllowed: "SSO_PROVIDER_NOT_ALLOWED",
} as const;

/** The roles people may join with on their first SSO sign-in; never owner. */
export const SSO_JOIN_ROLES = ["member", "admin"] as const;
export type SsoJoinRole = (typeof SSO_JOIN_ROLES)[number];

/** One DNS name of 2+ labels, lowercase: what a provider may claim. */
const DOMAIN = /^(?=.{4,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/;

/** Domains as given (any case, spaces), each checked, lowercased and de-duplicated; null if any is no domain. */
export function normalizeDomains(given: readonly string[]): string[] | null {
  const domains = [...new Set(given.map((d) => d.trim().toLowerCase().replace(/\.$/, "")))].filter(Boolean);
  return domains.length > 0 && domains.every((d) => DOMAIN.test(d)) ? domains : null;
}

/** The plugin keeps a provider's domains comma-separated in one column. */
export const domainsOf = (stored: string) =>
  stored
    .split(",")
    .map((d) => d.trim().toLowerCase())
    .filter(Boolean);

/** Whether two claims overlap as the plugin matches them: the same domain, or one under the other. */
const overlaps = (a: string, b: string) => a === b || a.endsWith(`.${b}`) || b.endsWith(`.${a}`);

/** Whether an address is in one of the domains (or a subdomain of one), as the plugin matches them. */
export function emailInDomains(email: string, domains: readonly string[]): boolean {
  const at = email.lastIndexOf("@");
  return at >= 1 && domainInDomains(email.slice(at + 1), domains);
}

/** Whether a domain is one of the domains or under one of them. */
const domainInDomains = (domain: string, domains: readonly string[]) => {
  const lower = domain.toLowerCase();
  return domains.some((d) => lower === d || lower.endsWith(`.${d}`));
};

/** The domains among `domains` that a provider of another organization claims already. */
export async function claimedElsewhere(db: Db, orgId: string, domains: readonly string[]): Promise<string[]> {
  const others = await db.select({ domain: ssoProvider.domain }).from(ssoProvider).where(ne(ssoProvider.organizationId, orgId));
  const claimed = others.flatMap((o) => domainsOf(o.domain));
  return domains.filter((d) => claimed.some((c) => overlaps(d, c)));
}

export type SsoProviderRow = typeof ssoProvider.$inferSelect;

/** A provider as IAM answers it: never the client secret, nor the rest of the plugin's stored config. */
export function providerView(row: SsoProviderRow, iamUrl: string) {
  const config = parseConfig(row.oidcConfig);
  return {
    providerId: row.providerId,
    organizationId: row.organizationId ?? "",
    issuer: row.issuer,
    clientId: typeof config.clientId === "string" ? config.clientId : "",
    domains: domainsOf(row.domain),
    domainsApproved: row.domainVerified,
    defaultRole: (SSO_JOIN_ROLES as readonly string[]).includes(row.defaultRole) ? (row.defaultRole as SsoJoinRole) : "member",
    redirectUri: `${iamUrl}/api/auth/sso/callback/${encodeURIComponent(row.providerId)}`,
  };
}
export type SsoProviderView = ReturnType<typeof providerView>;

function parseConfig(raw: string | null): Record<string, unknown> {
  try {
    const parsed: unknown = raw ? JSON.parse(raw) : null;
    return parsed && typeof parsed === "object" ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** An organization's providers (at most one is registered per organization). */
export async function providersOf(db: Db, orgId: string): Promise<SsoProviderRow[]> {
  return db.select().from(ssoProvider).where(eq(ssoProvider.organizationId, orgId)).orderBy(ssoProvider.providerId);
}

/** The provider `providerId` of organization `orgId`, else 404. */
export async function providerOf(db: Db, orgId: string, providerId: string): Promise<SsoProviderRow> {
  const [row] = await db
    .select()
    .from(ssoProvider)
    .where(and(eq(ssoProvider.organizationId, orgId), eq(ssoProvider.providerId, providerId)));
  if (!row) throw notFound("No such SSO provider in this organization");
  return row;
}

/**
 * The provider a sign-in start names, chosen as the plugin chooses (a provider id, else the
 * organization's, else the one whose domains hold the address's or the given domain), so that IAM
 * knows which provider the start will connect to; null when none (the plugin then answers itself).
 */
export async function providerToStart(db: Db, by: { providerId?: string; organizationSlug?: string; email?: string; domain?: string }): Promise<SsoProviderRow | null> {
  if (by.providerId) return (await db.select().from(ssoProvider).where(eq(ssoProvider.providerId, by.providerId)))[0] ?? null;
  if (by.organizationSlug) {
    const [row] = await db.select({ provider: ssoProvider }).from(ssoProvider).innerJoin(organization, eq(organization.id, ssoProvider.organizationId)).where(eq(organization.slug, by.organizationSlug)).orderBy(ssoProvider.providerId).limit(1);
    return row?.provider ?? null;
  }
  const domain = (by.domain ?? by.email?.split("@")[1] ?? "").toLowerCase();
  if (!domain) return null;
  // approved first: two claims of one domain get this far only by racing registrations (ADR 0026)
  const rows = await db.select().from(ssoProvider).orderBy(desc(ssoProvider.domainVerified), ssoProvider.providerId);
  return rows.find((row) => domainInDomains(domain, domainsOf(row.domain))) ?? null;
}

/** Every address of a provider's stored configuration: the origins IAM may connect to for it during a sign-in. */
export function providerAddresses(row: SsoProviderRow): string[] {
  const config = parseConfig(row.oidcConfig);
  const stored = ["discoveryEndpoint", "authorizationEndpoint", "tokenEndpoint", "jwksEndpoint", "userInfoEndpoint"].map((name) => config[name]);
  return [row.issuer, ...stored].filter((a): a is string => typeof a === "string" && a.length > 0);
}

/**
 * Why a stored provider may not be used now: an address of its configuration that the rule of
 * sso-connections.ts refuses without connecting (the operator may have narrowed the list, or turned
 * private providers off, since it was registered). Its names are looked up when IAM connects.
 */
export function providerRefusedNow(ctx: Pick<SsoDeps, "ssoConnections">, row: SsoProviderRow): string | null {
  for (const address of providerAddresses(row)) {
    const refusal = ctx.ssoConnections.refusalOf(address, "address");
    if (refusal) return refusal;
  }
  return null;
}

/**
 * Whether the actor is an owner of `orgId`: only owners configure single sign-on (ADR 0026), and
 * only from a session that organization's policy does not hold back, whichever organization the
 * session acts in (policy-gate.ts).
 */
export async function requireOwner(ctx: Pick<SsoDeps, "db" | "principals">, orgId: string, actor: Pick<SsoActor, "userId" | "sessionToken">): Promise<void> {
  const [org] = await ctx.db.select({ id: organization.id }).from(organization).where(eq(organization.id, orgId));
  if (!org) throw notFound("Organization not found");
  const [row] = await ctx.db
    .select({ role: member.role })
    .from(member)
    .where(and(eq(member.organizationId, orgId), eq(member.userId, actor.userId)));
  if (!row || !rolesOf(row.role).includes("owner")) throw forbidden("Only an owner of the organization may configure single sign-on");
  await refuseHeldBackIn(ctx.principals, actor.sessionToken, orgId);
}

/** The plugin's refusal (an APIError thrown by an `auth.api` call) in our envelope; anything else is thrown on. */
export function libraryError(err: unknown): unknown {
  if (!(err instanceof APIError)) return err;
  const status = Number(err.statusCode);
  const body = (err.body ?? {}) as { code?: string; message?: string };
  const message = (body.message ?? "The identity provider's configuration was refused").slice(0, 300);
  if (status === 404) return new ApiError(404, "NOT_FOUND", message);
  if (status === 409) return conflict("CONFLICT", message);
  if (status === 403) return forbidden(message);
  if (status === 502 || status === 503 || status === 504) return new ApiError(502, "UPSTREAM_UNAVAILABLE", `The identity provider could not be reached or answered wrongly: ${message}`);
  if (status >= 500) return err;
  return new ApiError(422, "INVALID_SSO_PROVIDER", message);
}

/**
 * The plugin, configured for IAM. `trustEmailVerified` lets the provider's `email_verified` claim
 * through, and `resolveUser` (the plugin's own decision point, run inside its sign-in transaction
 * before any user, account or session is written) refuses what the plugin would accept: an
 * address outside the provider's domains, or one the provider does not say it verified.
 */
export function ssoPlugin() {
  return sso({
    // one provider per organization is IAM's rule (routes/sso.ts); the plugin's count is per registering user
    providersLimit: 100,
    trustEmailVerified: true,
    // people join the provider's organization on their first sign-in, with the provider's role
    organizationProvisioning: {
      disabled: false,
      getRole: async ({ provider }) => {
        const role = (provider as { defaultRole?: unknown }).defaultRole;
        return role === "admin" ? "admin" : "member";
      },
    },
    // the plugin signs in through a provider only once its domains are verified; an operator's approval verifies them
    domainVerification: { enabled: true },
    schema: {
      ssoProvider: {
        additionalFields: { defaultRole: { type: "string", required: false, defaultValue: "member" } },
      },
    },
    resolveUser: async (input, { database }) => {
      const provider = (await database.findOne({ model: "ssoProvider", where: [{ field: "providerId", value: input.providerId }] })) as { domain?: string } | null;
      const domains = provider?.domain ? domainsOf(provider.domain) : [];
      if (!emailInDomains(input.providerUser.email, domains)) {
        return { action: "reject", code: SSO_REFUSALS.outsideDomains, message: "The identity provider answered an address outside the organization's domains" };
      }
      if (input.providerUser.emailVerified !== true) {
        return { action: "reject", code: SSO_REFUSALS.unverifiedEmail, message: "The identity provider did not confirm that the address is verified" };
      }
      return { action: "continue" };
    },
  });
}

/** What an owner gives to register a provider. */
export interface ProviderInput {
  issuer: string;
  clientId: string;
  clientSecret: string;
  domains: string[];
  defaultRole: SsoJoinRole;
}

/** What an owner may change: the client's credentials, the domains, the role people join with. */
export type ProviderChange = Partial<Omit<ProviderInput, "issuer">>;

/** Who acts, for the plugin (their session) and the audit log. */
export interface SsoActor {
  userId: string;
  sessionToken: string;
  audit: Pick<AuditInput, "actorType" | "actorId" | "ip" | "userAgent" | "requestId">;
}

const asOwner = (actor: SsoActor) => new Headers({ authorization: `Bearer ${actor.sessionToken}` });

async function checkedDomains(ctx: SsoDeps, orgId: string, given: readonly string[]): Promise<string[]> {
  const domains = normalizeDomains(given);
  if (!domains) throw new ApiError(400, "VALIDATION_ERROR", "Give the email domains the provider owns, like example.com", [{ path: "domains", message: "Each entry must be a domain name like example.com" }]);
  const taken = await claimedElsewhere(ctx.db, orgId, domains);
  if (taken.length > 0) throw conflict("SSO_DOMAIN_CLAIMED", `Another organization's single sign-on already claims ${taken.join(", ")}`);
  return domains;
}

/** The parts of IAM's context single sign-on uses. */
export type SsoDeps = Pick<IamContext, "db" | "auth" | "audit" | "config" | "ssoConnections" | "principals">;

/** The code a refused registration is audited with: ours, or the plugin's. */
const refusalCode = (err: unknown) => (err instanceof ApiError ? err.code : err instanceof APIError ? ((err.body as { code?: string } | undefined)?.code ?? String(err.statusCode)) : "error");

/**
 * Registers an organization's provider as its owner. IAM reads the issuer's discovery document
 * through the SSRF guard and checks every address in it (sso-connections.ts); the plugin then
 * stores the provider without discovering it again (`skipDiscovery`), and IAM writes the endpoints
 * it found into the plugin's configuration. One per organization; its domains sign nobody in until
 * an operator approves them.
 */
export async function registerProvider(ctx: SsoDeps, orgId: string, actor: SsoActor, input: ProviderInput): Promise<SsoProviderView> {
  await requireOwner(ctx, orgId, actor);
  if ((await providersOf(ctx.db, orgId)).length > 0) throw conflict("SSO_PROVIDER_EXISTS", "This organization has a single sign-on provider already: update or remove it");
  const domains = await checkedDomains(ctx, orgId, input.domains);
  const [org] = await ctx.db.select({ slug: organization.slug }).from(organization).where(eq(organization.id, orgId));
  const providerId = `${org!.slug}-oidc`;
  try {
    const discovered = await ctx.ssoConnections.discover(input.issuer);
    await ctx.auth.api.registerSSOProvider({
      headers: asOwner(actor),
      body: {
        providerId,
        issuer: discovered.issuer,
        domain: domains.join(","),
        organizationId: orgId,
        // the endpoints are written below: given here, the plugin would judge their hosts by its trusted origins
        oidcConfig: { clientId: input.clientId, clientSecret: input.clientSecret, pkce: true, scopes: ["openid", "email", "profile"], skipDiscovery: true },
        defaultRole: input.defaultRole,
      } as NonNullable<Parameters<Auth["api"]["registerSSOProvider"]>[0]>["body"],
    });
    const { issuer: _issuer, ...endpoints } = discovered;
    const stored = await providerOf(ctx.db, orgId, providerId);
    await ctx.db
      .update(ssoProvider)
      .set({ oidcConfig: JSON.stringify({ ...parseConfig(stored.oidcConfig), ...endpoints }) })
      .where(eq(ssoProvider.providerId, providerId));
  } catch (err) {
    // what the owner gave and why it was refused; never what a name resolved to, nor the secret
    await ctx.audit.record({ ...actor.audit, action: "sso.provider.create", outcome: "failure", orgId, targetType: "sso_provider", targetId: providerId, metadata: { issuer: input.issuer, domains, code: refusalCode(err) } });
    throw libraryError(err);
  }
  const row = await providerOf(ctx.db, orgId, providerId);
  await ctx.audit.record({ ...actor.audit, action: "sso.provider.create", outcome: "success", orgId, targetType: "sso_provider", targetId: providerId, metadata: { issuer: row.issuer, domains, defaultRole: input.defaultRole } });
  return providerView(row, ctx.config.iamUrl);
}

/** Changes a provider's client credentials, domains or join role; changed domains need an operator's approval again (the plugin resets it). */
export async function updateProvider(ctx: SsoDeps, orgId: string, providerId: string, actor: SsoActor, change: ProviderChange): Promise<SsoProviderView> {
  await requireOwner(ctx, orgId, actor);
  const before = await providerOf(ctx.db, orgId, providerId);
  const domains = change.domains ? await checkedDomains(ctx, orgId, change.domains) : undefined;
  const oidcConfig = change.clientId !== undefined || change.clientSecret !== undefined ? { ...(change.clientId !== undefined ? { clientId: change.clientId } : {}), ...(change.clientSecret !== undefined ? { clientSecret: change.clientSecret } : {}) } : undefined;
  if (!domains && !oidcConfig && !change.defaultRole) throw new ApiError(400, "VALIDATION_ERROR", "Nothing to change: give clientId, clientSecret, domains or defaultRole");
  try {
    await ctx.auth.api.updateSSOProvider({
      headers: asOwner(actor),
      body: {
        providerId,
        ...(domains ? { domain: domains.join(",") } : {}),
        ...(oidcConfig ? { oidcConfig } : {}),
        ...(change.defaultRole ? { defaultRole: change.defaultRole } : {}),
      } as NonNullable<Parameters<Auth["api"]["updateSSOProvider"]>[0]>["body"],
    });
  } catch (err) {
    await ctx.audit.record({ ...actor.audit, action: "sso.provider.update", outcome: "failure", orgId, targetType: "sso_provider", targetId: providerId, metadata: { changed: Object.keys(change).sort() } });
    throw libraryError(err);
  }
  const row = await providerOf(ctx.db, orgId, providerId);
  await ctx.audit.record({
    ...actor.audit,
    action: "sso.provider.update",
    outcome: "success",
    orgId,
    targetType: "sso_provider",
    targetId: providerId,
    // which fields changed, never the secret's value
    metadata: { changed: Object.keys(change).sort(), domains: domainsOf(row.domain), domainsApproved: row.domainVerified, approvalWithdrawn: before.domainVerified && !row.domainVerified },
  });
  return providerView(row, ctx.config.iamUrl);
}

/** Removes a provider and the sign-in links (accounts) made through it; people keep their IAM user and memberships. */
export async function deleteProvider(ctx: SsoDeps, orgId: string, providerId: string, actor: SsoActor): Promise<void> {
  await requireOwner(ctx, orgId, actor);
  const row = await providerOf(ctx.db, orgId, providerId);
  try {
    await ctx.auth.api.deleteSSOProvider({ headers: asOwner(actor), body: { providerId } });
  } catch (err) {
    throw libraryError(err);
  }
  await ctx.audit.record({ ...actor.audit, action: "sso.provider.delete", outcome: "success", orgId, targetType: "sso_provider", targetId: providerId, metadata: { issuer: row.issuer, domains: domainsOf(row.domain) } });
}

/** An operator approves a provider's domain claim (ADR 0026): from now on its domains sign people in. */
export async function approveProvider(ctx: SsoDeps, providerId: string, audit: SsoActor["audit"]): Promise<SsoProviderView> {
  const [found] = await ctx.db.select().from(ssoProvider).where(eq(ssoProvider.providerId, providerId));
  if (!found) throw notFound("No such SSO provider");
  // registration checks claims before it writes, so two owners registering one domain at the same
  // moment can both get through; approval is where a domain starts signing people in, so it checks again
  const taken = await claimedElsewhere(ctx.db, found.organizationId ?? "", domainsOf(found.domain));
  if (taken.length > 0) throw conflict("SSO_DOMAIN_CLAIMED", `Another organization's single sign-on also claims ${taken.join(", ")}: settle which one owns it before approving`);
  const [row] = await ctx.db.update(ssoProvider).set({ domainVerified: true }).where(eq(ssoProvider.providerId, providerId)).returning();
  if (!row) throw notFound("No such SSO provider");
  await ctx.audit.record({ ...audit, action: "sso.provider.approve", outcome: "success", orgId: row.organizationId, targetType: "sso_provider", targetId: providerId, metadata: { domains: domainsOf(row.domain) } });
  return providerView(row, ctx.config.iamUrl);
}

/** Every provider, for operators: those awaiting approval first. */
export async function allProviders(ctx: SsoDeps): Promise<SsoProviderView[]> {
  const rows = await ctx.db.select().from(ssoProvider).orderBy(ssoProvider.domainVerified, ssoProvider.providerId);
  return rows.map((r) => providerView(r, ctx.config.iamUrl));
}
