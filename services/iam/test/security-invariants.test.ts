import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "drizzle-orm";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, iamOverHttpWithOperator, joinOrg, sessionIdOf, setActive, signIn, signUp, tenantOrg, uniqueEmail, type Iam, type Operator } from "./support/harness.js";
import { enrolTwoFactor, orgRequiringTwoFactor, setOrgPolicy, signedToken } from "./support/two-factor.js";
import { oauthRefreshTokenOf, pkcePair, publicClient, refreshGrant } from "./support/authorization-code.js";
import { cliLoginApprovedBy, refresh } from "./support/device.js";
import { hiddenFields, PageBrowser, textOf } from "./support/pages.js";

/**
 * Issue 35: each attack of the review, performed over real HTTP against IAM listening on loopback.
 * The invariants they break are in docs/vault/cross-cutting/security.md: a credential is only as
 * strong as the session that made it, and never gains strength; ending a session ends what it made;
 * an organization's policy holds wherever its data is read, whatever form the token takes.
 */
describe.each(testDatabases())("security invariants over HTTP on $name", ({ open }) => {
  let suite: Awaited<ReturnType<typeof iamOverHttpWithOperator>>;
  let database: DatabaseHandle;
  let iam: Iam & { close(): Promise<void> };
  let op: Operator;
  let service: string;

  beforeAll(async () => ({ database, iam, op, service } = suite = await iamOverHttpWithOperator(open)));
  afterAll(() => suite?.close());

  const validateKey = (key: string) => call(iam, "POST", "/api/core/apikey/validate", { token: service, body: { key } });
  const validateSession = (token: string) => call(iam, "POST", "/api/validate-session", { token: service, body: { token } });

  /** A person in two tenants: `free` without a policy, `strict` requiring two-factor; their session acts in `free`. */
  async function memberOfBoth() {
    const free = await tenantOrg(iam, op);
    const strict = await orgRequiringTwoFactor(iam, op);
    const person = await joinOrg(iam, free.orgId, free.owner, "admin");
    const invited = await call(iam, "POST", `/api/core/organizations/${strict.orgId}/invitations`, { token: strict.owner.token, body: { email: person.email, role: "admin" } });
    expect(invited.status, JSON.stringify(invited.body)).toBe(201);
    expect((await call(iam, "POST", "/api/auth/organization/accept-invitation", { token: person.token, body: { invitationId: invited.body.id } })).status).toBe(200);
    expect((await setActive(iam, person, free.orgId)).status).toBe(200);
    return { free, strict, person };
  }

  describe("an API key is only as strong as the session that made it", () => {
    it("is refused to a session held back by its organization's policy, in every form the token arrives in", async () => {
      const strict = await orgRequiringTwoFactor(iam, op);
      const member = await joinOrg(iam, strict.orgId, strict.owner, "admin");
      for (const credential of [
        { token: member.token },
        { token: signedToken(member) },
        { token: encodeURIComponent(signedToken(member)) },
        { cookie: member.cookie },
      ]) {
        const made = await call(iam, "POST", "/api/auth/api-key/create", { ...credential, body: { name: "escape" } });
        expect(made.status, `${JSON.stringify(credential).slice(0, 20)}: ${JSON.stringify(made.body)}`).toBe(403);
        expect(made.body.error.details).toMatchObject({ policy: "TWO_FACTOR_REQUIRED", orgId: strict.orgId });
      }
    });

    it("is refused for an organization whose policy the making session never met, though it meets its own's", async () => {
      const { strict, person } = await memberOfBoth();
      const made = await call(iam, "POST", "/api/auth/api-key/create", { token: person.token, body: { name: "elsewhere", metadata: { orgId: strict.orgId } } });
      expect(made.status, JSON.stringify(made.body)).toBe(403);
      expect(made.body.error.details).toMatchObject({ policy: "TWO_FACTOR_REQUIRED", orgId: strict.orgId });
    });

    it("is refused for an organization the person is not a member of", async () => {
      const { person } = await memberOfBoth();
      const stranger = await tenantOrg(iam, op);
      const made = await call(iam, "POST", "/api/auth/api-key/create", { token: person.token, body: { name: "stranger", metadata: { orgId: stranger.orgId } } });
      expect(made.status, JSON.stringify(made.body)).toBe(403);
      expect(JSON.stringify(made.body)).not.toContain(stranger.orgId);
    });

    it("made without an organization acts in the one its session acts in, never in the operators'", async () => {
      const opOwner = await enrolTwoFactor(iam, op, { revokeOtherSessions: false });
      const opOrgId = op.orgId;
      expect((await setOrgPolicy(iam, opOwner, opOrgId, { requireTwoFactor: true, requireSso: false })).status).toBe(200);
      try {
        // a second operator, with a password alone: held back in the operators' organization, free in a tenant of theirs
        const own = await tenantOrg(iam, opOwner);
        const colleague = await joinOrg(iam, own.orgId, own.owner, "admin");
        const invited = await call(iam, "POST", `/api/core/organizations/${opOrgId}/invitations`, { token: opOwner.token, body: { email: colleague.email, role: "admin" } });
        expect((await call(iam, "POST", "/api/auth/organization/accept-invitation", { token: colleague.token, body: { invitationId: invited.body.id } })).status).toBe(200);
        expect((await setActive(iam, colleague, own.orgId)).status).toBe(200);
        const made = await call(iam, "POST", "/api/auth/api-key/create", { token: colleague.token, body: { name: "no-metadata" } });
        expect(made.status, JSON.stringify(made.body)).toBe(200);
        const used = await validateKey(made.body.key);
        expect(used.body.valid).toBe(true);
        expect(used.body.principal.orgId).toBe(own.orgId);
        expect(used.body.principal.orgType).not.toBe("core-operator");
      } finally {
        await setOrgPolicy(iam, opOwner, opOrgId, { requireTwoFactor: false, requireSso: false });
        op = { ...op, token: opOwner.token, cookie: opOwner.cookie };
      }
    });
  });

  describe("ending a session ends what it made", () => {
    it("DELETE /api/sessions/{id} revokes the MCP client's refresh token issued through that session", async () => {
      const person = await signUp(iam, uniqueEmail("mcp"));
      const other = await signIn(iam, person);
      const { clientId, refreshToken } = await oauthRefreshTokenOf(iam, person);
      expect((await call(iam, "DELETE", `/api/sessions/${await sessionIdOf(iam, person)}`, { token: other.token })).status).toBe(200);
      const refreshed = await refreshGrant(iam, clientId, refreshToken);
      expect(refreshed.status, JSON.stringify(refreshed.body)).toBeGreaterThanOrEqual(400);
      expect(refreshed.body.error).toBe("invalid_grant");
    });

    it("the account page's revoke and its sign-out of the others revoke them too", async () => {
      const person = await signUp(iam, uniqueEmail("page"));
      const viaRevoke = await signIn(iam, person);
      const viaOthers = await signIn(iam, person);
      const first = await oauthRefreshTokenOf(iam, viaRevoke);
      const second = await oauthRefreshTokenOf(iam, viaOthers);
      const browser = new PageBrowser(iam, person.cookie);
      const page = await browser.get("/account");
      const revoked = await browser.post("/account/sessions/revoke", { ...hiddenFields(page.html, "/account/sessions/revoke"), id: await sessionIdOf(iam, viaRevoke) });
      expect(revoked.status, revoked.html).toBe(303);
      expect((await refreshGrant(iam, first.clientId, first.refreshToken)).body.error).toBe("invalid_grant");
      const again = await browser.get("/account");
      const others = await browser.post("/account/sessions/revoke-others", hiddenFields(again.html, "/account/sessions/revoke-others"));
      expect(others.status, others.html).toBe(303);
      expect((await refreshGrant(iam, second.clientId, second.refreshToken)).body.error).toBe("invalid_grant");
    });

    it("revoking the session that approved a CLI login ends that login, its refresh token and its access token", async () => {
      const person = await signUp(iam, uniqueEmail("cli"));
      const other = await signIn(iam, person);
      const cli = await cliLoginApprovedBy(iam, person);
      expect((await call(iam, "DELETE", `/api/sessions/${await sessionIdOf(iam, person)}`, { token: other.token })).status).toBe(200);
      expect((await validateSession(cli.access_token)).body.valid).toBe(false);
      expect((await refresh(iam, cli.refresh_token)).body.error).toBe("invalid_grant");
    });

    it("a password change signs the other sessions out by default, and with them what they made", async () => {
      const person = await signUp(iam, uniqueEmail("pw"));
      const other = await signIn(iam, person);
      const { clientId, refreshToken } = await oauthRefreshTokenOf(iam, other);
      const changed = await call(iam, "POST", "/api/auth/change-password", { token: person.token, body: { currentPassword: "correct-horse-battery", newPassword: "another-horse-battery" } });
      expect(changed.status, JSON.stringify(changed.body)).toBe(200);
      expect((await validateSession(other.token)).body.valid).toBe(false);
      expect((await refreshGrant(iam, clientId, refreshToken)).body.error).toBe("invalid_grant");
    });

    it("turning two-factor on signs the other sessions out by default, and with them what they made", async () => {
      const person = await signUp(iam, uniqueEmail("tfa"));
      const other = await signIn(iam, person);
      const { clientId, refreshToken } = await oauthRefreshTokenOf(iam, other);
      const cli = await cliLoginApprovedBy(iam, other);
      await enrolTwoFactor(iam, person);
      expect((await validateSession(other.token)).body.valid).toBe(false);
      expect((await refreshGrant(iam, clientId, refreshToken)).body.error).toBe("invalid_grant");
      expect((await refresh(iam, cli.refresh_token)).body.error).toBe("invalid_grant");
    });
  });

  describe("a credential never gains strength it was not made with", () => {
    it("a CLI login approved before its person enrolled is held back by a two-factor policy, and so is every refresh of it", async () => {
      const org = await tenantOrg(iam, op);
      const member = await joinOrg(iam, org.orgId, org.owner, "member");
      const cli = await cliLoginApprovedBy(iam, member);
      const owner = await enrolTwoFactor(iam, org.owner);
      await enrolTwoFactor(iam, member, { revokeOtherSessions: false });
      expect((await setOrgPolicy(iam, owner, org.orgId, { requireTwoFactor: true, requireSso: false })).status).toBe(200);
      const now = await validateSession(cli.access_token);
      expect(now.body.principal.restriction, JSON.stringify(now.body)).toMatchObject({ code: "TWO_FACTOR_REQUIRED", orgId: org.orgId });
      const refreshed = await refresh(iam, cli.refresh_token);
      expect(refreshed.status, JSON.stringify(refreshed.body)).toBe(200);
      expect((await validateSession(refreshed.body.access_token)).body.principal.restriction).toMatchObject({ code: "TWO_FACTOR_REQUIRED" });
    });

    it("a CLI login approved by a session that gave no second factor is held back, though its person has two-factor on", async () => {
      const { strict, person } = await memberOfBoth();
      // signed in with the password alone, acting where no policy asks more, before the enrolment
      const before = await signIn(iam, person);
      expect((await setActive(iam, before, (await call(iam, "GET", "/api/core/session", { token: person.token })).body.principal.orgId)).status).toBe(200);
      await enrolTwoFactor(iam, person, { revokeOtherSessions: false });
      const cli = await cliLoginApprovedBy(iam, before);
      expect((await setActive(iam, { token: cli.access_token }, strict.orgId)).status).toBe(200);
      const there = await validateSession(cli.access_token);
      expect(there.body.principal.restriction, JSON.stringify(there.body)).toMatchObject({ code: "TWO_FACTOR_REQUIRED", orgId: strict.orgId });
    });

    it("a session held back by a two-factor policy cannot register a passkey to sign in with", async () => {
      const strict = await orgRequiringTwoFactor(iam, op);
      const member = await joinOrg(iam, strict.orgId, strict.owner, "member");
      for (const credential of [{ token: member.token }, { token: signedToken(member) }, { cookie: member.cookie }]) {
        const options = await call(iam, "GET", "/api/auth/passkey/generate-register-options", credential);
        expect(options.status, JSON.stringify(options.body)).toBe(403);
        expect(options.body.error.details).toMatchObject({ policy: "TWO_FACTOR_REQUIRED", orgId: strict.orgId });
      }
    });
  });

  describe("the policy holds wherever the organization is read", () => {
    it("a session acting in another organization cannot read a strict one's members or record by naming it", async () => {
      const { strict, person } = await memberOfBoth();
      for (const path of [`/api/auth/organization/get-full-organization?organizationId=${strict.orgId}`, `/api/auth/organization/list-members?organizationId=${strict.orgId}`, `/api/auth/organization/list-invitations?organizationId=${strict.orgId}`]) {
        const read = await call(iam, "GET", path, { token: person.token });
        expect(read.status, `${path}: ${JSON.stringify(read.body).slice(0, 200)}`).toBe(403);
        expect(read.body.error.details).toMatchObject({ policy: "TWO_FACTOR_REQUIRED", orgId: strict.orgId });
      }
      const written = await call(iam, "POST", "/api/auth/organization/update", { token: person.token, body: { organizationId: strict.orgId, data: { name: "Taken" } } });
      expect(written.status).toBe(403);
    });

    it("a held-back session cannot read its own organization's members with the signed token either", async () => {
      const strict = await orgRequiringTwoFactor(iam, op);
      const member = await joinOrg(iam, strict.orgId, strict.owner, "admin");
      const read = await call(iam, "GET", "/api/auth/organization/list-members", { token: signedToken(member) });
      expect(read.status, JSON.stringify(read.body).slice(0, 200)).toBe(403);
    });
  });

  describe("the same classes, beyond the review's findings", () => {
    /** The CLI login's access session lapses (an idle CLI keeps only its refresh token). */
    const idle = (accessToken: string) => database.db.execute(sql`update iam.session set expires_at = now() - interval '1 minute' where token = ${accessToken}`);

    it("signing the other sessions out ends a CLI login whose access token has lapsed", async () => {
      const person = await signUp(iam, uniqueEmail("idle"));
      const cli = await cliLoginApprovedBy(iam, await signIn(iam, person));
      await idle(cli.access_token);
      const browser = new PageBrowser(iam, person.cookie);
      const page = await browser.get("/account");
      expect((await browser.post("/account/sessions/revoke-others", hiddenFields(page.html, "/account/sessions/revoke-others"))).status).toBe(303);
      expect((await refresh(iam, cli.refresh_token)).body.error).toBe("invalid_grant");
    });

    it("a password reset ends every CLI login and every app's refresh token, idle ones included", async () => {
      const person = await signUp(iam, uniqueEmail("reset"));
      const cli = await cliLoginApprovedBy(iam, await signIn(iam, person));
      await idle(cli.access_token);
      const app = await oauthRefreshTokenOf(iam, await signIn(iam, person));
      expect((await call(iam, "POST", "/api/auth/request-password-reset", { body: { email: person.email, redirectTo: "/reset-password" } })).status).toBe(200);
      const token = new URL(/https?:\/\/\S+/.exec(iam.mailer.sent.filter((m) => m.to === person.email).at(-1)!.text)![0]).searchParams.get("token")!;
      expect((await call(iam, "POST", "/api/auth/reset-password", { body: { token, newPassword: "a-new-horse-battery" } })).status).toBe(200);
      expect((await refresh(iam, cli.refresh_token)).body.error).toBe("invalid_grant");
      expect((await refreshGrant(iam, app.clientId, app.refreshToken)).body.error).toBe("invalid_grant");
    });

    it("an API key cannot be moved to another organization by an update", async () => {
      const { free, strict, person } = await memberOfBoth();
      const made = await call(iam, "POST", "/api/auth/api-key/create", { token: person.token, body: { name: "pinned" } });
      expect(made.status).toBe(200);
      const moved = await call(iam, "POST", "/api/auth/api-key/update", { token: person.token, body: { keyId: made.body.id, metadata: { orgId: strict.orgId } } });
      expect(moved.status).toBe(400);
      const renamed = await call(iam, "POST", "/api/auth/api-key/update", { token: person.token, body: { keyId: made.body.id, metadata: { purpose: "ci" } } });
      expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
      expect((await validateKey(made.body.key)).body.principal.orgId).toBe(free.orgId);
    });

    it("an organization named by its slug, or by an invitation of its own, is judged as one named by id", async () => {
      const { strict, person } = await memberOfBoth();
      const bySlug = await call(iam, "GET", `/api/auth/organization/get-full-organization?organizationSlug=${strict.slug}`, { token: person.token });
      expect(bySlug.status).toBe(403);
      const invited = await call(iam, "POST", `/api/core/organizations/${strict.orgId}/invitations`, { token: strict.owner.token, body: { email: uniqueEmail("guest"), role: "member" } });
      const cancel = await call(iam, "POST", "/api/auth/organization/cancel-invitation", { token: person.token, body: { invitationId: invited.body.id } });
      expect(cancel.status).toBe(403);
      expect(cancel.body.error.details).toMatchObject({ policy: "TWO_FACTOR_REQUIRED", orgId: strict.orgId });
    });
  });

  describe("sign-in sends a signed-in browser only to our own paths", () => {
    for (const page of ["/sign-in", "/sign-up"]) {
      for (const next of ["/.//evil.example", "/a/..//evil.example", "/./%2e/..//evil.example/x", "/%2e%2e//evil.example"]) {
        it(`${page}?next=${next} stays on this site`, async () => {
          const person = await signUp(iam, uniqueEmail("next"));
          const answer = await new PageBrowser(iam, person.cookie).get(`${page}?next=${encodeURIComponent(next)}`);
          expect(answer.status).toBe(302);
          expect(answer.location).toMatch(/^\/(?!\/)/);
          expect(new URL(answer.location!, iam.config.iamUrl).origin).toBe(iam.origin);
        });
      }
    }
  });

  describe("the consent page says what the client will be able to do", () => {
    it("tells a person in no organization that the client will not be able to read the vault", async () => {
      const loner = await signUp(iam, uniqueEmail("loner"));
      const clientId = await publicClient(iam);
      const browser = new PageBrowser(iam, loner.cookie);
      const asked = await browser.get(`/api/auth/oauth2/authorize?${new URLSearchParams({ response_type: "code", client_id: clientId, redirect_uri: "http://127.0.0.1:7777/callback", scope: "vault:read offline_access", state: "s", code_challenge: pkcePair().challenge, code_challenge_method: "S256", resource: "http://localhost:4500/mcp" })}`);
      const shown = await browser.get(asked.location!);
      expect(textOf(shown.html)).toContain("will not be able to read the vault");
    });
  });
});
