import { createHash, randomBytes } from "node:crypto";
import { expect } from "vitest";
import type { Iam } from "./harness.js";
import { oauth } from "./device.js";
import { hiddenFields, PageBrowser } from "./pages.js";

/** The vault's MCP URL in the test configuration (harness testConfig): the one resource. */
export const VAULT_RESOURCE = "http://localhost:4500/mcp";
/** A native client's loopback redirect, as MCP clients register one. */
export const LOOPBACK_REDIRECT = "http://127.0.0.1:7777/callback";

export const pkcePair = () => {
  const verifier = randomBytes(32).toString("base64url");
  return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") };
};

/** Registers a public client the way MCP clients do (RFC 7591, no credentials). */
export async function registerClient(iam: Iam, metadata: Record<string, unknown> = {}) {
  const response = await iam.app.request("/api/auth/oauth2/register", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      client_name: "Test agent",
      redirect_uris: [LOOPBACK_REDIRECT],
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      ...metadata,
    }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, any> };
}

export async function publicClient(iam: Iam): Promise<string> {
  const r = await registerClient(iam);
  if (r.status !== 200 && r.status !== 201) throw new Error(`registration refused: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.client_id as string;
}

export interface AuthorizationRequest {
  clientId: string;
  scope?: string;
  redirectUri?: string;
  resource?: string | null;
  challenge?: string;
  challengeMethod?: string;
  state?: string;
}

/** The authorization endpoint's address for a request (RFC 6749 §4.1.1, RFC 7636, RFC 8707). */
export function authorizeAddress(request: AuthorizationRequest): string {
  const params = new URLSearchParams({
    response_type: "code",
    client_id: request.clientId,
    redirect_uri: request.redirectUri ?? LOOPBACK_REDIRECT,
    scope: request.scope ?? "vault:read offline_access",
    state: request.state ?? "state-1",
    code_challenge: request.challenge ?? pkcePair().challenge,
    code_challenge_method: request.challengeMethod ?? "S256",
  });
  if (request.resource !== null) params.set("resource", request.resource ?? VAULT_RESOURCE);
  return `/api/auth/oauth2/authorize?${params.toString()}`;
}

/**
 * A signed-in browser through authorize and the consent page, answering `decision`: the address the
 * browser is sent to afterwards (the client's redirect URI with a code, or with an error).
 */
export async function consentAs(browser: PageBrowser, request: AuthorizationRequest, decision: "allow" | "deny" = "allow"): Promise<URL> {
  const asked = await browser.get(authorizeAddress(request));
  expect(asked.status, asked.html).toBe(302);
  const consentPage = asked.location!;
  expect(consentPage.startsWith("/oauth/consent?")).toBe(true);
  const shown = await browser.get(consentPage);
  expect(shown.status, shown.html).toBe(200);
  const answered = await browser.post("/oauth/consent", { ...hiddenFields(shown.html, "/oauth/consent"), decision });
  expect(answered.status, answered.html).toBe(303);
  return new URL(answered.location!);
}

/** An authorization code for `request`, through consent as the browser's user. */
export async function authorizationCode(browser: PageBrowser, request: AuthorizationRequest): Promise<string> {
  const back = await consentAs(browser, request);
  const code = back.searchParams.get("code");
  if (!code) throw new Error(`no code in ${back.href}`);
  return code;
}

/** The token request for a code (RFC 6749 §4.1.3 with RFC 7636's verifier and RFC 8707's resource). */
export const exchangeCode = (iam: Iam, clientId: string, code: string, verifier: string, extra: Record<string, string> = {}) =>
  oauth(iam, "/oauth/token", { grant_type: "authorization_code", code, redirect_uri: LOOPBACK_REDIRECT, client_id: clientId, code_verifier: verifier, resource: VAULT_RESOURCE, ...extra });

export const refreshGrant = (iam: Iam, clientId: string, refreshToken: string, extra: Record<string, string> = {}) =>
  oauth(iam, "/oauth/token", { grant_type: "refresh_token", refresh_token: refreshToken, client_id: clientId, resource: VAULT_RESOURCE, ...extra });

/** An MCP client's refresh token, issued through `person`'s browser session (its cookie). */
export async function oauthRefreshTokenOf(iam: Iam, person: { cookie: string }) {
  const clientId = await publicClient(iam);
  const pkce = pkcePair();
  const code = await authorizationCode(new PageBrowser(iam, person.cookie), { clientId, challenge: pkce.challenge });
  const tokens = await exchangeCode(iam, clientId, code, pkce.verifier);
  expect(tokens.status, JSON.stringify(tokens.body)).toBe(200);
  return { clientId, refreshToken: tokens.body.refresh_token as string };
}
