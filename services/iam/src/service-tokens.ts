import { createLocalJWKSet, decodeJwt, type JSONWebKeySet, type JWTVerifyGetKey } from "jose";
import { randomUUID, timingSafeEqual, createHash } from "node:crypto";
import { unixSeconds, type Clock } from "@core/kit";
import { MAX_SERVICE_TOKEN_SECONDS, TtlCache, verifyServiceToken, type ServiceTokenSource } from "@core/service-auth";
import type { Auth } from "./auth.js";

/** Service tokens live 5 minutes (DESIGN §4). */
export const SERVICE_TOKEN_SECONDS = MAX_SERVICE_TOKEN_SECONDS;

/**
 * Issues and checks service-to-service tokens: EdDSA JWTs signed with the keys of better-auth's
 * JWT plugin (rotated, published at `/api/auth/jwks`), `sub` = the calling service, `aud` = the
 * target, `typ` = "service".
 */
export class ServiceTokens implements ServiceTokenSource {
  private keySet: { keys: JWTVerifyGetKey; until: number } | null = null;
  private readonly verified = new TtlCache<string>(10_000);

  constructor(
    private readonly auth: Auth,
    private readonly issuer: string,
    private readonly credentials: Map<string, string>,
    private readonly clock: Clock,
  ) {}

  /** Whether `secret` is the registered secret of `serviceId`, compared in constant time. */
  authenticate(serviceId: string, secret: string): boolean {
    const expected = this.credentials.get(serviceId);
    // compare digests so unequal lengths take the same time as equal ones
    const a = createHash("sha256").update(expected ?? "\0no-such-service").digest();
    const b = createHash("sha256").update(secret).digest();
    return timingSafeEqual(a, b) && expected !== undefined;
  }

  isKnownService(serviceId: string): boolean {
    return this.credentials.has(serviceId);
  }

  async issue(serviceId: string, targetService: string): Promise<string> {
    const iat = unixSeconds(this.clock.now());
    const { token } = await this.auth.api.signJWT({
      body: {
        payload: { sub: serviceId, aud: targetService, iss: this.issuer, iat, exp: iat + SERVICE_TOKEN_SECONDS, typ: "service", jti: randomUUID() },
      },
    });
    return token;
  }

  /**
   * Makes sure a signing key exists before IAM takes requests (the auth library makes its first key
   * when the key set is first read): the key set other services fetch is then never empty, and the
   * first service token is not signed with a key minted after they fetched it.
   */
  async prepare(): Promise<void> {
    await this.keys();
  }

  /** IAM's own calls to other services (org-setup → platform registry) mint tokens locally. */
  tokenFor(targetService: string): Promise<string> {
    return this.issue("iam", targetService);
  }

  /**
   * Checks a service token addressed to IAM. A token that verified once is remembered until it
   * expires (at most 5 minutes): a service sends the same token with every call, and a signature
   * check per request would dominate the hot path.
   */
  async verify(jwt: string): Promise<{ serviceId: string } | null> {
    const known = this.known(jwt);
    if (known) return { serviceId: known };
    const result = await this.verifyOnce(jwt);
    if (result) {
      const exp = decodeJwt(jwt).exp ?? 0;
      this.verified.set(jwt, result.serviceId, exp * 1000 - this.clock.now().getTime());
    }
    return result;
  }

  /** The service id of a token that verified already and has not expired, without waiting. */
  known(jwt: string): string | undefined {
    return this.verified.get(jwt);
  }

  private async verifyOnce(jwt: string): Promise<{ serviceId: string } | null> {
    const first = await verifyServiceToken(jwt, await this.keys(), this.issuer, "iam", this.clock.now());
    if (first) return first;
    // a token signed with a key minted after our copy of the key set: look once more
    this.keySet = null;
    return verifyServiceToken(jwt, await this.keys(), this.issuer, "iam", this.clock.now());
  }

  private async keys(): Promise<JWTVerifyGetKey> {
    if (this.keySet && this.keySet.until > Date.now()) return this.keySet.keys;
    const jwks = (await this.auth.api.getJwks()) as unknown as JSONWebKeySet;
    const keys = createLocalJWKSet(jwks);
    this.keySet = { keys, until: Date.now() + 60_000 };
    return keys;
  }
}
