import { sql } from "drizzle-orm";
import { rateLimited } from "@core/kit";
import { rowsOf, type Db } from "@core/storage";
import type { Clock } from "@core/kit";

/**
 * Fixed-window counters in the database, so every replica sees the same count (issue 2: limits
 * hold across replicas). Each count is one statement that checks and counts at once (DESIGN §10:
 * parallel requests cannot all pass a check before any of them is counted); old windows are
 * pruned now and then.
 */
export class RateLimiter {
  private hits = 0;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  /** Counts one hit on `key`; throws 429 with Retry-After once `max` hits fell in this window. */
  async hit(key: string, max: number, windowSeconds: number): Promise<void> {
    const count = await this.add(key, this.windowStart(windowSeconds));
    if (count > max) throw rateLimited(this.secondsLeft(windowSeconds));
  }

  /** Throws 429 when `key` already reached `max` in this window, without counting (a read). */
  async check(key: string, max: number, windowSeconds: number): Promise<void> {
    const result = await this.db.execute(sql`
      select count from iam.rate_windows where key = ${key} and window_start = ${this.windowStart(windowSeconds)}`);
    const count = Number(rowsOf<{ count: number }>(result)[0]?.count ?? 0);
    if (count >= max) throw rateLimited(this.secondsLeft(windowSeconds));
  }

  /**
   * `attempt` under a limit of `max` failures of `key` a window. The attempt takes a slot before it
   * runs, in one statement that counts only while fewer than `max` are taken (else 429), and gives
   * it back when `failed` says it succeeded: however many run at once, at most `max` failures are
   * ever tried in a window. An attempt that throws keeps its slot.
   */
  async limitFailures<T>(key: string, max: number, windowSeconds: number, attempt: () => Promise<T>, failed: (result: T) => boolean): Promise<T> {
    const windowStart = this.windowStart(windowSeconds);
    await this.maybePrune();
    const taken = await this.db.execute(sql`
      insert into iam.rate_windows (key, window_start, count) values (${key}, ${windowStart}, 1)
      on conflict (key, window_start) do update set count = iam.rate_windows.count + 1 where iam.rate_windows.count < ${max}
      returning count`);
    if (rowsOf(taken).length === 0) throw rateLimited(this.secondsLeft(windowSeconds));
    const result = await attempt();
    if (!failed(result)) {
      await this.db.execute(sql`
        update iam.rate_windows set count = count - 1 where key = ${key} and window_start = ${windowStart} and count > 0`);
    }
    return result;
  }

  private windowStart(windowSeconds: number): number {
    const now = Math.floor(this.clock.now().getTime() / 1000);
    return now - (now % windowSeconds);
  }

  private secondsLeft(windowSeconds: number): number {
    const now = this.clock.now().getTime() / 1000;
    return windowSeconds - (now % windowSeconds);
  }

  private async maybePrune(): Promise<void> {
    if (++this.hits % 1000 !== 0) return;
    const now = Math.floor(this.clock.now().getTime() / 1000);
    await this.db.execute(sql`delete from iam.rate_windows where window_start < ${now - 86_400}`);
  }

  private async add(key: string, windowStart: number): Promise<number> {
    await this.maybePrune();
    const result = await this.db.execute(sql`
      insert into iam.rate_windows (key, window_start, count) values (${key}, ${windowStart}, 1)
      on conflict (key, window_start) do update set count = iam.rate_windows.count + 1
      returning count`);
    return Number(rowsOf<{ count: number }>(result)[0]?.count ?? 0);
  }
}
