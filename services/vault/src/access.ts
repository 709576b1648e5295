import type { Context } from "hono";
import { errors as joseErrors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from "jose";
import type { OAuthProtectedResourceMetadata } from "@modelcontextprotocol/sdk/shared/auth.js";
import { ApiError, serviceUnreachable, systemClock, type Clock } from "@core/kit";
import { bearerOf, callerOf, CLOCK_SKEW_SECONDS, isJwt, policyRefusal, type CredentialResolvers, type Restriction } from "@core/service-auth";

/** The permission (and OAuth scope) that reading the vault needs (issue 29). */
export const VAULT_READ = "vault:read";
/** RFC 9728 §3: where a protected resource publishes its metadata. */
export const PROTECTED_RESOURCE_METADATA_PATH = "/.well-known/oauth-protected-resource";
/** `offline_access` too: without asking for it a client gets no refresh token from IAM (ADR 0028). */
export const SCOPES_SUPPORTED = [VAULT_READ, "offline_access"];

/** Who reads the vault: a person, through an OAuth access token, the CLI's session token or an API key. */
export interface VaultReader {
  userId: string;
  via: "access-token" | "session" | "api-key";
  orgId: string | null;
  permissions: string[];
  /** the scopes an access token was granted; absent for session tokens and API keys, which have none */
  scopes?: string[];
  /** the OAuth client an access token was issued to */
  clientId?: string;
  /** what holds a session back: its organization's policy (ADR 0023), which leaves it no permission */
  restriction?: Restriction;
}

export interface VaultAccessOptions {
  /** the vault's MCP URL exactly: the audience of its access tokens and the `resource` of its metadata */
  resource: string;
  /** IAM's URL: the issuer of access tokens, and the authorization server clients are sent to */
  issuer: string;
  /** IAM's key set (`iamKeySet`) */
  keys: JWTVerifyGetKey;
  /** session tokens and API keys, asked of IAM (`remoteResolvers`) */
  credentials: CredentialResolvers;
  clock?: Clock;
  /** where people read how to connect, for the metadata */
  documentation?: string;
}

const READER = "vault:reader";

const strings = (value: unknown): string[] => (Array.isArray(value) ? value.filter((item): item is string => typeof item === "string") : []);

/** The metadata URL of a resource: the well-known path inserted between its origin and its path (RFC 9728 §3.1). */
export function protectedResourceMetadataUrl(resource: string): string {
  const { origin, pathname } = new URL(resource);
  return `${origin}${PROTECTED_RESOURCE_METADATA_PATH}${pathname === "/" ? "" : pathname}`;
}

/**
 * The vault as an OAuth protected resource (issue 29, ADR 0028): every MCP request carries a
 * credential, an access token IAM issued for the vault (verified here against IAM's key set) or the
 * CLI's session token or an API key (asked of IAM), and its person holds `vault:read`. Refusals
 * carry the `WWW-Authenticate` challenge that sends an MCP client to the metadata and from there to
 * IAM (RFC 6750 §3, RFC 9728 §5.1).
 */
export class VaultAccess {
  readonly metadataUrl: string;
  private readonly clock: Clock;

  constructor(private readonly options: VaultAccessOptions) {
    this.metadataUrl = protectedResourceMetadataUrl(options.resource);
    this.clock = options.clock ?? systemClock;
  }

  /** The protected resource metadata (RFC 9728 §2). */
  metadata(): OAuthProtectedResourceMetadata {
    return {
      resource: this.options.resource,
      authorization_servers: [this.options.issuer],
      scopes_supported: SCOPES_SUPPORTED,
      bearer_methods_supported: ["header"],
      resource_name: "Core architecture vault",
      ...(this.options.documentation ? { resource_documentation: this.options.documentation } : {}),
    };
  }

  /** The kit's guard for the MCP endpoint: resolves the reader of the request, or refuses it. */
  async admit(c: Context): Promise<void> {
    c.set(READER as never, (await this.readerOf(c)) as never);
  }

  private async readerOf(c: Context): Promise<VaultReader> {
    const apiKey = c.req.header("x-api-key");
    const token = bearerOf(c.req.header("authorization"));
    if (!apiKey && !token) throw this.unauthenticated("Authentication required: send an access token from IAM (see the resource metadata), a session token or an API key");
    const reader = !apiKey && isJwt(token!) ? await this.verifyAccessToken(token!) : await this.resolvePerson(c);
    if (reader.scopes && !reader.scopes.includes(VAULT_READ)) throw this.insufficientScope(`The access token was not granted the scope ${VAULT_READ}`);
    if (!reader.permissions.includes(VAULT_READ)) throw reader.restriction ? this.heldBack(reader.restriction) : this.insufficientScope(`Reading the vault needs the permission ${VAULT_READ}`);
    return reader;
  }

  /** A session token or API key, through IAM like every resource service (DESIGN §4); IAM's outage stays a 503. */
  private async resolvePerson(c: Context): Promise<VaultReader> {
    let caller;
    try {
      caller = await callerOf(c, this.options.credentials);
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) throw this.unauthenticated(err.message, true);
      throw err;
    }
    // a session token or API key always resolves to a person; a JWT never reaches here
    if (caller?.kind !== "principal") throw this.unauthenticated("Invalid credential", true);
    const { principal } = caller;
    return {
      userId: principal.userId,
      via: principal.type === "apikey" ? "api-key" : "session",
      orgId: principal.orgId,
      permissions: principal.permissions,
      ...(principal.restriction ? { restriction: principal.restriction } : {}),
    };
  }

  /**
   * An access token IAM issued for this resource (RFC 9068): signed with IAM's key, typed `at+jwt`,
   * its audience the vault's URL. A service token (typed otherwise, addressed to a service id) and a
   * token for another resource are refused here.
   */
  private async verifyAccessToken(jwt: string): Promise<VaultReader> {
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(jwt, this.options.keys, {
        issuer: this.options.issuer,
        audience: this.options.resource,
        algorithms: ["EdDSA"],
        typ: "at+jwt",
        requiredClaims: ["sub", "exp", "iat"],
        currentDate: this.clock.now(),
        clockTolerance: CLOCK_SKEW_SECONDS,
      }));
    } catch (err) {
      // IAM answered that it cannot serve its key set now, or could not be reached for it
      if (err instanceof ApiError) throw err;
      if (err instanceof joseErrors.JWKSTimeout || (err instanceof TypeError && !(err instanceof joseErrors.JOSEError))) throw serviceUnreachable("IAM's key set");
      throw this.unauthenticated(err instanceof joseErrors.JWTExpired ? "The access token has expired" : "Invalid access token", true);
    }
    const clientId = typeof payload.client_id === "string" ? payload.client_id : typeof payload.azp === "string" ? payload.azp : undefined;
    return {
      userId: payload.sub!,
      via: "access-token",
      orgId: typeof payload.org_id === "string" ? payload.org_id : null,
      permissions: strings(payload.permissions),
      scopes: typeof payload.scope === "string" ? payload.scope.split(" ").filter(Boolean) : [],
      ...(clientId ? { clientId } : {}),
    };
  }

  /** RFC 6750 §3: the challenge, with `error` only when a credential was presented. */
  private challenge(params: Record<string, string>): Record<string, string> {
    const all = { ...params, resource_metadata: this.metadataUrl };
    return { "www-authenticate": `Bearer ${Object.entries(all).map(([name, value]) => `${name}="${value}"`).join(", ")}` };
  }

  private unauthenticated(message: string, presented = false): ApiError {
    return new ApiError(401, "UNAUTHENTICATED", message, null, this.challenge(presented ? { error: "invalid_token" } : {}));
  }

  private insufficientScope(message: string): ApiError {
    return new ApiError(403, "FORBIDDEN", message, null, this.challenge({ error: "insufficient_scope", scope: VAULT_READ }));
  }

  /**
   * A session held back by its organization's policy: the services' one policy refusal (its
   * message and details), with the challenge's `error_description` saying it too (RFC 6750 §3), so
   * an MCP client that shows only the challenge tells the person what to do.
   */
  private heldBack(restriction: Restriction): ApiError {
    const refusal = policyRefusal(restriction);
    return new ApiError(403, "FORBIDDEN", refusal.message, refusal.details, this.challenge({ error: "insufficient_scope", scope: VAULT_READ, error_description: refusal.message }));
  }
}

/** The reader the guard admitted, or null when the vault runs without auth. */
export function readerOf(c: Context): VaultReader | null {
  return (c.get(READER as never) as VaultReader | undefined) ?? null;
}
