import { createHash } from "node:crypto";
import { IAM_POSITIVE_TTL_MS, NEGATIVE_TTL_MS, TtlCache, type Principal } from "@core/service-auth";
import type { Auth } from "./auth.js";
import type { IamConfig } from "./config.js";
import type { PrincipalResolver } from "./principals.js";
import type { RateLimiter } from "./rate-limiter.js";

const digestOf = (key: string) => createHash("sha256").update(key).digest("base64url");

export type ApiKeyCheck =
  | { valid: true; principal: Principal }
  | { valid: false; code: string };

/**
 * API keys → principals. better-auth's plugin verifies the key against its stored hash; the key's
 * owner acts in the organization the key was made for (its metadata's `orgId`, set by the policy gate
 * when the key is made: policy-gate.ts), with that membership's permissions, and in none when it has
 * none. Answers are cached briefly under the key's digest, never the key itself.
 */
export class ApiKeyResolver {
  private readonly cache = new TtlCache<ApiKeyCheck>(20_000);

  constructor(
    private readonly auth: Auth,
    private readonly principals: PrincipalResolver,
    private readonly limits: { limiter: RateLimiter; config: IamConfig["rateLimits"] },
  ) {}

  /**
   * A check counted against the client it came from (ADR 0012): a wrong key takes one of the
   * client's failures in the window, atomically (RateLimiter.limitFailures), and once they are used
   * up every key is 429 before it is even looked at. A key already known valid is answered from
   * memory while the client is under its limit. Every route that takes an API key goes through
   * here, so guessing is limited wherever a key is accepted.
   */
  async checkFrom(key: string, client: string): Promise<ApiKeyCheck> {
    const { limiter, config } = this.limits;
    if (!config.enabled) return this.check(key);
    const failures = `apikey-failures:${client}`;
    const known = this.cache.get(digestOf(key));
    if (known?.valid) {
      await limiter.check(failures, config.apiKeyFailures, config.windowSeconds);
      return known;
    }
    return limiter.limitFailures(failures, config.apiKeyFailures, config.windowSeconds, () => this.check(key), (result) => !result.valid);
  }

  async check(key: string): Promise<ApiKeyCheck> {
    const digest = digestOf(key);
    const hit = this.cache.get(digest);
    if (hit) return hit;
    const result = await this.verify(key);
    this.cache.set(digest, result, result.valid ? IAM_POSITIVE_TTL_MS : NEGATIVE_TTL_MS);
    return result;
  }

  private async verify(key: string): Promise<ApiKeyCheck> {
    if (key.length > 512) return { valid: false, code: "INVALID_API_KEY" };
    const verdict = await this.auth.api.verifyApiKey({ body: { key } });
    if (!verdict.valid || !verdict.key) return { valid: false, code: verdict.error?.code ?? "INVALID_API_KEY" };
    const metadata = (verdict.key.metadata ?? {}) as { orgId?: unknown };
    const userId = verdict.key.referenceId;
    const orgId = typeof metadata.orgId === "string" ? metadata.orgId : null;
    const expiresAt = verdict.key.expiresAt ? new Date(verdict.key.expiresAt).toISOString() : null;
    const principal = await this.principals.forUser(userId, orgId, { apiKeyId: verdict.key.id, expiresAt });
    return principal ? { valid: true, principal } : { valid: false, code: "INVALID_API_KEY" };
  }

  forget(): void {
    this.cache.clear();
  }
}
