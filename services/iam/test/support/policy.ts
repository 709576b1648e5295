import { call, joinOrg, PASSWORD, sessionCookieOf, type Iam, type SignedUp } from "./harness.js";
import { clearOfStepBoundary, secretOfUri, totp } from "./totp.js";

/**
 * Turns two-factor on for `person` through the library's routes with their bearer session, and
 * answers the session that replaces it (made with a code, so it meets a two-factor policy).
 */
export async function enrolTwoFactor(iam: Iam, person: SignedUp): Promise<SignedUp & { secret: Buffer }> {
  const enable = await call(iam, "POST", "/api/auth/two-factor/enable", { token: person.token, body: { password: PASSWORD } });
  if (enable.status !== 200) throw new Error(`two-factor refused: ${enable.status} ${JSON.stringify(enable.body)}`);
  const secret = secretOfUri(enable.body.totpURI);
  await clearOfStepBoundary();
  const confirmed = await call(iam, "POST", "/api/auth/two-factor/verify-totp", { token: person.token, body: { code: totp(secret, -1) } });
  if (confirmed.status !== 200) throw new Error(`two-factor code refused: ${confirmed.status} ${JSON.stringify(confirmed.body)}`);
  return { ...person, token: confirmed.body.token as string, cookie: sessionCookieOf(confirmed), secret };
}

/**
 * An organization that requires two-factor of its members (docs/vault/concepts/second-factors-and-policy.md),
 * set by its owner (enrolled first, as the policy asks), and a member who signed in with a password
 * only: every session of that member is held back by the policy.
 */
export async function heldBackMember(iam: Iam, org: { orgId: string; owner: SignedUp }): Promise<{ owner: SignedUp; member: SignedUp }> {
  const owner = await enrolTwoFactor(iam, org.owner);
  const member = await joinOrg(iam, org.orgId, owner, "member");
  const set = await call(iam, "PUT", `/api/core/organizations/${org.orgId}/policy`, { token: owner.token, body: { requireTwoFactor: true, requireSso: false } });
  if (set.status !== 200) throw new Error(`policy refused: ${set.status} ${JSON.stringify(set.body)}`);
  return { owner, member };
}
