import { createRemoteJWKSet, customFetch, errors as joseErrors, jwtVerify, type JWTVerifyGetKey, type RemoteJWKSet } from "jose";
import { ApiError, fetchTraced, rateLimited, serviceUnavailable, serviceUnreachable, systemClock, tracingFor, type Clock } from "@core/kit";
import { PrincipalSchema, type Principal } from "./principal.js";
import type { CredentialResolvers, PresentedBy } from "./credentials.js";
import { TtlCache } from "./ttl-cache.js";
import { readAgainOnReset } from "./read-again.js";
import type { ServiceTokenSource } from "./service-token-client.js";

/**
 * How long a valid credential is trusted without asking again. A revocation must reach every
 * service of every replica within 5 s: the IAM replica that revokes clears its own cache, another
 * IAM replica may answer from its cache for up to IAM_POSITIVE_TTL_MS, and a resource service from
 * its own for up to POSITIVE_TTL_MS after that, so the two together stay under 5 s.
 */
export const POSITIVE_TTL_MS = 2_500;
export const IAM_POSITIVE_TTL_MS = 2_000;
export const NEGATIVE_TTL_MS = 1_000;
/** DESIGN §4: service tokens live at most 5 minutes */
export const MAX_SERVICE_TOKEN_SECONDS = 300;
/** how far the clocks of IAM and this service may disagree when checking `iat` and `exp` */
export const CLOCK_SKEW_SECONDS = 5;

export interface RemoteResolverOptions {
  iamUrl: string;
  /** this service's id: the audience its service tokens must carry */
  serviceId: string;
  tokens: ServiceTokenSource;
  fetch?: typeof fetch;
  /** key set override (tests); default: IAM's JWKS */
  keys?: JWTVerifyGetKey;
  /** time for cache expiry and token lifetimes; default: the system clock */
  clock?: Clock;
}

/**
 * IAM's key set (JWKS), fetched when first needed and again when a token names a key it lacks, by
 * `serviceId` (whose trace the fetch starts: it serves no one request). IAM answering a 5xx is IAM
 * unavailable (503 with its Retry-After), not a wrong token.
 */
export function iamKeySet(iamUrl: string, serviceId = "", doFetch: typeof fetch = fetch): RemoteJWKSet {
  return createRemoteJWKSet(new URL(`${iamUrl.replace(/\/+$/, "")}/api/auth/jwks`), {
    cooldownDuration: 5_000,
    [customFetch]: async (url: string, init: RequestInit) => {
      const response = await fetchTraced(tracingFor(serviceId), doFetch, url, init);
      if (response.status >= 500) throw serviceUnavailable("IAM's key set", response);
      return response;
    },
  });
}

/** A readiness check (DESIGN §10): resolves once IAM's keys are known, fetching them when they are not yet. */
export async function keysKnown(keys: RemoteJWKSet): Promise<void> {
  if (keys.jwks() === undefined) await keys.reload();
}

/**
 * Credential resolution for resource services (DESIGN §4): JWTs verified locally against IAM's
 * JWKS; session tokens and API keys asked of IAM with a service token, and cached briefly.
 */
