import { and, eq, inArray, sql } from "drizzle-orm";
import { newId, type TraceSource } from "@core/kit";
import { rowsOf, type Db } from "@core/storage";
import type { PlatformDirectory } from "../access.js";
import { subscriptions as subscriptionsTable, type SubscriptionRow } from "../db/schema.js";
import type { Engine } from "../engine.js";
import { METERS, type Tier } from "../plans.js";
import { currentSubscription } from "../subscriptions.js";
import { canonical, isRejection, parseEvent, pgTime, sameContent, UsageDecimal, type Rejection, type UsageEvent } from "./events.js";
import { mailUsageAlerts } from "./alerts.js";

/**
 * Usage ingestion (DESIGN §6.5, ADR 0015): each event of a batch is accepted, a duplicate or
 * rejected with its own code, exactly once per (platform, id). The accepted events, their rollups,
 * the period totals, the tenants seen and the alerts they cross are written in one transaction: a crash
 * before the commit keeps nothing, after it everything, and the client's retry of an unanswered
 * batch gets `duplicate` for what was kept. Rows are written in sorted key order, so batches that
 * overlap wait for each other and never deadlock.
 */

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;
/** How far ahead of billing time a timestamp may be (a reporter's clock running fast). */
export const AHEAD_MS = 5 * MINUTE_MS;
/** How old an event may be. */
export const BEHIND_MS = 35 * DAY_MS;
/** How long an id is remembered after its event's timestamp: past the window, so a retry is never counted twice. */
export const REMEMBER_MS = BEHIND_MS + AHEAD_MS;
/** The thresholds of a meter's included quantity that raise an alert. */
export const ALERT_PERCENTS = [80, 100] as const;

export type EventStatus = "accepted" | "duplicate" | "rejected";

export interface EventResult {
  index: number;
  id: string | null;
  status: EventStatus;
  code?: string;
  message?: string;
}

export interface IngestAnswer {
  accepted: number;
  duplicates: number;
  rejected: number;
  results: EventResult[];
}

/** The usage period an event is counted in: its platform and start. */
interface PeriodRef {
  platformId: string;
  start: Date;
}

/** A period of the log, as attribution reads it. */
interface LoggedPeriod {
  start: Date;
  end: Date | null;
  status: "open" | "closed";
}

interface PeriodRow {
  platform_id: string;
  period_start: Date | string;
  period_end: Date | string | null;
  tier: string;
  status: "open" | "closed";
}

const key = (...parts: (string | number)[]) => parts.join("\u0000");
const periodKey = (p: PeriodRef) => key(p.platformId, p.start.getTime());
const iso = (d: Date) => d.toISOString();
/** a JS array as one SQL parameter (unnest's input) */
const array = (values: unknown[]) => sql.param(values);

export interface IngestDeps {
  engine: Engine;
  platforms: PlatformDirectory;
  graceSeconds: number;
  /** the request's trace, which the registry lookups join (DESIGN §10) */
  trace?: TraceSource;
}

