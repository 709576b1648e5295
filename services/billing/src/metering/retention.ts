import { sql } from "drizzle-orm";
import { rowsOf, type Db } from "@core/storage";
import { REMEMBER_MS } from "./ingest.js";

/** Rows deleted per transaction, and transactions per pass: a pass stays short, the next one goes on. */
const CHUNK = 5_000;
const CHUNKS_PER_PASS = 20;

/**
 * Retention (DESIGN §6.5): an event's id is remembered until its timestamp + 35 days + 5 minutes;
 * after that a re-sent copy is out of the window anyway, so the raw event, which is its own dedupe
 * record, is deleted. Its quantity moves to `usage_pruned` in the same transaction, so `reconcile`
 * still recounts the period. Every replica runs this; `FOR UPDATE SKIP LOCKED` gives two replicas
 * different rows, never the same ones. Answers how many events were pruned.
 */
export async function pruneUsageEvents(db: Db, now: Date): Promise<number> {
  const cutoff = new Date(now.getTime() - REMEMBER_MS).toISOString();
  let pruned = 0;
  for (let chunk = 0; chunk < CHUNKS_PER_PASS; chunk++) {
    const [row] = rowsOf<{ events: string | number | null }>(
      await db.execute(sql`
        with doomed as (
          select ctid from billing.usage_events where occurred_at < ${cutoff}::timestamptz limit ${CHUNK} for update skip locked
        ), gone as (
          delete from billing.usage_events e using doomed where e.ctid = doomed.ctid
          returning e.platform_id, e.period_start, e.meter, e.quantity
        ), tally as (
          insert into billing.usage_pruned (platform_id, period_start, meter, quantity, events)
          select platform_id, period_start, meter, sum(quantity), count(*) from gone
          group by platform_id, period_start, meter order by platform_id, period_start, meter
          on conflict (platform_id, period_start, meter) do update
            set quantity = billing.usage_pruned.quantity + excluded.quantity, events = billing.usage_pruned.events + excluded.events
          returning events
        )
        select (select count(*) from gone) as events`),
    );
    const n = Number(row?.events ?? 0);
    pruned += n;
    if (n < CHUNK) break;
  }
  return pruned;
}
