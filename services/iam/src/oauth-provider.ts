import { randomUUID } from "node:crypto";
import { oauthProvider, type OAuthProviderExtension } from "@better-auth/oauth-provider";
import type { BetterAuthPlugin } from "better-auth";
import { createAuthMiddleware } from "better-auth/api";
import type { Clock } from "@core/kit";
import type { Db } from "@core/storage";
import { clientMetadataDiscovery, type ClientMetadataDeps } from "./client-metadata.js";
import type { IamConfig } from "./config.js";
import { oauthResource } from "./db/schema.js";

/**
 * IAM as the OAuth 2.1 authorization server of MCP clients (issue 29, ADR 0028), through the auth
 * library's provider plugin. Authorization code with PKCE (S256 only: the plugin refuses `plain`),
 * refresh tokens that rotate (a replayed one is refused and its family revoked, by the plugin) and
 * are issued only with `offline_access`, and access tokens that are JWTs (`typ: at+jwt`) from IAM's
 * key set, bound to the one resource there is: the vault's MCP URL (RFC 8707).
 *
 * The token contract (the vault verifies it): header alg EdDSA, typ at+jwt; iss = IAM's URL;
 * aud = the vault's MCP URL; sub = user id; client_id and azp = the client; scope; exp and iat; and
 * ours: `org_id` (the organization the person acted in when consenting, or null) and `permissions`
 * (their effective permissions there, computed at issuance and at every refresh).
 */

/** The scopes MCP clients may ask for: reading the vault, and refresh tokens. No OpenID Connect (no ID tokens, no userinfo). */
export const OAUTH_SCOPES = ["vault:read", "offline_access"] as const;

/** What each scope means, in the consent page's words. */
export const SCOPE_WORDS: Record<string, string> = {
  "vault:read": "Read the documents in the Core vault that your organization may read",
  offline_access: "Stay connected: keep this access after you close the app, until you sign out or revoke it",
};

/** The consent page: the plugin sends the browser here with the signed authorization request. */
export const CONSENT_PAGE = "/oauth/consent";

/**
 * Library routes of the plugin that are off: clients manage nothing (they register themselves, and
 * operators have no client or resource administration yet); no OpenID Connect (userinfo, end
 * session); introspection needs a client secret, and MCP clients are public.
 */
export const OAUTH_DISABLED_PATHS = [
  "/oauth2/create-client",
  "/oauth2/get-client",
  "/oauth2/public-client",
  "/oauth2/public-client-prelogin",
  "/oauth2/get-clients",
  "/oauth2/update-client",
  "/oauth2/client/rotate-secret",
  "/oauth2/delete-client",
  "/oauth2/get-consent",
  "/oauth2/get-consents",
  "/oauth2/update-consent",
  "/oauth2/delete-consent",
  "/oauth2/continue",
  "/oauth2/userinfo",
  "/oauth2/end-session",
  "/oauth2/end-session/confirm",
  "/oauth2/introspect",
  "/admin/oauth2/create-client",
  "/admin/oauth2/update-client",
  "/admin/oauth2/resources",
  "/admin/oauth2/resources/:identifier",
  "/admin/oauth2/resources/:identifier/clients/:client_id",
];

/** Parameters the plugin adds when it signs an authorization request for our pages. */
const SIGNATURE_PARAMS = ["sig", "exp", "ba_iat", "ba_param", "ba_pl"];

/**
 * Where the sign-in page returns to when the plugin sent the browser there (its `loginPage`) with a
 * signed authorization request: the authorization endpoint again, with the request as the client
 * made it, so every way of signing in (password, magic link, passkey, SSO, the two-factor step)
 * comes back to authorize by following `next`, the one thing they all do. The request is checked
 * afresh there; `prompt=login` is dropped, since the person has just signed in. Null for any other query.
 */
export function authorizeAfterSignIn(query: URLSearchParams): string | null {
  if (!query.has("sig") || !query.has("client_id") || !query.has("response_type")) return null;
  const request = new URLSearchParams();
  for (const [name, value] of query) {
    if (SIGNATURE_PARAMS.includes(name)) continue;
    if (name === "prompt") {
      const rest = value.split(" ").filter((p) => p && p !== "login");
      if (rest.length > 0) request.append(name, rest.join(" "));
      continue;
    }
    request.append(name, value);
  }
  return `/api/auth/oauth2/authorize?${request.toString()}`;
}

export interface OAuthProviderDeps {
  db: Db;
  config: IamConfig;
  /** when a client's metadata document is due to be fetched again */
  clock: Clock;
  /** clients registered through their metadata document go to the audit log as registrations do */
  recordRegistration: ClientMetadataDeps["recordRegistration"];
  /** the organization a session acts in (its active one, else the user's default), or null */
  actingOrganization: (userId: string, activeOrganizationId: string | null) => Promise<string | null>;
  /** a user's effective permissions in an organization for a token issued through `sessionId` ([] when not a member or held back by its policy) */
  grantedPermissions: (userId: string, orgId: string, sessionId: string | undefined) => Promise<string[]>;
}

/** The grants a registered client can use; the device grant is the CLI's alone (DESIGN §5). */
const CLIENT_GRANTS = ["authorization_code", "refresh_token"];

const isLoopbackHttp = (url: URL) => url.protocol === "http:" && ["localhost", "127.0.0.1", "[::1]"].includes(url.hostname);

/**
 * Whether redirect URIs are a native app's (RFC 8252 §7): at least one http URI on a loopback host,
 * and every other one https (a claimed address).
 */