/** Ingests one batch (1-1000 events, already bounded by the route) and answers each event's fate. */
export async function ingestBatch(deps: IngestDeps, raw: unknown[]): Promise<IngestAnswer & { alerts: number }> {
  const { engine } = deps;
  const now = await engine.time.now();
  const results = new Map<number, EventResult>();
  const reject = (r: Rejection) => results.set(r.index, { index: r.index, id: r.id, status: "rejected", code: r.code, message: r.message });

  // 1. each event on its own
  const parsed: UsageEvent[] = [];
  for (const [index, item] of raw.entries()) {
    const event = parseEvent(item, index);
    if (isRejection(event)) reject(event);
    else parsed.push(event);
  }

  // 2. what cannot be counted whatever is stored: unknown meters and platforms
  const known = new Set<string>(METERS);
  const platformIds = [...new Set(parsed.map((e) => e.platformId))].sort();
  const exists = await platformsKnown(deps.platforms, platformIds, deps.trace);
  const candidates: UsageEvent[] = [];
  for (const event of parsed) {
    if (!known.has(event.meter)) reject({ index: event.index, id: event.id, code: "UNKNOWN_METER", message: `No meter "${event.meter.slice(0, 64)}": the meters are ${METERS.join(", ")}` });
    else if (!exists.get(event.platformId)) reject({ index: event.index, id: event.id, code: "UNKNOWN_PLATFORM", message: `No platform ${event.platformId}` });
    else candidates.push(event);
  }

  // 3. the period of each event; events too old, too far ahead or of a closed period are set aside,
  // to be answered `duplicate` if they were counted before, else rejected. Of the countable reports
  // of one id, the first is written; the later ones are answered against what is stored after it.
  const subscriptions = await currentSubscriptions(engine, [...new Set(candidates.map((e) => e.platformId))], now);
  const pastPeriods = await periodLog(engine.db, candidates, subscriptions, now);
  const graceMs = deps.graceSeconds * 1000;
  const counted: { event: UsageEvent; period: PeriodRef }[] = [];
  const repeats: UsageEvent[] = [];
  const written = new Map<string, UsageEvent>();
  const heldBack = new Map<UsageEvent, Rejection>();
  for (const event of candidates) {
    const t = event.occurredAt.getTime();
    if (t > now.getTime() + AHEAD_MS || t < now.getTime() - BEHIND_MS) {
      heldBack.set(event, { index: event.index, id: event.id, code: "OUT_OF_WINDOW", message: "The timestamp is more than 5 minutes ahead or more than 35 days old" });
      continue;
    }
    const placed = placeEvent(event, subscriptions.get(event.platformId)!, pastPeriods.get(event.platformId) ?? [], now, graceMs);
    if ("closed" in placed) heldBack.set(event, closedPeriod(event, placed.closed));
    else if (written.has(key(event.platformId, event.id))) repeats.push(event);
    else {
      written.set(key(event.platformId, event.id), event);
      counted.push({ event, ...placed });
    }
  }

  const answer = await engine.db.transaction(async (tx) => {
    // 4. the periods counted into, held FOR SHARE until the commit: a period's close waits for this
    // batch, and a batch that comes after the close sees it closed
    const periods = await holdPeriods(tx, counted, subscriptions);
    const open: typeof counted = [];
    for (const item of counted) {
      const period = periods.get(periodKey(item.period))!;
      const end = period.period_end === null ? null : pgTime(period.period_end);
      if (period.status === "closed" || (end !== null && end.getTime() + graceMs <= now.getTime())) heldBack.set(item.event, closedPeriod(item.event, end ?? item.period.start));
      else open.push(item);
    }

    // 5. the events, first write wins, and what the written ones add up to, in one statement; what
    // was not written is a duplicate or a reused id
    const { written: inserted, totals } = await countEvents(tx, open, now);
    const notWritten = open.filter((item) => !inserted.has(key(item.event.platformId, item.event.id))).map((item) => item.event);
    const unwritten = new Set(notWritten);
    for (const item of open) if (!unwritten.has(item.event)) results.set(item.event.index, { index: item.event.index, id: item.event.id, status: "accepted" });
    const stored = await storedEvents(tx, [...notWritten, ...heldBack.keys(), ...repeats]);
    for (const event of notWritten) {
      const before = stored.get(key(event.platformId, event.id));
      if (before && !sameContent(before, event)) reject({ index: event.index, id: event.id, code: "ID_REUSED", message: `Event ${event.id} was counted before with other content; a new event needs a new id` });
      // the same event, or one written by a batch that committed first and pruned since: it was counted
      else results.set(event.index, { index: event.index, id: event.id, status: "duplicate" });
    }
    // an event that cannot count any more is a duplicate if it did count; otherwise it is told why not
    for (const [event, why] of heldBack) {
      const before = stored.get(key(event.platformId, event.id));
      if (before && sameContent(before, event)) results.set(event.index, { index: event.index, id: event.id, status: "duplicate" });
      else reject(why);
    }

    // 6. a later report of an id in this batch: against what is stored now, this batch's first report included
    for (const event of repeats) {
      const before = stored.get(key(event.platformId, event.id));
      const first = written.get(key(event.platformId, event.id))!;
      if (before && sameContent(before, event)) results.set(event.index, { index: event.index, id: event.id, status: "duplicate" });
      else if (before) reject({ index: event.index, id: event.id, code: "ID_REUSED", message: `Event ${event.id} was counted with other content (earlier in this batch or before); a new event needs a new id` });
      // nothing stored: the first report was refused (its period closed meanwhile), and so is this one
      else results.set(event.index, { ...results.get(first.index)!, index: event.index });
    }

    // 7. the thresholds the new totals crossed
    return raiseAlerts(tx, engine, totals, periods, now);
  });

  const ordered = [...results.values()].sort((a, b) => a.index - b.index);
  const counts = {
    accepted: ordered.filter((r) => r.status === "accepted").length,
    duplicates: ordered.filter((r) => r.status === "duplicate").length,
    rejected: ordered.filter((r) => r.status === "rejected").length,
  };
  // counted once the batch is committed, by the one path every batch takes (DESIGN §10)
  engine.metrics.usageBatch(counts);
  return { ...counts, results: ordered, alerts: answer };
}