export function remoteResolvers(options: RemoteResolverOptions): CredentialResolvers {
  const doFetch = options.fetch ?? fetch;
  const iamUrl = options.iamUrl.replace(/\/+$/, "");
  const keys = options.keys ?? iamKeySet(iamUrl, options.serviceId, doFetch);
  const clock = options.clock ?? systemClock;
  const now = () => clock.now().getTime();
  const sessions = new TtlCache<Principal | null>(10_000, now);
  const apiKeys = new TtlCache<Principal | null>(10_000, now);

  async function askIam(path: string, body: object, by: PresentedBy | undefined): Promise<Principal | null> {
    // the request's trace, or (asked outside any request) a trace of its own
    const from = by?.trace ?? tracingFor(options.serviceId);
    let response: Response;
    try {
      // the check is a read: a connection IAM closed as it was reused is asked again
      response = await readAgainOnReset(async () =>
        fetchTraced(from, doFetch, `${iamUrl}${path}`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            authorization: `Bearer ${await options.tokens.tokenFor("iam", from)}`,
            // IAM logs the check under the request it serves
            ...(by?.requestId ? { "x-request-id": by.requestId } : {}),
          },
          body: JSON.stringify(body),
          signal: AbortSignal.timeout(5_000),
        }),
      );
    } catch (err) {
      // no service token to ask with: IAM's answer to that is the failure
      if (err instanceof ApiError) throw err;
      throw serviceUnreachable("IAM");
    }
    // IAM limits wrong API keys per calling service and client address: the client is over its limit
    if (response.status === 429) throw rateLimited(Number(response.headers.get("retry-after")) || 60);
    // IAM answered, so it is not unreachable: it cannot serve now (5xx), or refused this service (401, 403)
    if (response.status !== 200) throw serviceUnavailable("IAM", response, now());
    try {
      const answer = (await response.json()) as { valid?: unknown; principal?: unknown };
      if (answer.valid === false) return null;
      if (answer.valid === true) return withAbsoluteLocation(PrincipalSchema.parse(answer.principal), iamUrl);
    } catch {
      // falls through: an answer outside the contract is IAM's failure, not ours (502, never 500)
    }
    throw new ApiError(502, "UPSTREAM_UNAVAILABLE", `IAM's answer to ${path} breaks its contract`);
  }

  // one question to IAM per credential at a time: when an entry expires under load, the requests
  // that find it gone wait for the one already asking (a failure is not cached, and not shared later)
  const asking = new Map<string, Promise<Principal | null>>();
  function cached(cache: TtlCache<Principal | null>, kind: string, key: string, load: () => Promise<Principal | null>): Promise<Principal | null> {
    const hit = cache.get(key);
    if (hit !== undefined) return Promise.resolve(hit);
    const flightKey = `${kind}:${key}`;
    const inFlight = asking.get(flightKey);
    if (inFlight) return inFlight;
    const question = load().then(
      (principal) => {
        asking.delete(flightKey);
        cache.set(key, principal, principal ? POSITIVE_TTL_MS : NEGATIVE_TTL_MS);
        return principal;
      },
      (err: unknown) => {
        asking.delete(flightKey);
        throw err;
      },
    );
    asking.set(flightKey, question);
    return question;
  }

  return {
    session: (token, by) => cached(sessions, "session", token, () => askIam("/api/validate-session", { token }, by)),
    // a wrong key counts against its client's address, so only one client's requests share a question
    apiKey: (key, by) => cached(apiKeys, `apiKey:${by?.ip ?? ""}`, key, () => askIam("/api/core/apikey/validate", { key, ...(by ? { clientIp: by.ip } : {}) }, by)),
    serviceToken: (jwt) => verifyServiceToken(jwt, keys, iamUrl, options.serviceId, clock.now()),
    known: {
      session: (token) => sessions.get(token) ?? undefined,
      // service tokens are checked against the key set on every call here
      serviceToken: () => undefined,
    },
  };
}

/**
 * A held-back principal's `restriction.location` is a path on IAM as IAM answers it; here, where
 * the refusal is another service's, it becomes IAM's absolute address, so a client or page can send
 * the person there (docs/vault/cross-cutting/service-auth.md#Policy refusals).
 */
function withAbsoluteLocation(principal: Principal, iamUrl: string): Principal {
  const restriction = principal.restriction;
  if (!restriction) return principal;
  return { ...principal, restriction: { ...restriction, location: new URL(restriction.location, `${iamUrl}/`).href } };
}

export async function verifyServiceToken(
  jwt: string,
  keys: JWTVerifyGetKey,
  issuer: string,
  audience: string,
  currentDate: Date = new Date(),
): Promise<{ serviceId: string } | null> {
  try {
    const { payload } = await jwtVerify(jwt, keys, {
      issuer,
      audience,
      algorithms: ["EdDSA"],
      requiredClaims: ["sub", "exp", "iat"],
      currentDate,
      clockTolerance: CLOCK_SKEW_SECONDS,
      // refuses an `iat` in the future too: exp - iat alone would let a token dated ahead live for years
      maxTokenAge: MAX_SERVICE_TOKEN_SECONDS,
    });
    if (payload.exp! - payload.iat! > MAX_SERVICE_TOKEN_SECONDS) return null;
    if (payload.typ !== "service") return null;
    return { serviceId: payload.sub! };
  } catch (err) {
    // IAM answered that it cannot serve its key set now (iamKeySet)
    if (err instanceof ApiError) throw err;
    if (err instanceof joseErrors.JWKSTimeout || (err instanceof TypeError && !(err instanceof joseErrors.JOSEError))) {
      throw serviceUnreachable("IAM's key set");
    }
    return null;
  }
}
