import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "drizzle-orm";
import { rowsOf, testDatabases, type DatabaseHandle } from "@core/storage";
import { call, iamOverHttpWithOperator, joinOrg, PASSWORD, sessionIdOf, setActive, signIn, signUp, tenantOrg, uniqueEmail, type Iam, type Operator } from "./support/harness.js";
import { enrolTwoFactor, orgRequiringTwoFactor, setOrgPolicy, signInWithCode } from "./support/two-factor.js";
import { oauthRefreshTokenOf, refreshGrant } from "./support/authorization-code.js";
import { cliLoginApprovedBy, pollToken, refresh, startDeviceLogin } from "./support/device.js";
import { PageBrowser } from "./support/pages.js";
import { clearOfStepBoundary, secretOfUri, totp } from "./support/totp.js";

/**
 * Issue 35's review of the rest of identity: the attacks of the classes the issue named (a
 * credential made or refreshed around the policy, one that outlives an ending, a read that judges
 * only the organization a session acts in, an answer that tells of records beyond the caller's),
 * found beyond its listed findings, each performed over real HTTP against IAM on loopback. The
 * invariants are in docs/vault/cross-cutting/security.md ("Security invariants").
 */
describe.each(testDatabases())("security review over HTTP on $name", ({ open }) => {
  let suite: Awaited<ReturnType<typeof iamOverHttpWithOperator>>;
  let database: DatabaseHandle;
  let iam: Iam & { close(): Promise<void> };
  let op: Operator;
  let service: string;

  beforeAll(async () => ({ database, iam, op, service } = suite = await iamOverHttpWithOperator(open)));
  afterAll(() => suite?.close());

  const validateSession = (token: string) => call(iam, "POST", "/api/validate-session", { token: service, body: { token } });
  /** A session lapses by time (an idle CLI keeps only its refresh token; a browser left for a week). */
  const lapse = (token: string) => database.db.execute(sql`update iam.session set expires_at = now() - interval '1 minute' where token = ${token}`);

  describe("a CLI login ends with the session that approved it, also before the CLI collects it", () => {
    it("the CLI gets no tokens when the approving session was revoked between approval and its next poll", async () => {
      const person = await signUp(iam, uniqueEmail("approver"));
      const other = await signIn(iam, person);
      const started = await startDeviceLogin(iam);
      expect((await call(iam, "POST", "/oauth/device/authorize", { token: person.token, body: { user_code: started.user_code } })).status).toBe(200);
      expect((await call(iam, "DELETE", `/api/sessions/${await sessionIdOf(iam, person)}`, { token: other.token })).status).toBe(200);
      const polled = await pollToken(iam, started.device_code);
      expect(polled.status, JSON.stringify(polled.body)).toBe(400);
      expect(polled.body.error).toBe("invalid_grant");
      expect(polled.body.access_token).toBeUndefined();
    });

    it("is still collected when its browser turned two-factor on meanwhile, with the strength it was approved with", async () => {
      const strict = await orgRequiringTwoFactor(iam, op);
      const member = await joinOrg(iam, strict.orgId, strict.owner, "member");
      const free = await tenantOrg(iam, op, member);
      expect((await setActive(iam, member, free.orgId)).status).toBe(200);
      const started = await startDeviceLogin(iam);
      expect((await call(iam, "POST", "/oauth/device/authorize", { token: member.token, body: { user_code: started.user_code } })).status).toBe(200);
      // the library replaces the enrolling session with a new one: the approval is handed over, not ended
      await enrolTwoFactor(iam, member, { revokeOtherSessions: false });
      const polled = await pollToken(iam, started.device_code);
      expect(polled.status, JSON.stringify(polled.body)).toBe(200);
      expect((await setActive(iam, { token: polled.body.access_token }, strict.orgId)).status).toBe(200);
      expect((await validateSession(polled.body.access_token)).body.principal.restriction, "approved with a password alone").toMatchObject({ code: "TWO_FACTOR_REQUIRED", orgId: strict.orgId });
    });

    it("nor when a password change signed the approving session out before the poll", async () => {
      const person = await signUp(iam, uniqueEmail("approver-pw"));
      const approver = await signIn(iam, person);
      const started = await startDeviceLogin(iam);
      expect((await call(iam, "POST", "/oauth/device/authorize", { token: approver.token, body: { user_code: started.user_code } })).status).toBe(200);
      const changed = await call(iam, "POST", "/api/auth/change-password", { token: person.token, body: { currentPassword: PASSWORD, newPassword: "another-horse-battery" } });
      expect(changed.status, JSON.stringify(changed.body)).toBe(200);
      const polled = await pollToken(iam, started.device_code);
      expect(polled.body.error, JSON.stringify(polled.body)).toBe("invalid_grant");
    });
  });

  describe("a CLI login racing the end of the session that approved it", () => {
    it("leaves no working token when the approving session is revoked while the CLI refreshes", async () => {
      for (let round = 0; round < 20; round++) {
        const person = await signUp(iam, uniqueEmail("race"));
        const approver = await signIn(iam, person);
        const cli = await cliLoginApprovedBy(iam, approver);
        const approverId = await sessionIdOf(iam, approver);
        const [refreshed] = await Promise.all([refresh(iam, cli.refresh_token), call(iam, "DELETE", `/api/sessions/${approverId}`, { token: person.token })]);
        if (refreshed.status !== 200) continue;
        expect((await validateSession(refreshed.body.access_token)).body.valid, `round ${round}: the refreshed access token`).toBe(false);
        expect((await refresh(iam, refreshed.body.refresh_token)).body.error, `round ${round}: the refreshed refresh token`).toBe("invalid_grant");
      }
    });
    it("leaves no working token when the approving session is revoked while the CLI collects its login", async () => {
      for (let round = 0; round < 20; round++) {
        const person = await signUp(iam, uniqueEmail("race-poll"));
        const approver = await signIn(iam, person);
        const started = await startDeviceLogin(iam);
        expect((await call(iam, "POST", "/oauth/device/authorize", { token: approver.token, body: { user_code: started.user_code } })).status).toBe(200);
        const approverId = await sessionIdOf(iam, approver);
        const [polled] = await Promise.all([pollToken(iam, started.device_code), call(iam, "DELETE", `/api/sessions/${approverId}`, { token: person.token })]);
        if (polled.status !== 200) continue;
        expect((await validateSession(polled.body.access_token)).body.valid, `round ${round}: the access token`).toBe(false);
        expect((await refresh(iam, polled.body.refresh_token)).body.error, `round ${round}: the refresh token`).toBe("invalid_grant");
      }
    });
  });

  describe("the library's sign-outs of the other sessions end what IAM's own do", () => {
    for (const route of ["/api/auth/revoke-other-sessions", "/api/auth/revoke-sessions"]) {
      it(`${route} ends the CLI logins and apps' tokens whose sessions have lapsed`, async () => {
        const person = await signUp(iam, uniqueEmail("lapsed"));
        const approver = await signIn(iam, person);
        const cli = await cliLoginApprovedBy(iam, approver);
        const consenting = await signIn(iam, person);
        const app = await oauthRefreshTokenOf(iam, consenting);
        // lapse ends nothing (ADR 0029): the CLI and the app keep their refresh tokens
        for (const token of [cli.access_token, approver.token, consenting.token]) await lapse(token);
        const signedOut = await call(iam, "POST", route, { token: person.token, body: {} });
        expect(signedOut.status, JSON.stringify(signedOut.body)).toBe(200);
        expect((await refresh(iam, cli.refresh_token)).body.error).toBe("invalid_grant");
        expect((await refreshGrant(iam, app.clientId, app.refreshToken)).body.error).toBe("invalid_grant");
      });
    }
  });

  describe("an organization's policy holds on IAM's own routes that name it", () => {
    /** A second owner of a strict organization, with a password alone, acting in a tenant of their own without a policy. */
    async function heldBackOwnerActingElsewhere() {
      const strict = await orgRequiringTwoFactor(iam, op);
      const owner = await joinOrg(iam, strict.orgId, strict.owner, "owner");
      const own = await tenantOrg(iam, op, owner);
      expect((await setActive(iam, owner, own.orgId)).status).toBe(200);
      expect((await validateSession(owner.token)).body.principal.orgId).toBe(own.orgId);
      return { strict, owner, own };
    }

    it("an owner held back by the policy cannot turn it off from a session acting in another organization", async () => {
      const { strict, owner } = await heldBackOwnerActingElsewhere();
      const off = await setOrgPolicy(iam, owner, strict.orgId, { requireTwoFactor: false, requireSso: false });
      expect(off.status, JSON.stringify(off.body)).toBe(403);
      expect(off.body.error.details).toMatchObject({ policy: "TWO_FACTOR_REQUIRED", orgId: strict.orgId });
      const still = await call(iam, "GET", `/api/core/organizations/${strict.orgId}/policy`, { token: strict.owner.token });
      expect(still.body).toEqual({ requireTwoFactor: true, requireSso: false });
    });

    it("nor read or configure its single sign-on, by the API or on the page", async () => {
      const { strict, owner, own } = await heldBackOwnerActingElsewhere();
      const listed = await call(iam, "GET", `/api/core/organizations/${strict.orgId}/sso-providers`, { token: owner.token });
      expect(listed.status, JSON.stringify(listed.body)).toBe(403);
      expect(listed.body.error.details).toMatchObject({ policy: "TWO_FACTOR_REQUIRED", orgId: strict.orgId });
      const removed = await call(iam, "DELETE", `/api/core/organizations/${strict.orgId}/sso-providers/any`, { token: owner.token });
      expect(removed.status, JSON.stringify(removed.body)).toBe(403);
      const page = await new PageBrowser(iam, owner.cookie).get("/account/sso");
      expect(page.status).toBe(200);
      expect(page.html).toContain(own.slug);
      expect(page.html).not.toContain(strict.slug);
    });

    it("an API key reads the policy of the organization it was made for only", async () => {
      const { strict, owner } = await heldBackOwnerActingElsewhere();
      const made = await call(iam, "POST", "/api/auth/api-key/create", { token: owner.token, body: { name: "own" } });
      expect(made.status, JSON.stringify(made.body)).toBe(200);
      const read = await call(iam, "GET", `/api/core/organizations/${strict.orgId}/policy`, { headers: { "x-api-key": made.body.key } });
      expect(read.status, JSON.stringify(read.body)).toBe(403);
    });
  });

  describe("a session that gave no second factor gains none", () => {
    it("cannot read the authenticator's secret or make backup codes with the password", async () => {
      const person = await signUp(iam, uniqueEmail("weak"));
      const before = await signIn(iam, person);
      const enrolled = await enrolTwoFactor(iam, person, { revokeOtherSessions: false });
      for (const path of ["/api/auth/two-factor/get-totp-uri", "/api/auth/two-factor/generate-backup-codes"]) {
        const asked = await call(iam, "POST", path, { token: before.token, body: { password: PASSWORD } });
        expect(asked.status, `${path}: ${JSON.stringify(asked.body)}`).toBe(403);
        expect(JSON.stringify(asked.body)).not.toMatch(/otpauth:|backupCodes/);
      }
      // the session that gave the code may
      const codes = await call(iam, "POST", "/api/auth/two-factor/generate-backup-codes", { token: enrolled.token, body: { password: PASSWORD } });
      expect(codes.status, JSON.stringify(codes.body)).toBe(200);
    });

    it("turning two-factor off and on again does not make the sessions and CLI logins of the first enrolment count again", async () => {
      const strict = await orgRequiringTwoFactor(iam, op);
      const member = await joinOrg(iam, strict.orgId, strict.owner, "member");
      const first = await enrolTwoFactor(iam, member);
      const cli = await cliLoginApprovedBy(iam, first);
      expect((await validateSession(first.token)).body.principal.restriction).toBeUndefined();
      expect((await validateSession(cli.access_token)).body.principal.restriction).toBeUndefined();
      // a second browser gives a code, then turns two-factor off with a backup code and on again with a new authenticator, keeping the others
      const second = await signInWithCode(iam, { email: member.email, secret: first.secret });
      const codes = await call(iam, "POST", "/api/auth/two-factor/generate-backup-codes", { token: second.token, body: { password: PASSWORD } });
      expect(codes.status, JSON.stringify(codes.body)).toBe(200);
      const off = await call(iam, "POST", "/api/auth/two-factor/disable", { token: second.token, body: { password: PASSWORD, code: codes.body.backupCodes[0] } });
      expect(off.status, JSON.stringify(off.body)).toBe(200);
      const afterOff = off.body.token ?? (await signIn(iam, member)).token;
      const enable = await call(iam, "POST", "/api/auth/two-factor/enable", { token: afterOff, body: { password: PASSWORD } });
      expect(enable.status, JSON.stringify(enable.body)).toBe(200);
      await clearOfStepBoundary();
      const on = await call(iam, "POST", "/api/auth/two-factor/verify-totp", { token: afterOff, body: { code: totp(secretOfUri(enable.body.totpURI), 1), revokeOtherSessions: false } });
      expect(on.status, JSON.stringify(on.body)).toBe(200);
      expect((await validateSession(on.body.token)).body.principal.restriction).toBeUndefined();
      // the code the first sessions gave belonged to an authenticator that no longer counts
      expect((await validateSession(first.token)).body.principal.restriction, "the first enrolment's session").toMatchObject({ code: "TWO_FACTOR_REQUIRED", orgId: strict.orgId });
      const refreshed = await refresh(iam, cli.refresh_token);
      expect(refreshed.status, JSON.stringify(refreshed.body)).toBe(200);
      expect((await validateSession(refreshed.body.access_token)).body.principal.restriction, "the CLI login it approved").toMatchObject({ code: "TWO_FACTOR_REQUIRED" });
    });
  });

  describe("no change races an organization out of its last manager", () => {
    /** The roles of an organization's members, as stored. */
    const rolesIn = async (orgId: string) => rowsOf<{ role: string }>(await database.db.execute(sql`select role from iam.member where organization_id = ${orgId}`)).map((r) => r.role);
    const memberIdOf = async (orgId: string, userId: string) => rowsOf<{ id: string }>(await database.db.execute(sql`select id from iam.member where organization_id = ${orgId} and user_id = ${userId}`))[0]!.id;

    for (const [what, asked] of [
      ["demoting", (orgId: string, memberId: string) => ({ path: "/api/auth/organization/update-member-role", body: { organizationId: orgId, memberId, role: "member" } })],
      ["removing", (orgId: string, memberId: string) => ({ path: "/api/auth/organization/remove-member", body: { organizationId: orgId, memberIdOrEmail: memberId } })],
    ] as const) {
      it(`two owners ${what} each other at once leave the organization a manager`, async () => {
        for (let round = 0; round < 5; round++) {
          const org = await tenantOrg(iam, op);
          const other = await joinOrg(iam, org.orgId, org.owner, "owner");
          const [first, second] = [asked(org.orgId, await memberIdOf(org.orgId, other.userId)), asked(org.orgId, await memberIdOf(org.orgId, org.owner.userId))];
          const answers = await Promise.all([call(iam, "POST", first.path, { token: org.owner.token, body: first.body }), call(iam, "POST", second.path, { token: other.token, body: second.body })]);
          const roles = await rolesIn(org.orgId);
          expect(roles.filter((role) => role === "owner"), `round ${round}: ${answers.map((a) => a.status)} left ${roles}`).toHaveLength(1);
          expect(answers.map((a) => a.status).sort(), `round ${round}`).toContain(200);
        }
      });
    }
  });

  describe("an API key is one by its look", () => {
    it("refuses a prefix of the client's own: every key starts core_, which the CLI and the log rule read", async () => {
      const person = await signUp(iam, uniqueEmail("prefix"));
      const made = await call(iam, "POST", "/api/auth/api-key/create", { token: person.token, body: { name: "disguised", prefix: "plt_" } });
      expect(made.status, JSON.stringify(made.body)).toBe(400);
      expect(made.body.error.code).toBe("VALIDATION_ERROR");
      expect((await call(iam, "POST", "/api/auth/api-key/create", { token: person.token, body: { name: "plain", prefix: "core_" } })).body.key).toMatch(/^core_/);
    });
  });

  describe("a person is a member of an organization once", () => {
    it("accepting an invitation to an organization one joined meanwhile (its single sign-on provisions members) answers 400, and adds no second membership", async () => {
      const org = await tenantOrg(iam, op);
      const person = await signUp(iam, uniqueEmail("joined"));
      const invited = await call(iam, "POST", `/api/core/organizations/${org.orgId}/invitations`, { token: org.owner.token, body: { email: person.email, role: "admin" } });
      expect(invited.status).toBe(201);
      // what the SSO plugin's provisioning writes when the person signs in through the organization's provider
      await database.db.execute(sql`insert into iam.member (id, organization_id, user_id, role, created_at) values (${`mem-${Date.now().toString(36)}`}, ${org.orgId}, ${person.userId}, 'member', now())`);
      const accepted = await call(iam, "POST", "/api/auth/organization/accept-invitation", { token: person.token, body: { invitationId: invited.body.id } });
      expect(accepted.status, JSON.stringify(accepted.body)).toBe(400);
      expect(accepted.body.code).toBe("USER_IS_ALREADY_A_MEMBER_OF_THIS_ORGANIZATION");
      const memberships = rowsOf<{ role: string }>(await database.db.execute(sql`select role from iam.member where organization_id = ${org.orgId} and user_id = ${person.userId}`));
      expect(memberships).toEqual([{ role: "member" }]);
    });
  });

  describe("no answer tells of records beyond the caller's organizations", () => {
    it("removing another organization's grant answers as removing one that does not exist", async () => {
      const mine = await tenantOrg(iam, op);
      const theirs = await tenantOrg(iam, op);
      const member = await joinOrg(iam, theirs.orgId, theirs.owner, "member");
      const granted = await call(iam, "POST", "/api/core/grants", { token: theirs.owner.token, body: { userId: member.userId, orgId: theirs.orgId, permission: "vault:read", granted: true, grantedBy: theirs.owner.userId } });
      expect(granted.status, JSON.stringify(granted.body)).toBe(201);
      const other = await call(iam, "DELETE", `/api/core/grants/${granted.body.id}`, { token: mine.owner.token });
      const none = await call(iam, "DELETE", "/api/core/grants/grt_doesnotexist", { token: mine.owner.token });
      expect(none.status).toBe(404);
      expect(other.status, JSON.stringify(other.body)).toBe(404);
      expect(other.body.error.message).toBe(none.body.error.message);
      expect(JSON.stringify(other.body)).not.toContain(granted.body.id);
    });

    it("an organization's policy answers a stranger alike whether or not the organization exists, naming neither", async () => {
      const stranger = await tenantOrg(iam, op);
      const theirs = await tenantOrg(iam, op);
      const existing = await call(iam, "GET", `/api/core/organizations/${theirs.orgId}/policy`, { token: stranger.owner.token });
      const missing = await call(iam, "GET", "/api/core/organizations/NoSuchOrganization0000000000000/policy", { token: stranger.owner.token });
      expect(existing.status).toBe(missing.status);
      expect(existing.body.error.message).toBe(missing.body.error.message);
      expect(JSON.stringify(missing.body)).not.toContain("NoSuchOrganization");
      const policy = { requireTwoFactor: false, requireSso: false };
      const setExisting = await setOrgPolicy(iam, stranger.owner, theirs.orgId, policy);
      const setMissing = await setOrgPolicy(iam, stranger.owner, "NoSuchOrganization0000000000000", policy);
      expect([setExisting.status, setMissing.status]).toEqual([403, 403]);
      expect(setExisting.body.error.message).toBe(setMissing.body.error.message);
    });
  });
});