/** How many platforms a batch asks the registry about at once (a batch may name up to 1000). */
const REGISTRY_LOOKUPS = 16;

/** Which of these platforms exist, asking the registry (cached) a few at a time. */
export async function platformsKnown(platforms: PlatformDirectory, ids: string[], from?: TraceSource): Promise<Map<string, boolean>> {
  const known = new Map<string, boolean>();
  for (let i = 0; i < ids.length; i += REGISTRY_LOOKUPS) {
    const chunk = ids.slice(i, i + REGISTRY_LOOKUPS);
    const answers = await Promise.all(chunk.map((id) => platforms.exists(id, from)));
    chunk.forEach((id, j) => known.set(id, answers[j]!));
  }
  return known;
}

const closedPeriod = (event: UsageEvent, end: Date): Rejection => ({
  index: event.index,
  id: event.id,
  code: "PERIOD_CLOSED",
  message: `The billing period that ended ${iso(end)} is closed: its usage is final and, beyond what the plan includes, invoiced`,
});

/** The current subscription of each platform, made on free for a platform billing has not seen yet. */
async function currentSubscriptions(engine: Engine, platformIds: string[], now: Date): Promise<Map<string, SubscriptionRow>> {
  const found = new Map<string, SubscriptionRow>();
  if (platformIds.length === 0) return found;
  const rows = await engine.db.select().from(subscriptionsTable).where(and(eq(subscriptionsTable.current, true), inArray(subscriptionsTable.platformId, platformIds)));
  for (const row of rows) found.set(row.platformId, row);
  for (const platformId of platformIds) {
    if (!found.has(platformId)) found.set(platformId, await currentSubscription(engine.db, engine.catalogue, platformId, now));
  }
  return found;
}

/**
 * The periods before the current one that an event of this batch may fall in: those that ended
 * inside the window. Only read when an event is stamped before its platform's current period.
 */
async function periodLog(db: Db, events: UsageEvent[], subscriptions: Map<string, SubscriptionRow>, now: Date): Promise<Map<string, LoggedPeriod[]>> {
  const late = [...new Set(events.filter((e) => e.occurredAt < subscriptions.get(e.platformId)!.currentPeriodStart).map((e) => e.platformId))];
  const log = new Map<string, LoggedPeriod[]>();
  if (late.length === 0) return log;
  const rows = rowsOf<PeriodRow>(
    await db.execute(sql`
      select platform_id, period_start, period_end, tier, status from billing.usage_periods
      where platform_id = any(${array(late)}::text[]) and (period_end is null or period_end > ${iso(new Date(now.getTime() - BEHIND_MS - DAY_MS))}::timestamptz)
      order by platform_id, period_start`),
  );
  for (const row of rows) {
    const period = { start: pgTime(row.period_start), end: row.period_end === null ? null : pgTime(row.period_end), status: row.status };
    log.set(row.platform_id, [...(log.get(row.platform_id) ?? []), period]);
  }
  return log;
}

/**
 * The period an event is counted in (DESIGN §6.5). A platform's periods follow one another without
 * gaps. An event stamped ahead of billing time counts as arriving now; one stamped after its
 * platform's current period ended, before the renewal ran, counts in the next period, which starts
 * exactly there; one stamped before the current period, in the period that held its timestamp if its
 * grace has not ended; one stamped before the platform's first period, in the first period.
 */
