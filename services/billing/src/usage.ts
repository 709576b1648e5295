import { and, asc, eq, gt, sql, type SQL } from "drizzle-orm";
import { unixSeconds } from "@core/kit";
import { rowsOf, type Db } from "@core/storage";
import { usageAlerts, usageDaily, usageDays, usageEntities, usageTotals, type SubscriptionRow } from "./db/schema.js";
import { pgTime } from "./metering/events.js";
import { decimalString, lineAmountCents, overageOf } from "./money.js";
import { METERS, type Catalogue, type Plan, type Tier } from "./plans.js";

/**
 * Usage as the read routes of spec §4.4 table A answer it (DESIGN §6.5): always from the rollups
 * (period totals, daily rows), never from raw events, so a read costs the same at ten events or ten
 * million. Quantities are decimal strings summed exactly by the database (`numeric`), never floats.
 */

export const DAY_MS = 86_400_000;

/** The meters a plan prices, in the catalogue's order. */
export const metersOf = (plan: Plan) => METERS.filter((m) => Object.hasOwn(plan.included, m));

const zero = "0";
const sumOf = sql<string>`coalesce(sum(${usageDaily.quantity}), 0)::text`;
const ofTenant = (tenantId: string | undefined): SQL | undefined => (tenantId === undefined ? undefined : eq(usageDaily.tenantId, tenantId));

/** A UTC day as the routes write it (`2026-02-14`). */
export const dayOf = (d: Date) => d.toISOString().slice(0, 10);

/**
 * `usage/current` (DESIGN §6.5): each meter of the plan in force, its quantity this period, what the
 * plan includes, the overage beyond it and what the overage would cost at the plan's unit price.
 */
export async function currentUsage(db: Db, catalogue: Catalogue, subscription: SubscriptionRow, tenantId: string | undefined) {
  const plan = catalogue.plan(subscription.tier as Tier);
  const ofPeriod = (table: typeof usageTotals | typeof usageDaily) => and(eq(table.platformId, subscription.platformId), eq(table.periodStart, subscription.currentPeriodStart));
  // the period's totals are three rows; one tenant's usage is the sum of its daily rows
  const rows =
    tenantId === undefined
      ? await db.select({ meter: usageTotals.meter, quantity: sql<string>`${usageTotals.quantity}::text` }).from(usageTotals).where(ofPeriod(usageTotals))
      : await db.select({ meter: usageDaily.meter, quantity: sumOf }).from(usageDaily).where(and(ofPeriod(usageDaily), ofTenant(tenantId))).groupBy(usageDaily.meter);
  const used = new Map(rows.map((r) => [r.meter, r.quantity]));
  let estimatedOverageCents = 0;
  const meters = metersOf(plan).map((meter) => {
    const quantity = decimalString(used.get(meter) ?? zero);
    const included = decimalString(plan.included[meter]!);
    const beyond = overageOf(quantity, included);
    const overageCents = lineAmountCents(beyond, plan.overageUnitCents[meter] ?? zero);
    estimatedOverageCents += overageCents;
    return { meter, quantity, included, overage: beyond, overageCents };
  });
  return {
    platformId: subscription.platformId,
    tenantId: tenantId ?? null,
    periodStart: unixSeconds(subscription.currentPeriodStart),
    periodEnd: unixSeconds(subscription.currentPeriodEnd),
    meters,
    estimatedOverageCents,
  };
}

/**
 * `usage/daily` (DESIGN §6.5): every UTC day of `from..to` (both included) × every meter of the plan,
 * zeros included. The platform's own days come from `usage_days` (a row per day, meter and period);
 * one tenant's or one stack's from the detailed rows.
 */
export async function dailyUsage(
  db: Db,
  platformId: string,
  meters: readonly string[],
  from: string,
  to: string,
  filter: { tenantId?: string; stackId?: string; periodStart?: Date } = {},
) {
  const detailed = filter.tenantId !== undefined || filter.stackId !== undefined;
  const rows = detailed
    ? await db
        .select({ day: usageDaily.day, meter: usageDaily.meter, quantity: sumOf })
        .from(usageDaily)
        .where(
          and(
            eq(usageDaily.platformId, platformId),
            sql`${usageDaily.day} between ${from} and ${to}`,
            ofTenant(filter.tenantId),
            filter.stackId === undefined ? undefined : eq(usageDaily.stackId, filter.stackId),
            filter.periodStart === undefined ? undefined : eq(usageDaily.periodStart, filter.periodStart),
          ),
        )
        .groupBy(usageDaily.day, usageDaily.meter)
    : await db
        .select({ day: usageDays.day, meter: usageDays.meter, quantity: sql<string>`coalesce(sum(${usageDays.quantity}), 0)::text` })
        .from(usageDays)
        .where(
          and(
            eq(usageDays.platformId, platformId),
            sql`${usageDays.day} between ${from} and ${to}`,
            filter.periodStart === undefined ? undefined : eq(usageDays.periodStart, filter.periodStart),
          ),
        )
        .groupBy(usageDays.day, usageDays.meter);
  const found = new Map(rows.map((r) => [`${r.day}|${r.meter}`, r.quantity]));
  const data: { date: string; meter: string; quantity: string }[] = [];
  for (let t = Date.parse(`${from}T00:00:00Z`); t <= Date.parse(`${to}T00:00:00Z`); t += DAY_MS) {
    const date = dayOf(new Date(t));
    for (const meter of meters) data.push({ date, meter, quantity: decimalString(found.get(`${date}|${meter}`) ?? zero) });
  }
  return data;
}

