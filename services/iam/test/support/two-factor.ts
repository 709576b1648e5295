import { expect } from "vitest";
import { call, cookiesOf, PASSWORD, sessionCookieOf, tenantOrg, type Iam, type SignedUp } from "./harness.js";
import { clearOfStepBoundary, secretOfUri, totp } from "./totp.js";

/**
 * Turns two-factor on for `person` with their bearer session, through the library's routes as a
 * client does: the password, then a code of the secret it answers. Answers the replacing session
 * (its token and cookie) and the secret. `body` is sent with the confirming code (for instance
 * `revokeOtherSessions`).
 */
export async function enrolTwoFactor(iam: Iam, person: SignedUp, body: Record<string, unknown> = {}) {
  const enable = await call(iam, "POST", "/api/auth/two-factor/enable", { token: person.token, body: { password: PASSWORD } });
  expect(enable.status, JSON.stringify(enable.body)).toBe(200);
  const secret = secretOfUri(enable.body.totpURI);
  await clearOfStepBoundary();
  const confirmed = await call(iam, "POST", "/api/auth/two-factor/verify-totp", { token: person.token, body: { code: totp(secret, -1), ...body } });
  expect(confirmed.status, JSON.stringify(confirmed.body)).toBe(200);
  return { ...person, token: confirmed.body.token as string, cookie: sessionCookieOf(confirmed), secret };
}

/** Sets an organization's policy as `by` (an owner who meets it). */
export const setOrgPolicy = (iam: Iam, by: { token: string }, orgId: string, policy: { requireTwoFactor: boolean; requireSso: boolean }) =>
  call(iam, "PUT", `/api/core/organizations/${orgId}/policy`, { token: by.token, body: policy });

/** The signed form of a session token, as the auth library's session cookie carries it (`token.signature`). */
export const signedToken = (person: { cookie: string }) => decodeURIComponent(person.cookie.slice(person.cookie.indexOf("=") + 1));

/** Enrolled `person` signing in with the password and then a code: a session that gave two factors. */
export async function signInWithCode(iam: Iam, person: { email: string; secret: Buffer }) {
  const first = await call(iam, "POST", "/api/auth/sign-in/email", { headers: { origin: iam.origin }, body: { email: person.email, password: PASSWORD } });
  expect(first.status, JSON.stringify(first.body)).toBe(200);
  expect(first.body.twoFactorRedirect).toBe(true);
  const challenge = cookiesOf(first.headers);
  await clearOfStepBoundary();
  const verified = await call(iam, "POST", "/api/auth/two-factor/verify-totp", { cookie: challenge, body: { code: totp(person.secret) } });
  expect(verified.status, JSON.stringify(verified.body)).toBe(200);
  return { token: verified.body.token as string, cookie: sessionCookieOf(verified) };
}

/** A tenant made by `by` (an operator) whose owner gave two factors and requires them of every member. */
export async function orgRequiringTwoFactor(iam: Iam, by: { token: string }) {
  const org = await tenantOrg(iam, by);
  const owner = await enrolTwoFactor(iam, org.owner);
  const set = await setOrgPolicy(iam, owner, org.orgId, { requireTwoFactor: true, requireSso: false });
  expect(set.status, JSON.stringify(set.body)).toBe(200);
  return { ...org, owner };
}