function placeEvent(event: UsageEvent, subscription: SubscriptionRow, log: LoggedPeriod[], now: Date, graceMs: number): { period: PeriodRef } | { closed: Date } {
  const at = Math.min(event.occurredAt.getTime(), now.getTime());
  const platformId = event.platformId;
  if (at >= subscription.currentPeriodStart.getTime()) {
    const start = at < subscription.currentPeriodEnd.getTime() ? subscription.currentPeriodStart : subscription.currentPeriodEnd;
    return { period: { platformId, start } };
  }
  let holder: LoggedPeriod | undefined;
  for (const period of log) if (period.start.getTime() <= at) holder = period;
  holder ??= log[0];
  if (!holder) return { period: { platformId, start: subscription.currentPeriodStart } };
  const end = holder.end ?? subscription.currentPeriodStart;
  if (holder.status === "closed" || end.getTime() + graceMs <= now.getTime()) return { closed: end };
  return { period: { platformId, start: holder.start } };
}

/**
 * Makes sure each period counted into has its row (the database's period log normally made it
 * already; a period that begins where the current one ends has none until its renewal), then holds
 * them FOR SHARE in key order and answers what they say.
 */
async function holdPeriods(tx: Db, counted: { period: PeriodRef }[], subscriptions: Map<string, SubscriptionRow>): Promise<Map<string, PeriodRow>> {
  const refs = new Map<string, PeriodRef>();
  for (const item of counted) refs.set(periodKey(item.period), item.period);
  const held = new Map<string, PeriodRow>();
  if (refs.size === 0) return held;
  const sorted = [...refs.values()].sort((a, b) => (a.platformId === b.platformId ? a.start.getTime() - b.start.getTime() : a.platformId < b.platformId ? -1 : 1));
  const platforms = sorted.map((p) => p.platformId);
  const starts = sorted.map((p) => iso(p.start));
  const read = async () =>
    rowsOf<PeriodRow>(
      await tx.execute(sql`
        select p.platform_id, p.period_start, p.period_end, p.tier, p.status
        from billing.usage_periods p join unnest(${array(platforms)}::text[], ${array(starts)}::timestamptz[]) as k(platform_id, period_start)
          on p.platform_id = k.platform_id and p.period_start = k.period_start
        order by p.platform_id, p.period_start
        for share of p`),
    );
  let rows = await read();
  if (rows.length < sorted.length) {
    const have = new Set(rows.map((r) => key(r.platform_id, pgTime(r.period_start).getTime())));
    const missing = sorted.filter((p) => !have.has(periodKey(p)));
    const tiers = missing.map((p) => {
      const s = subscriptions.get(p.platformId)!;
      return p.start >= s.currentPeriodEnd ? (s.pendingTier ?? s.tier) : s.tier;
    });
    await tx.execute(sql`
      insert into billing.usage_periods (platform_id, period_start, period_end, subscription_id, customer_id, tier)
      select k.platform_id, k.period_start, null, k.subscription_id, k.customer_id, k.tier
      from unnest(${array(missing.map((p) => p.platformId))}::text[], ${array(missing.map((p) => iso(p.start)))}::timestamptz[],
                  ${array(missing.map((p) => subscriptions.get(p.platformId)!.id))}::text[], ${array(missing.map((p) => subscriptions.get(p.platformId)!.customerId))}::text[],
                  ${array(tiers)}::text[]) as k(platform_id, period_start, subscription_id, customer_id, tier)
      order by k.platform_id, k.period_start
      on conflict do nothing`);
    rows = await read();
  }
  for (const row of rows) held.set(key(row.platform_id, pgTime(row.period_start).getTime()), row);
  return held;
}

/** A period's new total of one meter, and what this batch added to it. */
interface TotalRow {
  platform_id: string;
  period_start: Date | string;
  meter: string;
  quantity: string;
  added: string;
}

const ms = (d: Date) => d.getTime();
// epoch milliseconds to timestamptz, exactly (interval arithmetic is in whole microseconds)
const fromMs = (column: string) => sql.raw(`(timestamptz 'epoch' + ${column} * interval '1 millisecond')`);

/**
 * Writes the events — the first write of each (platform, id) wins — and, from exactly the rows that
 * were written (`RETURNING`), the daily rollups (per tenant and stack, and per platform), the tenants
 * seen and the period totals, one
 * statement and one round trip for the batch. PostgreSQL sums the decimals; every insert takes its
 * rows in key order. Answers the keys written and each touched total with what this batch added.
 */