/** A history position: the period's start, and the meter (newest period first, meters in name order). */
export interface HistoryPosition {
  k: Date;
  id: string;
}

/**
 * `usage/history` (DESIGN §6.5): one row per period before the current one and meter, newest period
 * first, keyset-paged; each period's end comes from the period log.
 */
export async function usageHistory(db: Db, platformId: string, currentPeriodStart: Date, limit: number, after: HistoryPosition | null, tenantId: string | undefined) {
  const source =
    tenantId === undefined
      ? sql`select period_start, meter, quantity from billing.usage_totals where platform_id = ${platformId}`
      : sql`select period_start, meter, sum(quantity) as quantity from billing.usage_daily where platform_id = ${platformId} and tenant_id = ${tenantId} group by period_start, meter`;
  const page = after
    ? sql`and (u.period_start < ${after.k.toISOString()}::timestamptz or (u.period_start = ${after.k.toISOString()}::timestamptz and u.meter > ${after.id}))`
    : sql``;
  const rows = rowsOf<{ period_start: Date | string; period_end: Date | string | null; meter: string; quantity: string }>(
    await db.execute(sql`
      select u.period_start, p.period_end, u.meter, u.quantity::text as quantity
      from (${source}) u join billing.usage_periods p on p.platform_id = ${platformId} and p.period_start = u.period_start
      where u.period_start < ${currentPeriodStart.toISOString()}::timestamptz ${page}
      order by u.period_start desc, u.meter asc
      limit ${limit + 1}`),
  );
  return rows.map((r) => ({
    periodStart: pgTime(r.period_start),
    periodEnd: r.period_end === null ? currentPeriodStart : pgTime(r.period_end),
    meter: r.meter,
    quantity: decimalString(r.quantity),
  }));
}

/** `usage/entities` (DESIGN §6.5): the tenants with usage, by id, keyset-paged. */
export async function usageTenants(db: Db, platformId: string, limit: number, after: string | null) {
  return db
    .select()
    .from(usageEntities)
    .where(and(eq(usageEntities.platformId, platformId), after === null ? undefined : gt(usageEntities.tenantId, after)))
    .orderBy(asc(usageEntities.tenantId))
    .limit(limit + 1);
}

/** The quantities of this period per stack and meter: `usage-summary` and the per-stack route. */
export async function stackUsage(db: Db, subscription: SubscriptionRow, stackId?: string) {
  const rows = await db
    .select({ stackId: usageDaily.stackId, meter: usageDaily.meter, quantity: sumOf })
    .from(usageDaily)
    .where(
      and(
        eq(usageDaily.platformId, subscription.platformId),
        eq(usageDaily.periodStart, subscription.currentPeriodStart),
        stackId === undefined ? undefined : eq(usageDaily.stackId, stackId),
      ),
    )
    .groupBy(usageDaily.stackId, usageDaily.meter)
    .orderBy(asc(usageDaily.stackId), asc(usageDaily.meter));
  return rows.map((r) => ({ ...r, quantity: decimalString(r.quantity) }));
}

/** `usage/alerts` (DESIGN §6.5): the thresholds crossed in the current period. */
export async function currentAlerts(db: Db, subscription: SubscriptionRow) {
  const rows = await db
    .select()
    .from(usageAlerts)
    .where(and(eq(usageAlerts.platformId, subscription.platformId), eq(usageAlerts.periodStart, subscription.currentPeriodStart)))
    .orderBy(asc(usageAlerts.triggeredAt), asc(usageAlerts.thresholdPercent), asc(usageAlerts.meter), asc(usageAlerts.id));
  return rows.map((r) => ({
    id: r.id,
    meter: r.meter,
    thresholdPercent: r.thresholdPercent,
    quantity: decimalString(r.quantity),
    included: decimalString(r.included),
    triggeredAt: unixSeconds(r.triggeredAt),
  }));
}
