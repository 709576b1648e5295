import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "drizzle-orm";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, createApiKey, iamWithOperator, joinOrg, PASSWORD, serviceToken, sessionCookieOf, signIn, tenantOrg, type Iam, type Operator, type SignedUp } from "./support/harness.js";
import { hiddenFields, PageBrowser, textOf } from "./support/pages.js";
import { base32Bytes, clearOfStepBoundary, totp } from "./support/totp.js";
import { enrolTwoFactor } from "./support/two-factor.js";
import { pollToken, startDeviceLogin } from "./support/device.js";

/**
 * Issue 28: an owner requires two-factor or SSO of every member; a session that does not meet it acts
 * nowhere until it does, on every credential kind that is a session; API keys and service tokens are
 * excepted (ADR 0023).
 */
describe.each(testDatabases())("organization policy on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let op: Operator;
  let service: string;

  beforeAll(async () => ({ database, iam, op, service } = await iamWithOperator(open)));
  afterAll(() => database?.close());

  /** Turns two-factor on for `person`; their other sessions stay (the tests go on using them). */
  const enrol = (person: SignedUp) => enrolTwoFactor(iam, person, { revokeOtherSessions: false });

  const setPolicy = (by: { token: string }, orgId: string, policy: { requireTwoFactor: boolean; requireSso: boolean }) =>
    call(iam, "PUT", `/api/core/organizations/${orgId}/policy`, { token: by.token, body: policy });
  const validate = (token: string) => call(iam, "POST", "/api/validate-session", { token: service, body: { token } });

  /** A tenant whose owner has two-factor on and requires it; with a member who has not. */
  async function orgRequiringTwoFactor() {
    const org = await tenantOrg(iam, op);
    const owner = await enrol(org.owner);
    const member = await joinOrg(iam, org.orgId, owner, "member");
    const set = await setPolicy(owner, org.orgId, { requireTwoFactor: true, requireSso: false });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    return { ...org, owner, member };
  }

  describe("setting it", () => {
    it("is for owners: a member is refused 403, and the refusal is audited", async () => {
      const org = await tenantOrg(iam, op);
      const member = await joinOrg(iam, org.orgId, org.owner, "admin");
      const r = await setPolicy(member, org.orgId, { requireTwoFactor: true, requireSso: false });
      expect(r.status).toBe(403);
      const events = (await call(iam, "GET", `/api/audit/events?action=policy.update&orgId=${org.orgId}`, { token: op.token })).body.data;
      expect(events).toContainEqual(expect.objectContaining({ outcome: "failure", actorId: member.userId }));
    });

    it("refuses an owner who would not meet it with 409, and takes it from one who does; members read it", async () => {
      const org = await tenantOrg(iam, op);
      const refused = await setPolicy(org.owner, org.orgId, { requireTwoFactor: true, requireSso: false });
      expect(refused.status).toBe(409);
      expect(refused.body.error.details.policy).toBe("TWO_FACTOR_REQUIRED");
      const owner = await enrol(org.owner);
      const set = await setPolicy(owner, org.orgId, { requireTwoFactor: true, requireSso: false });
      expect(set.status).toBe(200);
      expect((await call(iam, "GET", `/api/core/organizations/${org.orgId}/policy`, { token: owner.token })).body).toEqual({ requireTwoFactor: true, requireSso: false });
      const events = (await call(iam, "GET", `/api/audit/events?action=policy.update&orgId=${org.orgId}`, { token: op.token })).body.data;
      expect(events).toContainEqual(expect.objectContaining({ outcome: "success", actorId: owner.userId, metadata: { before: { requireTwoFactor: false, requireSso: false }, after: { requireTwoFactor: true, requireSso: false } } }));
    });

    it("refuses unknown fields and a key (a key is excepted from the policy, so it does not set it)", async () => {
      const org = await tenantOrg(iam, op);
      const owner = await enrol(org.owner);
      expect((await call(iam, "PUT", `/api/core/organizations/${org.orgId}/policy`, { token: owner.token, body: { requireTwoFactor: true, requireSso: false, extra: 1 } })).status).toBe(400);
      const key = await createApiKey(iam, owner);
      const byKey = await call(iam, "PUT", `/api/core/organizations/${org.orgId}/policy`, { headers: { "x-api-key": key.key }, body: { requireTwoFactor: false, requireSso: false } });
      expect([401, 403]).toContain(byKey.status);
    });
  });

  describe("the policy page", () => {
    it("shows members the policy and lets an owner who meets it set it", async () => {
      const org = await tenantOrg(iam, op);
      const member = await joinOrg(iam, org.orgId, org.owner, "member");
      const seen = await new PageBrowser(iam, member.cookie).get("/account/organization-policy");
      expect(textOf(seen.html)).toContain("Two-factor authentication: not required");
      expect(seen.html).not.toContain('name="requireTwoFactor"');
      const ownerBrowser = new PageBrowser(iam, org.owner.cookie);
      const refused = await ownerBrowser.submit("/account/organization-policy", "/account/organization-policy", { requireTwoFactor: "yes" });
      expect(refused.status).toBe(409);
      expect(textOf(refused.html)).toContain("Turn on two-factor authentication and sign in with a code before requiring it");
      const owner = await enrol(org.owner);
      const saved = await new PageBrowser(iam, owner.cookie).submit("/account/organization-policy", "/account/organization-policy", { requireTwoFactor: "yes" });
      expect(saved.status).toBe(303);
      expect((await call(iam, "GET", `/api/core/organizations/${org.orgId}/policy`, { token: owner.token })).body).toEqual({ requireTwoFactor: true, requireSso: false });
    });
  });

  describe("two-factor required", () => {
    it("holds back a bearer session on IAM's API with 403 naming the policy; the session route says why", async () => {
      const { orgId, member } = await orgRequiringTwoFactor();
      const refused = await call(iam, "GET", `/api/core/organizations/${orgId}/policy`, { token: member.token });
      expect(refused.status).toBe(403);
      expect(refused.body.error.details).toEqual({ policy: "TWO_FACTOR_REQUIRED", orgId, location: "/account/two-factor?required=1" });
      const session = await call(iam, "GET", "/api/core/session", { token: member.token });
      expect(session.status).toBe(200);
      expect(session.body.principal).toMatchObject({ orgId: null, permissions: [], restriction: { code: "TWO_FACTOR_REQUIRED", orgId } });
      // the library's routes too, except those that let it comply
      expect((await call(iam, "GET", "/api/auth/organization/list", { token: member.token })).status).toBe(403);
    });

    it("sends a cookie session's pages to enrolment, and nothing else opens until then", async () => {
      const { member } = await orgRequiringTwoFactor();
      const browser = new PageBrowser(iam, member.cookie);
      for (const path of ["/account", "/device", "/onboarding"]) {
        const r = await browser.get(path);
        expect(r.status, path).toBe(302);
        expect(r.location).toBe("/account/two-factor?required=1");
      }
      const enrolPage = await browser.get("/account/two-factor?required=1");
      expect(enrolPage.status).toBe(200);
      expect(enrolPage.html).toContain("Your organization requires two-factor authentication");
    });

    it("lets a held-back browser enrol on the pages, and then opens the rest", async () => {
      const { member } = await orgRequiringTwoFactor();
      const browser = new PageBrowser(iam, member.cookie);
      const shown = await browser.submit("/account/two-factor?required=1", "/account/two-factor/enable", { password: PASSWORD });
      expect(shown.status).toBe(200);
      const secret = base32Bytes(/id="totp-secret">([^<]+)</.exec(shown.html)![1]!);
      const confirmed = await browser.post("/account/two-factor/confirm", { ...hiddenFields(shown.html, "/account/two-factor/confirm"), code: totp(secret) });
      expect(confirmed.status).toBe(200);
      expect((await browser.get("/account")).status).toBe(200);
    });

    it("answers another service's validate-session with a principal that acts nowhere, and the reason", async () => {
      const { orgId, member } = await orgRequiringTwoFactor();
      const r = await validate(member.token);
      expect(r.status).toBe(200);
      expect(r.body.valid).toBe(true);
      expect(r.body.principal).toMatchObject({ userId: member.userId, orgId: null, role: null, permissions: [], restriction: { code: "TWO_FACTOR_REQUIRED", orgId } });
    });

    it("lets the member act again once enrolled: the enrolling session gave a code", async () => {
      const { orgId, member } = await orgRequiringTwoFactor();
      const enrolled = await enrol(member);
      const r = await validate(enrolled.token);
      expect(r.body.principal.orgId).toBe(orgId);
      expect(r.body.principal.restriction).toBeUndefined();
      expect(r.body.principal.permissions.length).toBeGreaterThan(0);
      // a password-only session of the same person still does not meet it
      const again = await call(iam, "POST", "/api/auth/sign-in/email", { body: { email: member.email, password: PASSWORD } });
      expect(again.body.twoFactorRedirect).toBe(true);
    });

    it("holds back the CLI login of a member without two-factor, and lets that of an enrolled member act", async () => {
      const { orgId, member } = await orgRequiringTwoFactor();
      const cliLogin = async (approver: { token: string }) => {
        const started = await startDeviceLogin(iam);
        return { started, approved: await call(iam, "POST", "/oauth/device/authorize", { token: approver.token, body: { user_code: started.user_code } }) };
      };
      // the password session may not approve while the policy holds it back
      const refused = await cliLogin(member);
      expect(refused.approved.status).toBe(403);
      const enrolled = await enrol(member);
      const { started, approved } = await cliLogin(enrolled);
      expect(approved.status).toBe(200);
      const tokens = await pollToken(iam, started.device_code);
      expect(tokens.status).toBe(200);
      expect((await validate(tokens.body.access_token)).body.principal).toMatchObject({ orgId });
    });

    it("excepts API keys and service tokens", async () => {
      const { orgId, owner, member } = await orgRequiringTwoFactor();
      // the member's key was made before the policy; keys are the credentials of programs
      await setPolicy(owner, orgId, { requireTwoFactor: false, requireSso: false });
      const key = await createApiKey(iam, member);
      await setPolicy(owner, orgId, { requireTwoFactor: true, requireSso: false });
      const byKey = await call(iam, "POST", "/api/core/apikey/validate", { token: service, body: { key: key.key } });
      expect(byKey.body.valid).toBe(true);
      expect(byKey.body.principal.orgId).toBe(orgId);
      expect(byKey.body.principal.restriction).toBeUndefined();
      const asService = await call(iam, "GET", `/api/core/organizations/${orgId}/policy`, { token: await serviceToken(iam) });
      expect(asService.status).toBe(200);
    });

    it("takes effect at once on IAM when set and when lifted", async () => {
      const org = await tenantOrg(iam, op);
      const owner = await enrol(org.owner);
      const member = await joinOrg(iam, org.orgId, owner, "member");
      expect((await validate(member.token)).body.principal.orgId).toBe(org.orgId);
      await setPolicy(owner, org.orgId, { requireTwoFactor: true, requireSso: false });
      expect((await validate(member.token)).body.principal.orgId).toBeNull();
      await setPolicy(owner, org.orgId, { requireTwoFactor: false, requireSso: false });
      expect((await validate(member.token)).body.principal.orgId).toBe(org.orgId);
    });

    it("lets operators require it for the operator organization", async () => {
      const operatorEnrolled = await enrol(await signIn(iam, op));
      const colleague = await joinOrg(iam, op.orgId, operatorEnrolled, "member");
      const set = await setPolicy(operatorEnrolled, op.orgId, { requireTwoFactor: true, requireSso: false });
      expect(set.status).toBe(200);
      expect((await validate(colleague.token)).body.principal).toMatchObject({ orgId: null, restriction: { code: "TWO_FACTOR_REQUIRED" } });
      await setPolicy(operatorEnrolled, op.orgId, { requireTwoFactor: false, requireSso: false });
    });
  });

  describe("SSO required", () => {
    /** A provider row of the SSO plugin's table (the SSO round trip itself is in sso.test.ts, which also proves the session marking). */
    async function provider(orgId: string, providerId: string) {
      await database.db.execute(
        sql`insert into iam.sso_provider (id, issuer, provider_id, organization_id, domain) values (${`sso-${providerId}`}, 'https://idp.example.com', ${providerId}, ${orgId}, 'example.com')`,
      );
    }
    const markSso = async (token: string, providerId: string) => {
      await database.db.execute(sql`update iam.session set sign_in_method = 'sso', sso_provider_id = ${providerId} where token = ${token}`);
      iam.app.ctx.forgetPrincipals();
    };

    it("sends a password session to the organization's SSO sign-in; a session from its provider meets it", async () => {
      const org = await tenantOrg(iam, op);
      const providerId = `idp-${org.slug}`;
      await provider(org.orgId, providerId);
      expect((await setPolicy(org.owner, org.orgId, { requireTwoFactor: false, requireSso: true })).status).toBe(409);
      await markSso(org.owner.token, providerId);
      expect((await setPolicy(org.owner, org.orgId, { requireTwoFactor: false, requireSso: true })).status).toBe(200);
      const member = await joinOrg(iam, org.orgId, org.owner, "member");
      const page = await new PageBrowser(iam, member.cookie).get("/account");
      expect(page.status).toBe(302);
      expect(page.location).toBe(`/sign-in/sso?organization=${org.slug}&next=%2Faccount`);
      expect((await validate(member.token)).body.principal.restriction).toMatchObject({ code: "SSO_REQUIRED", orgId: org.orgId });
      // another organization's provider does not meet it
      await provider((await tenantOrg(iam, op)).orgId, `${providerId}-other`);
      await markSso(member.token, `${providerId}-other`);
      expect((await validate(member.token)).body.principal.restriction?.code).toBe("SSO_REQUIRED");
      await markSso(member.token, providerId);
      expect((await validate(member.token)).body.principal).toMatchObject({ orgId: org.orgId });
    });
  });
});
