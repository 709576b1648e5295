import { sql } from "drizzle-orm";
import { resourceNotFound, unixSeconds } from "@core/kit";
import { rowsOf, type Db } from "@core/storage";
import type { Engine } from "../engine.js";
import { METERS, type Tier } from "../plans.js";
import { currentSubscription, toSecond } from "../subscriptions.js";
import { overageLines } from "./close.js";
import { canonical, pgTime, UsageDecimal } from "./events.js";

export interface ReconcileMeter {
  meter: string;
  /** the raw events' sum, with what retention pruned of them */
  events: string;
  /** the daily rollups' sum */
  rollups: string;
  /** what the close counted and invoiced from; null while the period is open */
  invoiced: string | null;
}

const same = (a: string, b: string) => new UsageDecimal(a).eq(b);

/**
 * `GET /operator/usage/reconcile` (DESIGN §6.5): recounts a period's raw events and compares them with
 * the rollups, the period totals and, once the period is closed, what it was invoiced from and the
 * overage lines of its invoice. `consistent` is true only when every one of them agrees: nothing lost,
 * nothing counted twice. The period defaults to the platform's current one.
 */
export async function reconcileUsage(engine: Engine, platformId: string, periodStartSeconds: number | undefined) {
  const now = toSecond(await engine.time.now());
  const start = periodStartSeconds === undefined ? (await currentSubscription(engine.db, engine.catalogue, platformId, now)).currentPeriodStart : new Date(periodStartSeconds * 1000);
  // one snapshot for every count: a batch committing between two of them must not look like a loss
  return engine.db.transaction((tx) => recount(engine, tx, platformId, start), { isolationLevel: "repeatable read", accessMode: "read only" });
}

async function recount(engine: Engine, db: Db, platformId: string, start: Date) {
  const at = start.toISOString();
  const [period] = rowsOf<{ period_end: Date | string | null; status: "open" | "closed"; tier: string; invoice_id: string | null; closed_totals: Record<string, string> | string | null }>(
    await db.execute(sql`
      select period_end, status, tier, invoice_id, closed_totals from billing.usage_periods
      where platform_id = ${platformId} and period_start = ${at}::timestamptz`),
  );
  if (!period) throw resourceNotFound("billing period", "no period of this platform starts at periodStart");

  const sums = async (query: ReturnType<typeof sql>) => {
    const found = new Map<string, string>();
    for (const row of rowsOf<{ meter: string; quantity: string }>(await db.execute(query))) {
      found.set(row.meter, new UsageDecimal(found.get(row.meter) ?? "0").plus(row.quantity).toFixed());
    }
    return found;
  };
  const where = sql`platform_id = ${platformId} and period_start = ${at}::timestamptz`;
  const events = await sums(sql`
    select meter, sum(quantity)::text as quantity from billing.usage_events where ${where} group by meter
    union all select meter, quantity::text from billing.usage_pruned where ${where}`);
  const rollups = await sums(sql`select meter, sum(quantity)::text as quantity from billing.usage_daily where ${where} group by meter`);
  const totals = await sums(sql`select meter, quantity::text as quantity from billing.usage_totals where ${where}`);
  const days = await sums(sql`select meter, sum(quantity)::text as quantity from billing.usage_days where ${where} group by meter`);
  const closedTotals = typeof period.closed_totals === "string" ? (JSON.parse(period.closed_totals) as Record<string, string>) : period.closed_totals;
  const closed = period.status === "closed";

  const plan = engine.catalogue.plan(period.tier as Tier);
  const names = new Set<string>([...Object.keys(plan.included), ...events.keys(), ...rollups.keys(), ...totals.keys()]);
  const order = (m: string) => (METERS as readonly string[]).indexOf(m);
  const meters: ReconcileMeter[] = [...names]
    .sort((a, b) => order(a) - order(b) || (a < b ? -1 : 1))
    .map((meter) => ({
      meter,
      events: canonical(events.get(meter) ?? "0"),
      rollups: canonical(rollups.get(meter) ?? "0"),
      invoiced: closed ? canonical(closedTotals?.[meter] ?? "0") : null,
    }));
  // the daily rows, the per-day platform rows and the totals are three sums of the same events
  let consistent = meters.every(
    (m) => same(m.events, m.rollups) && same(m.rollups, totals.get(m.meter) ?? "0") && same(m.rollups, days.get(m.meter) ?? "0") && (m.invoiced === null || same(m.invoiced, m.events)),
  );

  // the invoice's usage lines are the overage of what the close counted, line for line
  if (closed && period.invoice_id && period.period_end !== null) {
    const expected = overageLines(plan, closedTotals ?? {}, start, pgTime(period.period_end));
    const lines = rowsOf<{ meter: string | null; quantity: string | null; amount_cents: string | number }>(
      await db.execute(sql`select meter, quantity::text as quantity, amount_cents from billing.invoice_lines where invoice_id = ${period.invoice_id} and kind = 'usage' order by position`),
    );
    const matches =
      lines.length === expected.length &&
      expected.every((line, i) => lines[i]!.meter === line.meter && same(lines[i]!.quantity ?? "0", line.quantity!) && Number(lines[i]!.amount_cents) === line.amountCents);
    consistent &&= matches;
  }

  return {
    platformId,
    periodStart: unixSeconds(start),
    periodEnd: period.period_end === null ? null : unixSeconds(pgTime(period.period_end)),
    status: period.status,
    invoiceId: period.invoice_id,
    consistent,
    meters,
  };
}
