import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, createIam, iamWithOperator, joinOrg, PASSWORD, staffedOrg, type Iam, type Operator } from "./support/harness.js";
import { hiddenFields, PageBrowser } from "./support/pages.js";
import {
  authorizationCode,
  authorizeAddress,
  consentAs,
  exchangeCode,
  LOOPBACK_REDIRECT,
  pkcePair,
  publicClient,
  refreshGrant,
  registerClient,
  VAULT_RESOURCE,
} from "./support/authorization-code.js";

/**
 * IAM as the OAuth 2.1 authorization server of MCP clients (issue 29, ADR 0028): registration,
 * authorization code with PKCE through sign-in and the consent page, audience-bound JWT access
 * tokens carrying the organization and permissions, refresh with rotation; and every refusal.
 */
describe.each(testDatabases())("authorization code grant on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let op: Operator;

  beforeAll(async () => {
    ({ database, iam, op } = await iamWithOperator(open));
  });
  afterAll(async () => {
    await database?.close();
  });

  async function verified(accessToken: string) {
    const jwks = (await (await iam.app.request("/api/auth/jwks")).json()) as JSONWebKeySet;
    return jwtVerify(accessToken, createLocalJWKSet(jwks), { issuer: iam.config.iamUrl, audience: VAULT_RESOURCE, typ: "at+jwt" });
  }

  /** A member of a fresh tenant organization with a client, a code and its verifier. */
  async function codeFor(person: { cookie: string }, request: { scope?: string } = {}) {
    const clientId = await publicClient(iam);
    const pkce = pkcePair();
    const code = await authorizationCode(new PageBrowser(iam, person.cookie), { clientId, challenge: pkce.challenge, ...request });
    return { clientId, code, verifier: pkce.verifier };
  }

  describe("the happy path", () => {
    it("registers a client, signs in, consents, exchanges the code with PKCE and refreshes", async () => {
      const org = await staffedOrg(iam, op);
      const clientId = await publicClient(iam);
      const pkce = pkcePair();
      const browser = new PageBrowser(iam);
      // signed out: the plugin sends the browser to our sign-in page, which returns to authorize afterwards
      const asked = await browser.get(authorizeAddress({ clientId, challenge: pkce.challenge }));
      expect(asked.status).toBe(302);
      expect(asked.location!.startsWith("/sign-in?")).toBe(true);
      const signInPage = await browser.get(asked.location!);
      expect(signInPage.status).toBe(200);
      expect(signInPage.html).toContain("Sign in to let an app");
      const fields = hiddenFields(signInPage.html, "/sign-in");
      expect(fields.next!.startsWith("/api/auth/oauth2/authorize?")).toBe(true);
      expect(fields.next).not.toContain("sig=");
      const signedIn = await browser.post("/sign-in", { ...fields, email: org.member.email, password: PASSWORD });
      expect(signedIn.status).toBe(303);
      expect(signedIn.location).toBe(fields.next);
      const again = await browser.get(signedIn.location!);
      expect(again.status).toBe(302);
      const consent = await browser.get(again.location!);
      expect(consent.status).toBe(200);
      expect(consent.html).toContain("Test agent");
      expect(consent.html).toContain("127.0.0.1:7777");
      expect(consent.html).toContain(`Tenant ${org.slug}`);
      expect(consent.html).toContain("Read the documents in the Core vault");
      const answered = await browser.post("/oauth/consent", { ...hiddenFields(consent.html, "/oauth/consent"), decision: "allow" });
      expect(answered.status).toBe(303);
      const back = new URL(answered.location!);
      expect(back.origin + back.pathname).toBe(LOOPBACK_REDIRECT);
      expect(back.searchParams.get("state")).toBe("state-1");
      expect(back.searchParams.get("iss")).toBe(iam.config.iamUrl);

      const tokens = await exchangeCode(iam, clientId, back.searchParams.get("code")!, pkce.verifier);
      expect(tokens.status, JSON.stringify(tokens.body)).toBe(200);
      expect(tokens.headers.get("cache-control")).toContain("no-store");
      expect(tokens.body).toMatchObject({ token_type: "Bearer", expires_in: 600, scope: "vault:read offline_access" });
      expect(typeof tokens.body.refresh_token).toBe("string");

      expect(decodeProtectedHeader(tokens.body.access_token)).toMatchObject({ alg: "EdDSA", typ: "at+jwt" });
      const { payload } = await verified(tokens.body.access_token);
      expect(payload).toMatchObject({ iss: iam.config.iamUrl, sub: org.member.userId, scope: "vault:read offline_access", client_id: clientId, org_id: org.orgId });
      expect(payload.exp! - payload.iat!).toBe(600);
      expect([payload.aud].flat()).toContain(VAULT_RESOURCE);
      expect(payload.permissions).toEqual(["billing:read", "platform:read", "vault:read"]);

      const refreshed = await refreshGrant(iam, clientId, tokens.body.refresh_token);
      expect(refreshed.status, JSON.stringify(refreshed.body)).toBe(200);
      // the audit log names the consent (as the person) and the token requests, never a token
      const events = (await call(iam, "GET", "/api/audit/events?action=oauth.consent&limit=100", { token: op.token })).body.data as { actorId: string; outcome: string }[];
      expect(events).toContainEqual(expect.objectContaining({ actorId: org.member.userId, outcome: "success" }));
      const tokenEvents = (await call(iam, "GET", "/api/audit/events?action=oauth.token&limit=100", { token: op.token })).body.data as unknown[];
      expect(tokenEvents.length).toBeGreaterThanOrEqual(2);
      expect(JSON.stringify(tokenEvents)).not.toContain(tokens.body.refresh_token);
      expect(refreshed.body.refresh_token).not.toBe(tokens.body.refresh_token);
      expect((await verified(refreshed.body.access_token)).payload).toMatchObject({ sub: org.member.userId, org_id: org.orgId });
    });

    it("publishes one discovery document for both grant families", async () => {
      const r = await iam.app.request("/.well-known/oauth-authorization-server");
      expect(r.status).toBe(200);
      const doc = (await r.json()) as Record<string, unknown>;
      expect(doc).toMatchObject({
        issuer: iam.config.iamUrl,
        authorization_endpoint: `${iam.config.iamUrl}/api/auth/oauth2/authorize`,
        token_endpoint: `${iam.config.iamUrl}/oauth/token`,
        registration_endpoint: `${iam.config.iamUrl}/api/auth/oauth2/register`,
        device_authorization_endpoint: `${iam.config.iamUrl}/oauth/device/code`,
        code_challenge_methods_supported: ["S256"],
        scopes_supported: ["vault:read", "offline_access"],
        response_types_supported: ["code"],
      });
      expect(doc.grant_types_supported).toEqual(expect.arrayContaining(["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"]));
    });

    it("names only endpoints that are served, and no OpenID Connect feature while OpenID Connect is off", async () => {
      const doc = (await (await iam.app.request("/.well-known/oauth-authorization-server")).json()) as Record<string, unknown>;
      const endpoints = Object.entries(doc).filter(([name]) => name.endsWith("_endpoint") || name.endsWith("_uri"));
      expect(endpoints.map(([name]) => name).sort()).toEqual(
        ["authorization_endpoint", "device_authorization_endpoint", "jwks_uri", "registration_endpoint", "revocation_endpoint", "token_endpoint"],
      );
      for (const [name, address] of endpoints) {
        const path = new URL(String(address)).pathname;
        const answers = [(await iam.app.request(path)).status, (await iam.app.request(path, { method: "POST" })).status];
        expect({ name, found: answers.some((status) => status !== 404) }).toEqual({ name, found: true });
      }
      for (const openIdOnly of ["backchannel_logout_supported", "dpop_signing_alg_values_supported", "userinfo_endpoint", "end_session_endpoint", "id_token_signing_alg_values_supported", "claims_supported", "subject_types_supported", "token_endpoint_auth_signing_alg_values_supported"]) {
        expect(doc).not.toHaveProperty(openIdOnly);
      }
    });
  });

  describe("refusals", () => {
    it("refuses the plain PKCE method, back at the client with invalid_request", async () => {
      const org = await staffedOrg(iam, op);
      const clientId = await publicClient(iam);
      const verifier = pkcePair().verifier;
      const r = await new PageBrowser(iam, org.member.cookie).get(authorizeAddress({ clientId, challenge: verifier, challengeMethod: "plain" }));
      expect(r.status).toBe(302);
      const back = new URL(r.location!);
      expect(back.origin + back.pathname).toBe(LOOPBACK_REDIRECT);
      expect(back.searchParams.get("error")).toBe("invalid_request");
    });

    it("refuses a wrong PKCE verifier", async () => {
      const org = await staffedOrg(iam, op);
      const { clientId, code } = await codeFor(org.member);
      const r = await exchangeCode(iam, clientId, code, pkcePair().verifier);
      // the plugin's answer (RFC 6749 §5.2 would say 400 invalid_grant; ADR 0028 records the difference)
      expect(r.status).toBe(401);
      expect(r.body.error).toBe("invalid_request");
      expect(r.body.access_token).toBeUndefined();
    });

    it("never redirects to a redirect URI that was not registered: IAM's own error page", async () => {
      const org = await staffedOrg(iam, op);
      const clientId = await publicClient(iam);
      const r = await new PageBrowser(iam, org.member.cookie).get(authorizeAddress({ clientId, redirectUri: "http://127.0.0.1:7777/elsewhere" }));
      expect(r.status).toBe(302);
      const to = new URL(r.location!, iam.config.iamUrl);
      expect(to.origin).toBe(iam.config.iamUrl);
      expect(to.searchParams.get("error")).toBe("invalid_redirect");
    });

    it("refuses a code used twice, and revokes what it gave", async () => {
      const org = await staffedOrg(iam, op);
      const { clientId, code, verifier } = await codeFor(org.member);
      const first = await exchangeCode(iam, clientId, code, verifier);
      expect(first.status).toBe(200);
      const second = await exchangeCode(iam, clientId, code, verifier);
      expect(second.status).toBe(400);
      expect(second.body.error).toBe("invalid_grant");
      expect((await refreshGrant(iam, clientId, first.body.refresh_token)).body.error).toBe("invalid_grant");
    });

    it("refuses a refresh token replayed after rotation, and the family with it", async () => {
      const org = await staffedOrg(iam, op);
      const { clientId, code, verifier } = await codeFor(org.member);
      const tokens = (await exchangeCode(iam, clientId, code, verifier)).body;
      const rotated = await refreshGrant(iam, clientId, tokens.refresh_token);
      expect(rotated.status).toBe(200);
      const replay = await refreshGrant(iam, clientId, tokens.refresh_token);
      expect(replay.status).toBe(400);
      expect(replay.body.error).toBe("invalid_grant");
      expect((await refreshGrant(iam, clientId, rotated.body.refresh_token)).body.error).toBe("invalid_grant");
    });

    it("refuses a resource it does not know, at authorize and at the token endpoint", async () => {
      const org = await staffedOrg(iam, op);
      const clientId = await publicClient(iam);
      const r = await new PageBrowser(iam, org.member.cookie).get(authorizeAddress({ clientId, resource: "http://localhost:4100/api" }));
      expect(r.status).toBe(302);
      expect(new URL(r.location!).searchParams.get("error")).toBe("invalid_target");
      const { clientId: other, code, verifier } = await codeFor(org.member);
      const t = await exchangeCode(iam, other, code, verifier, { resource: "http://localhost:4100/api" });
      expect(t.status).toBe(400);
      expect(t.body.error).toBe("invalid_target");
    });

    it("gives no refresh token without offline_access", async () => {
      const org = await staffedOrg(iam, op);
      const { clientId, code, verifier } = await codeFor(org.member, { scope: "vault:read" });
      const t = await exchangeCode(iam, clientId, code, verifier);
      expect(t.status).toBe(200);
      expect(t.body.refresh_token).toBeUndefined();
      expect(t.body.scope).toBe("vault:read");
    });

    it("sends the browser back with access_denied when the person denies", async () => {
      const org = await staffedOrg(iam, op);
      const clientId = await publicClient(iam);
      const back = await consentAs(new PageBrowser(iam, org.member.cookie), { clientId, state: "s-deny" }, "deny");
      expect(back.origin + back.pathname).toBe(LOOPBACK_REDIRECT);
      expect(back.searchParams.get("error")).toBe("access_denied");
      expect(back.searchParams.get("state")).toBe("s-deny");
      expect(back.searchParams.get("code")).toBeNull();
    });

    it("registers loopback redirects as a native client and refuses http elsewhere", async () => {
      expect((await registerClient(iam)).body.application_type).toBe("native");
      const web = await registerClient(iam, { redirect_uris: ["http://agent.example.com/callback"] });
      expect(web.status).toBe(400);
      expect(web.body.error).toBe("invalid_redirect_uri");
      const https = await registerClient(iam, { redirect_uris: ["https://agent.example.com/callback"] });
      expect(https.status).toBe(201);
    });

    it("registers a client that asks for every grant the document lists with the grants it can use (VS Code's request)", async () => {
      const vsCode = await registerClient(iam, {
        client_name: "Visual Studio Code",
        redirect_uris: ["http://127.0.0.1:33418/", "https://vscode.dev/redirect"],
        grant_types: ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"],
        response_types: ["code"],
        token_endpoint_auth_method: "none",
        application_type: "native",
      });
      expect(vsCode.status).toBe(201);
      expect(vsCode.body.grant_types).toEqual(["authorization_code", "refresh_token"]);
      // a client asking only for grants IAM does not give a registered client is refused, not given others
      const deviceOnly = await registerClient(iam, { grant_types: ["urn:ietf:params:oauth:grant-type:device_code"] });
      expect(deviceOnly.status).toBe(400);
      expect(deviceOnly.body.error).toBe("invalid_client_metadata");
    });

    it("registers loopback and https redirects together as a native client when the client names no type", async () => {
      const mixed = await registerClient(iam, { redirect_uris: ["http://127.0.0.1:33418/", "https://agent.example.com/callback"] });
      expect(mixed.status).toBe(201);
      expect(mixed.body.application_type).toBe("native");
      // loopback http beside plain http elsewhere stays refused
      const plain = await registerClient(iam, { redirect_uris: ["http://127.0.0.1:33418/", "http://agent.example.com/callback"] });
      expect(plain.status).toBe(400);
    });
  });

  describe("the organization and permissions a token carries", () => {
    it("follows the role's permissions at each refresh: a role that lost vault:read stops carrying it", async () => {
      const org = await staffedOrg(iam, op);
      const { clientId, code, verifier } = await codeFor(org.member);
      const tokens = (await exchangeCode(iam, clientId, code, verifier)).body;
      expect((await verified(tokens.access_token)).payload.permissions).toContain("vault:read");
      const mapped = await call(iam, "POST", "/api/core/roles", { token: org.owner.token, body: { orgId: org.orgId, role: "member", permissions: ["platform:read"] } });
      expect(mapped.status).toBe(200);
      const refreshed = await refreshGrant(iam, clientId, tokens.refresh_token);
      expect(refreshed.status).toBe(200);
      expect((await verified(refreshed.body.access_token)).payload.permissions).toEqual(["platform:read"]);
    });

    it("carries no permissions once the person is no longer a member", async () => {
      const org = await staffedOrg(iam, op);
      const person = await joinOrg(iam, org.orgId, org.owner, "member");
      const { clientId, code, verifier } = await codeFor(person);
      const tokens = (await exchangeCode(iam, clientId, code, verifier)).body;
      const removed = await call(iam, "POST", "/api/auth/organization/remove-member", { token: org.owner.token, headers: { origin: iam.origin }, body: { memberIdOrEmail: person.email, organizationId: org.orgId } });
      expect(removed.status, JSON.stringify(removed.body)).toBe(200);
      const refreshed = await refreshGrant(iam, clientId, tokens.refresh_token);
      expect(refreshed.status).toBe(200);
      expect((await verified(refreshed.body.access_token)).payload).toMatchObject({ org_id: org.orgId, permissions: [] });
    });

    it("revokes every one of the person's refresh tokens when their password is reset", async () => {
      const org = await staffedOrg(iam, op);
      const { clientId, code, verifier } = await codeFor(org.member);
      const tokens = (await exchangeCode(iam, clientId, code, verifier)).body;
      expect((await call(iam, "POST", "/api/auth/request-password-reset", { headers: { origin: iam.origin }, body: { email: org.member.email, redirectTo: "/reset-password" } })).status).toBe(200);
      const mail = iam.mailer.sent.filter((m) => m.to === org.member.email && /new Core password/.test(m.subject)).at(-1)!;
      const token = new URL(/https?:\/\/\S+/.exec(mail.text)![0]).searchParams.get("token")!;
      expect((await call(iam, "POST", "/api/auth/reset-password", { headers: { origin: iam.origin }, body: { token, newPassword: "another-horse-battery" } })).status).toBe(200);
      const refreshed = await refreshGrant(iam, clientId, tokens.refresh_token);
      expect(refreshed.status).toBe(400);
      expect(refreshed.body.error).toBe("invalid_grant");
    });

    it("revokes the client's refresh tokens when the session they came from signs out", async () => {
      const org = await staffedOrg(iam, op);
      const { clientId, code, verifier } = await codeFor(org.member);
      const tokens = (await exchangeCode(iam, clientId, code, verifier)).body;
      const out = await call(iam, "POST", "/api/auth/sign-out", { token: org.member.token, headers: { origin: iam.origin } });
      expect(out.status).toBe(200);
      const refreshed = await refreshGrant(iam, clientId, tokens.refresh_token);
      expect(refreshed.status).toBe(400);
      expect(refreshed.body.error).toBe("invalid_grant");
    });
  });

  it("limits registrations per address (CORE_RATE_LIMIT_CLIENT_REGISTRATION): just inside, then 429", async () => {
    const limited = await open();
    try {
      const strict = await createIam(limited, { config: { rateLimits: { enabled: true, clientRegistration: 2 } } });
      expect((await registerClient(strict)).status).toBe(201);
      expect((await registerClient(strict)).status).toBe(201);
      const third = await registerClient(strict);
      expect(third.status).toBe(429);
    } finally {
      await limited.close();
    }
  });
});