async function countEvents(tx: Db, items: { event: UsageEvent; period: PeriodRef }[], now: Date): Promise<{ written: Set<string>; totals: TotalRow[] }> {
  if (items.length === 0) return { written: new Set(), totals: [] };
  const e = items.map((i) => i.event);
  const rows = rowsOf<{ kind: "event" | "total"; platform_id: string; id: string | null; period_start: Date | string | null; meter: string | null; quantity: string | null; added: string | null }>(
    await tx.execute(sql`
      with input as (
        select u.platform_id, u.id, u.tenant_id, u.stack_id, u.meter, u.quantity, ${fromMs("u.occurred_ms")} as occurred_at, ${fromMs("u.period_ms")} as period_start
        from unnest(${array(e.map((x) => x.platformId))}::text[], ${array(e.map((x) => x.id))}::text[], ${array(e.map((x) => x.tenantId))}::text[],
                    ${array(e.map((x) => x.stackId))}::text[], ${array(e.map((x) => x.meter))}::text[], ${array(e.map((x) => x.quantity))}::numeric[],
                    ${array(e.map((x) => ms(x.occurredAt)))}::bigint[], ${array(items.map((i) => ms(i.period.start)))}::bigint[])
          as u(platform_id, id, tenant_id, stack_id, meter, quantity, occurred_ms, period_ms)
      ), written as (
        insert into billing.usage_events (platform_id, id, tenant_id, stack_id, meter, quantity, occurred_at, period_start, received_at)
        select platform_id, id, tenant_id, stack_id, meter, quantity, occurred_at, period_start, ${fromMs(String(ms(now)))} from input
        order by platform_id, id
        on conflict (platform_id, id) do nothing
        returning platform_id, id, tenant_id, stack_id, meter, quantity, occurred_at, period_start,
          -- the day it counts on: its time, no later than now and no earlier than its period's start
          (greatest(least(occurred_at, ${fromMs(String(ms(now)))}), period_start) at time zone 'UTC')::date as day
      ), daily as (
        insert into billing.usage_daily (platform_id, period_start, tenant_id, stack_id, meter, day, quantity)
        select platform_id, period_start, tenant_id, stack_id, meter, day, sum(quantity) from written
        group by 1, 2, 3, 4, 5, 6 order by 1, 2, 3, 4, 5, 6
        on conflict (platform_id, period_start, tenant_id, stack_id, meter, day) do update set quantity = billing.usage_daily.quantity + excluded.quantity
      ), days as (
        insert into billing.usage_days (platform_id, day, meter, period_start, quantity)
        select platform_id, day, meter, period_start, sum(quantity) from written
        group by 1, 2, 3, 4 order by 1, 2, 3, 4
        on conflict (platform_id, day, meter, period_start) do update set quantity = billing.usage_days.quantity + excluded.quantity
      ), tenants as (
        insert into billing.usage_entities (platform_id, tenant_id, first_seen_at, last_seen_at)
        select platform_id, tenant_id, min(occurred_at), max(occurred_at) from written where tenant_id <> ''
        group by 1, 2 order by 1, 2
        on conflict (platform_id, tenant_id) do update set
          first_seen_at = least(billing.usage_entities.first_seen_at, excluded.first_seen_at),
          last_seen_at = greatest(billing.usage_entities.last_seen_at, excluded.last_seen_at)
        -- an unchanged tenant is not rewritten: no new row version on every batch
        where excluded.first_seen_at < billing.usage_entities.first_seen_at or excluded.last_seen_at > billing.usage_entities.last_seen_at
      ), added as (
        select platform_id, period_start, meter, sum(quantity) as quantity from written group by 1, 2, 3
      ), totals as (
        insert into billing.usage_totals (platform_id, period_start, meter, quantity)
        select platform_id, period_start, meter, quantity from added order by 1, 2, 3
        on conflict (platform_id, period_start, meter) do update set quantity = billing.usage_totals.quantity + excluded.quantity
        returning platform_id, period_start, meter, quantity
      )
      select 'event' as kind, platform_id, id, null::timestamptz as period_start, null as meter, null as quantity, null as added from written
      union all
      select 'total', t.platform_id, null, t.period_start, t.meter, t.quantity::text, a.quantity::text
      from totals t join added a using (platform_id, period_start, meter)`),
  );
  const written = new Set<string>();
  const totals: TotalRow[] = [];
  for (const row of rows) {
    if (row.kind === "event") written.add(key(row.platform_id, row.id!));
    else totals.push({ platform_id: row.platform_id, period_start: row.period_start!, meter: row.meter!, quantity: row.quantity!, added: row.added! });
  }
  return { written, totals };
}

