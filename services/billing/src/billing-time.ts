import { eq, sql } from "drizzle-orm";
import type { Clock } from "@core/kit";
import type { Db } from "@core/storage";
import { clockOffset } from "./db/schema.js";

/** How long a replica trusts the offset it read: another replica's advance shows within this. */
const OFFSET_CACHE_MS = 1_000;

/**
 * Billing time (DESIGN §6.3): the injected clock plus the test clock's offset. The offset lives in the
 * database, so every replica shares it; without `CORE_BILLING_TEST_CLOCK=1` it is always 0 and never
 * read. Billing time keeps flowing with the wall clock: an advance moves it, it does not freeze it.
 */
export class BillingTime {
  private cached: { offsetSeconds: number; readAt: number } | null = null;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    readonly testClock: boolean,
  ) {}

  /** Now, in billing time. */
  async now(): Promise<Date> {
    const offset = await this.offsetSeconds();
    return new Date(this.clock.now().getTime() + offset * 1000);
  }

  async offsetSeconds(): Promise<number> {
    if (!this.testClock) return 0;
    const wall = this.clock.now().getTime();
    if (this.cached && wall - this.cached.readAt < OFFSET_CACHE_MS) return this.cached.offsetSeconds;
    const [row] = await this.db.select({ offsetSeconds: clockOffset.offsetSeconds }).from(clockOffset).where(eq(clockOffset.id, 1));
    this.cached = { offsetSeconds: row?.offsetSeconds ?? 0, readAt: wall };
    return this.cached.offsetSeconds;
  }

  /** Moves billing time forward by `seconds` (never back) for every replica; answers the new offset. */
  async advance(seconds: number): Promise<number> {
    const [row] = await this.db
      .insert(clockOffset)
      .values({ id: 1, offsetSeconds: seconds, updatedAt: this.clock.now() })
      .onConflictDoUpdate({ target: clockOffset.id, set: { offsetSeconds: sql`${clockOffset.offsetSeconds} + ${seconds}`, updatedAt: this.clock.now() } })
      .returning({ offsetSeconds: clockOffset.offsetSeconds });
    this.cached = { offsetSeconds: row!.offsetSeconds, readAt: this.clock.now().getTime() };
    return row!.offsetSeconds;
  }

  /** The wall clock, for what must not follow the test clock (lease expiry, signatures). */
  wallNow(): Date {
    return this.clock.now();
  }
}
