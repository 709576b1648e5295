import { expect } from "vitest";
import { call, signUp, uniqueEmail, type Iam, type Operator, type SignedUp } from "./harness.js";
import type { Idp } from "./oidc-idp.js";
import { PageBrowser } from "./pages.js";

/** The address IAM's SSO tests run under: the identity providers' redirect URIs name it. */
export const SSO_IAM_URL = "http://localhost:4100";

/** The redirect URI of the organization `slug`'s provider (`<slug>-oidc`). */
export const callbackOf = (slug: string) => `${SSO_IAM_URL}/api/auth/sso/callback/${slug}-oidc`;

/** An organization of that slug, made by the operator, with a new owner. */
export async function orgWithOwner(iam: Iam, ops: Operator, slug: string) {
  const owner = await signUp(iam, uniqueEmail("owner"));
  const r = await call(iam, "POST", "/api/core/organizations", { token: ops.token, body: { name: `Org ${slug}`, slug, ownerId: owner.userId } });
  expect(r.status).toBe(201);
  return { orgId: r.body.id as string, slug, owner };
}

/** The owner registers the organization's provider through IAM's route. */
export const registerProvider = (iam: Iam, orgId: string, by: SignedUp, body: Record<string, unknown>) => call(iam, "POST", `/api/core/organizations/${orgId}/sso-providers`, { token: by.token, body });

/** What an owner registers for `idp`, with these domains. */
export const providerBody = (idp: Idp, domains: string[], extra: Record<string, unknown> = {}) => ({ issuer: idp.issuer, clientId: idp.clientId, clientSecret: idp.clientSecret, domains, ...extra });

/** An operator approves the provider's domains. */
export const approveProvider = (iam: Iam, ops: Operator, providerId: string) => call(iam, "POST", `/api/core/sso-providers/${providerId}/approval`, { token: ops.token });

/** Starts the organization's SSO in a page browser: the provider's authorization address. */
export async function startAt(browser: PageBrowser, idp: Idp, slug: string, next = "/account") {
  const started = await browser.get(`/sign-in/sso?organization=${slug}&next=${encodeURIComponent(next)}`);
  expect(started.status, started.html).toBe(302);
  expect(started.location!.startsWith(`${idp.origin}/auth?`)).toBe(true);
  return started.location!;
}

/** The path and query of IAM's callback the provider sent the browser back to. */
export function localPath(url: string) {
  const u = new URL(url);
  expect(u.origin).toBe(SSO_IAM_URL);
  return u.pathname + u.search;
}

/** A person signs in at `idp` as `login`, from the organization's start on `iam`: IAM's answer to the callback. */
export async function signInThrough(iam: Iam, idp: Idp, slug: string, login: string, next = "/account") {
  const browser = new PageBrowser(iam);
  const back = await idp.authorize(await startAt(browser, idp, slug, next), login);
  return { browser, landed: await browser.get(localPath(back)) };
}
