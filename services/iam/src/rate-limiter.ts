import { sql } from "drizzle-orm";
import { rateLimited } from "@core/kit";
import { rowsOf, type Db } from "@core/storage";
import type { Clock } from "@core/kit";

/**
 * Fixed-window counters in the database, so every replica sees the same count (issue 2: limits
 * hold across replicas). One upsert per hit; old windows are pruned now and then.
 */
export class RateLimiter {
  private hits = 0;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  /** Counts one hit on `key`; throws 429 with Retry-After once `max` hits fell in this window. */
  async hit(key: string, max: number, windowSeconds: number): Promise<void> {
    const count = await this.count(key, windowSeconds, 1);
    if (count > max) throw rateLimited(this.secondsLeft(windowSeconds));
  }

  /** Counts one hit on `key` without refusing anything (failures counted for a later `check`). */
  async note(key: string, windowSeconds: number): Promise<void> {
    await this.count(key, windowSeconds, 1);
  }

  /** Throws 429 when `key` already reached `max` in this window, without counting. */
  async check(key: string, max: number, windowSeconds: number): Promise<void> {
    const count = await this.count(key, windowSeconds, 0);
    if (count >= max) throw rateLimited(this.secondsLeft(windowSeconds));
  }

  private secondsLeft(windowSeconds: number): number {
    const now = this.clock.now().getTime() / 1000;
    return windowSeconds - (now % windowSeconds);
  }

  private async count(key: string, windowSeconds: number, add: number): Promise<number> {
    const now = Math.floor(this.clock.now().getTime() / 1000);
    const windowStart = now - (now % windowSeconds);
    if (++this.hits % 1000 === 0) {
      await this.db.execute(sql`delete from iam.rate_windows where window_start < ${now - 86_400}`);
    }
    const result = await this.db.execute(sql`
      insert into iam.rate_windows (key, window_start, count) values (${key}, ${windowStart}, ${add})
      on conflict (key, window_start) do update set count = iam.rate_windows.count + ${add}
      returning count`);
    return Number(rowsOf<{ count: number }>(result)[0]?.count ?? 0);
  }
}
