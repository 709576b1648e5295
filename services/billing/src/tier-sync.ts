import { and, eq, sql } from "drizzle-orm";
import { fetchTraced, tracingFor, type Logger } from "@core/kit";
import { rowsOf, type Db } from "@core/storage";
import type { ServiceTokenSource } from "@core/service-auth";
import { tierSync } from "./db/schema.js";

/** Retries back off from 2 s to 5 min: a registry down for a minute catches up within it. */
/** A claimed push (its fetch times out in 10 s) is another replica's to retry after this. */
const CLAIM_LEASE_MS = 60_000;
const backoffMs = (attempts: number) => Math.min(2_000 * 2 ** Math.min(attempts, 8), 300_000);

/**
 * Records the platform's new tier in the transaction of the change that made it (DESIGN §6.3: an
 * outbox). Only the latest tier matters, so each platform has one row whose version counts up.
 */
export async function recordTier(tx: Db, platformId: string, tier: string, wallNow: Date): Promise<void> {
  await tx
    .insert(tierSync)
    .values({ platformId, tier, version: 1, nextAttemptAt: wallNow, updatedAt: wallNow })
    .onConflictDoUpdate({
      target: tierSync.platformId,
      set: { tier, version: sql`${tierSync.version} + 1`, attempts: 0, nextAttemptAt: wallNow, lastError: null, updatedAt: wallNow },
    });
}

/**
 * Pushes pending tiers to the platform registry (`PATCH /platforms/{id}` with a service token),
 * retried with backoff until it accepts. A version written while a push was on its way is pushed again.
 */
export class TierSync {
  constructor(
    private readonly db: Db,
    private readonly registryUrl: string,
    private readonly tokens: ServiceTokenSource,
    private readonly logger: Logger,
    private readonly doFetch: typeof fetch = fetch,
  ) {}

  /** One pass over what is due; answers how many platforms the registry accepted. */
  async push(wallNow: Date): Promise<number> {
    const due = await this.claim(wallNow);
    let accepted = 0;
    for (const row of due) {
      const error = await this.send(row.platformId, row.tier);
      if (error === null) {
        accepted++;
        // a version written meanwhile is due at once (recordTier set its next attempt), and pushed by the next pass
        await this.db
          .update(tierSync)
          .set({ syncedVersion: row.version, attempts: 0, lastError: null, nextAttemptAt: wallNow })
          .where(and(eq(tierSync.platformId, row.platformId), eq(tierSync.version, row.version)));
      } else {
        this.logger.warn({ platformId: row.platformId, attempts: row.attempts + 1, error }, "the platform registry did not take a tier yet");
        await this.db
          .update(tierSync)
          .set({ attempts: row.attempts + 1, lastError: error.slice(0, 500), nextAttemptAt: new Date(wallNow.getTime() + backoffMs(row.attempts)) })
          .where(and(eq(tierSync.platformId, row.platformId), eq(tierSync.version, row.version)));
      }
    }
    return accepted;
  }

  /**
   * Takes up to 50 due platforms for this replica: their next attempt moves past the claim's lease
   * in the statement that picks them (`FOR UPDATE SKIP LOCKED`), so another replica's pass skips
   * them, and a replica that dies mid-push leaves them due again once the lease runs out.
   */
  private async claim(wallNow: Date): Promise<{ platformId: string; tier: string; version: number; attempts: number }[]> {
    const leaseUntil = new Date(wallNow.getTime() + CLAIM_LEASE_MS);
    return rowsOf<{ platformId: string; tier: string; version: number; attempts: number }>(
      await this.db.execute(sql`
        update billing.tier_sync set next_attempt_at = ${leaseUntil.toISOString()}::timestamptz
        where platform_id in (
          select platform_id from billing.tier_sync
          where version <> synced_version and next_attempt_at <= ${wallNow.toISOString()}::timestamptz
          order by next_attempt_at limit 50
          for update skip locked)
        returning platform_id as "platformId", tier, version, attempts`),
    ).map((row) => ({ ...row, version: Number(row.version), attempts: Number(row.attempts) }));
  }

  /**
   * null when the registry took the tier; else why not. A platform it does not know is not retried forever: it is the registry's answer.
   * The worker's push serves no request: each starts a trace of its own (DESIGN §10).
   */
  private async send(platformId: string, tier: string): Promise<string | null> {
    const from = tracingFor("billing");
    try {
      const response = await fetchTraced(from, this.doFetch, `${this.registryUrl}/platforms/${encodeURIComponent(platformId)}`, {
        method: "PATCH",
        headers: { "content-type": "application/json", authorization: `Bearer ${await this.tokens.tokenFor("platform-registry", from)}` },
        body: JSON.stringify({ tier }),
        signal: AbortSignal.timeout(10_000),
      });
      await response.body?.cancel();
      if (response.ok || response.status === 404) return null;
      return `the registry answered ${response.status}`;
    } catch (err) {
      return (err as Error).message || "the registry is unreachable";
    }
  }
}