/** The stored events with these (platform, id) pairs, canonical, to compare a report against. */
async function storedEvents(tx: Db, events: UsageEvent[]): Promise<Map<string, Omit<UsageEvent, "index">>> {
  const found = new Map<string, Omit<UsageEvent, "index">>();
  if (events.length === 0) return found;
  const rows = rowsOf<{ platform_id: string; id: string; tenant_id: string; stack_id: string; meter: string; quantity: string; occurred_at: Date | string }>(
    await tx.execute(sql`
      select e.platform_id, e.id, e.tenant_id, e.stack_id, e.meter, e.quantity::text as quantity, e.occurred_at
      from billing.usage_events e join unnest(${array(events.map((x) => x.platformId))}::text[], ${array(events.map((x) => x.id))}::text[]) as k(platform_id, id)
        on e.platform_id = k.platform_id and e.id = k.id`),
  );
  for (const r of rows) {
    found.set(key(r.platform_id, r.id), {
      platformId: r.platform_id,
      id: r.id,
      tenantId: r.tenant_id,
      stackId: r.stack_id,
      meter: r.meter,
      quantity: canonical(r.quantity),
      occurredAt: pgTime(r.occurred_at),
    });
  }
  return found;
}

/**
 * The alerts a batch raises (DESIGN §6.5): a threshold (80 %, 100 % of what the period's plan
 * includes) is crossed by the batch whose totals went from below it to at or above it. The totals
 * come from the batch's own upsert, which waited for any batch before it on the same row, so
 * concurrent batches see each other's sums and exactly one crosses. Answers how many were raised.
 */
async function raiseAlerts(tx: Db, engine: Engine, totals: TotalRow[], periods: Map<string, PeriodRow>, now: Date): Promise<number> {
  const crossed: { platformId: string; periodStart: Date; meter: string; percent: number; quantity: string; included: string }[] = [];
  for (const row of totals) {
    const periodStart = pgTime(row.period_start);
    const period = periods.get(key(row.platform_id, periodStart.getTime()))!;
    const included = engine.catalogue.plan(period.tier as Tier).included[row.meter as (typeof METERS)[number]];
    if (!included || new UsageDecimal(included).isZero()) continue;
    const total = new UsageDecimal(row.quantity);
    const before = total.minus(row.added);
    for (const percent of ALERT_PERCENTS) {
      const threshold = new UsageDecimal(included).times(percent).dividedBy(100);
      if (before.lt(threshold) && total.gte(threshold)) crossed.push({ platformId: row.platform_id, periodStart, meter: row.meter, percent, quantity: total.toFixed(), included: canonical(included) });
    }
  }
  if (crossed.length === 0) return 0;
  crossed.sort((a, b) => (key(a.platformId, a.periodStart.getTime(), a.meter, a.percent) < key(b.platformId, b.periodStart.getTime(), b.meter, b.percent) ? -1 : 1));
  const raised = rowsOf<{ id: string; platform_id: string; meter: string; threshold_percent: number; quantity: string; included: string }>(
    await tx.execute(sql`
      insert into billing.usage_alerts (id, platform_id, meter, period_start, threshold_percent, quantity, included, triggered_at)
      select * from unnest(${array(crossed.map(() => newId("ual")))}::text[], ${array(crossed.map((c) => c.platformId))}::text[], ${array(crossed.map((c) => c.meter))}::text[],
                           ${array(crossed.map((c) => iso(c.periodStart)))}::timestamptz[], ${array(crossed.map((c) => c.percent))}::int[], ${array(crossed.map((c) => c.quantity))}::numeric[],
                           ${array(crossed.map((c) => c.included))}::numeric[], ${array(crossed.map(() => iso(now)))}::timestamptz[])
      on conflict (platform_id, meter, period_start, threshold_percent) do nothing
      returning id, platform_id, meter, threshold_percent, quantity::text as quantity, included::text as included`),
  );
  const alerts = raised.map((r) => ({ id: r.id, platformId: r.platform_id, meter: r.meter, thresholdPercent: Number(r.threshold_percent), quantity: canonical(r.quantity), included: canonical(r.included) }));
  await mailUsageAlerts(tx, engine.billingUrl, alerts, engine.time.wallNow());
  return raised.length;
}