function nativeRedirects(uris: unknown): boolean {
  if (!Array.isArray(uris) || uris.length === 0) return false;
  const urls: URL[] = [];
  for (const uri of uris) {
    try {
      urls.push(new URL(String(uri)));
    } catch {
      return false;
    }
  }
  return urls.some(isLoopbackHttp) && urls.every((url) => isLoopbackHttp(url) || url.protocol === "https:");
}

/**
 * What registration (RFC 7591) takes from MCP clients as they send it, adjusted where RFC 7591 §2
 * lets the server substitute values:
 * - no `application_type` is a web client to the plugin (OpenID Connect's default), which may not
 *   use http loopback redirects; MCP clients (the SDK's, Claude's, the Inspector) send none and
 *   listen on loopback, which RFC 8252 makes a native app. A client that says nothing and registers
 *   loopback redirects (with https ones beside them at most) is registered as native; one that says
 *   "web" stays web.
 * - clients ask for every grant the discovery document lists (VS Code does), which includes the
 *   CLI's device grant: the grants a registered client cannot use are dropped, and the answer says
 *   which it got. A client left with none is refused by the plugin as it asked.
 */
function registrationAsSent(): BetterAuthPlugin {
  return {
    id: "core-oauth-registration",
    hooks: {
      before: [
        {
          matcher: (ctx) => ctx.path === "/oauth2/register",
          handler: createAuthMiddleware(async (ctx) => {
            const body = ctx.body as Record<string, unknown> | undefined;
            if (!body) return;
            const adjusted = { ...body };
            if (body.application_type === undefined && nativeRedirects(body.redirect_uris)) adjusted.application_type = "native";
            if (Array.isArray(body.grant_types)) {
              const usable = body.grant_types.filter((grant) => CLIENT_GRANTS.includes(String(grant)));
              if (usable.length > 0) adjusted.grant_types = usable;
            }
            return { context: { body: adjusted } };
          }),
        },
      ],
    },
  };
}

/** `org_id` and `permissions` of every access token, at issuance and at each refresh (the contract above). */
function organizationClaims(deps: OAuthProviderDeps): OAuthProviderExtension {
  return {
    claims: {
      accessToken: async ({ user, referenceId, sessionId }) => {
        if (!user) return { org_id: null, permissions: [] };
        const orgId = referenceId ?? null;
        return { org_id: orgId, permissions: orgId ? await deps.grantedPermissions(user.id, orgId, sessionId) : [] };
      },
    },
  };
}

/**
 * Clients known by their metadata document (an https client id; client-metadata.ts), registered as
 * dynamic registration registers them: linked to the vault, with the scopes there are. Off with
 * CORE_OAUTH_CLIENT_METADATA=off, which also stops the clients it brought from being found.
 */
function clientMetadataDocuments(deps: OAuthProviderDeps): OAuthProviderExtension[] {
  const { config } = deps;
  if (!config.clientMetadata.enabled) return [];
  return [{ clientDiscovery: clientMetadataDiscovery({ db: deps.db, clock: deps.clock, config: config.clientMetadata, resources: [config.vaultResource], scopes: [...OAUTH_SCOPES], recordRegistration: deps.recordRegistration }) }];
}

/** The one resource (RFC 8707) tokens are issued for: the vault's MCP URL. */
const vaultResourceOf = (config: IamConfig) => ({ identifier: config.vaultResource, name: "Core vault (MCP)", allowedScopes: [...OAUTH_SCOPES] });

/**
 * Writes the vault's resource row if it is missing, before the auth library starts: the plugin
 * seeds it when it starts too, and two replicas starting together would both insert it, the second
 * failing on the unique identifier (the plugin recognises that failure by its message, which the
 * database driver wraps). Once the row exists, the plugin only brings it up to date with the
 * configuration (`resourceSeedMode: "overwrite"`), which replicas may do together.
 */
export async function ensureVaultResource(db: Db, config: IamConfig, now: Date): Promise<void> {
  const resource = vaultResourceOf(config);
  await db
    .insert(oauthResource)
    .values({ id: randomUUID(), identifier: resource.identifier, name: resource.name, allowedScopes: resource.allowedScopes, createdAt: now, updatedAt: now })
    .onConflictDoNothing({ target: oauthResource.identifier });
}

/** The plugin and our registration rule, for createAuth's plugin list. */
export function oauthProviderPlugins(deps: OAuthProviderDeps) {
  const { config } = deps;
  return [
    registrationAsSent(),
    oauthProvider({
      loginPage: "/sign-in",
      consentPage: CONSENT_PAGE,
      scopes: [...OAUTH_SCOPES],
      // no client credentials grant: every token stands for a person
      grantTypes: CLIENT_GRANTS,
      accessTokenExpiresIn: config.oauthAccessTokenSeconds,
      refreshTokenExpiresIn: config.refreshTokenSeconds,
      // MCP clients register themselves (the specification's Dynamic Client Registration), rate-limited per address
      allowDynamicClientRegistration: true,
      allowUnauthenticatedClientRegistration: true,
      resources: [vaultResourceOf(config)],
      // the configuration is the truth about the vault's resource (its URL follows CORE_VAULT_URL)
      resourceSeedMode: "overwrite",
      clientRegistrationDefaultResources: [config.vaultResource],
      // the organization the person acts in is the consent's reference: it rides on the code and every refresh token
      postLogin: {
        page: CONSENT_PAGE,
        shouldRedirect: () => false,
        consentReferenceId: async ({ user, session }) =>
          (await deps.actingOrganization(user.id, (session as { activeOrganizationId?: string | null }).activeOrganizationId ?? null)) ?? undefined,
      },
      extensions: [organizationClaims(deps), ...clientMetadataDocuments(deps)],
      rateLimit: { register: { window: config.rateLimits.windowSeconds, max: config.rateLimits.clientRegistration } },
    }),
  ] as const;
}
