import { sql } from "drizzle-orm";
import { rowsOf } from "@core/storage";
import { openInvoice } from "../collection.js";
import { usagePeriods } from "../db/schema.js";
import type { Engine } from "../engine.js";
import { priceUnderCustomerLock, type DraftLine } from "../invoicing.js";
import { lineAmountCents, overageOf } from "../money.js";
import { METERS, type Plan, type Tier } from "../plans.js";
import { canonical, pgTime } from "./events.js";

/**
 * Period close (DESIGN §6.5): when a period's grace has ended, its usage is final. Each meter's
 * quantity beyond what the plan in force at the period's end includes is invoiced at the plan's unit
 * price, one line per meter, on one usage invoice that is charged like a renewal (the dunning of
 * DESIGN §6.3 applies). The period row is taken FOR UPDATE first: ingestion holds it FOR SHARE while
 * it counts, so the totals read here are every event the period will ever have.
 */

type Meter = (typeof METERS)[number];

const meterNames: Record<Meter, string> = { api_requests: "API requests", compute_minutes: "Compute minutes", storage_gb_hours: "Storage GB-hours" };
const grouped = (quantity: string) => {
  const [whole, fraction] = quantity.split(".");
  return `${whole!.replace(/\B(?=(\d{3})+(?!\d))/g, ",")}${fraction ? `.${fraction}` : ""}`;
};

/** The overage lines of a period's totals under a plan: meters beyond what is included that cost something. */
export function overageLines(plan: Plan, totals: Record<string, string>, start: Date, end: Date): DraftLine[] {
  const lines: DraftLine[] = [];
  for (const meter of METERS) {
    const included = plan.included[meter];
    const unit = plan.overageUnitCents[meter];
    if (included === undefined || unit === undefined || Number(unit) === 0) continue;
    const used = totals[meter] ?? "0";
    const beyond = overageOf(used, included);
    if (beyond === "0") continue;
    lines.push({
      kind: "usage",
      description: `${meterNames[meter]}: ${grouped(used)} used, ${grouped(canonical(included))} included`,
      meter,
      quantity: beyond,
      unitAmountCents: canonical(unit),
      amountCents: lineAmountCents(beyond, unit),
      periodStart: start,
      periodEnd: end,
    });
  }
  return lines;
}

/**
 * Closes one period at `at` (its end + the grace): its totals are kept with it, and its overage, if it
 * comes to anything, becomes an open usage invoice due at once, which the worker charges next.
 * Closing twice does nothing; answers the invoice, if one was made.
 */
export async function closePeriod(engine: Engine, platformId: string, periodStart: Date, at: Date): Promise<string | null> {
  return engine.db.transaction(async (tx) => {
    const [period] = rowsOf<{ period_end: Date | string | null; status: string; tier: string; customer_id: string | null; subscription_id: string | null }>(
      await tx.execute(sql`
        select period_end, status, tier, customer_id, subscription_id from billing.usage_periods
        where platform_id = ${platformId} and period_start = ${periodStart.toISOString()}::timestamptz for update`),
    );
    if (!period || period.status === "closed" || period.period_end === null) return null;
    const end = pgTime(period.period_end);
    if (end.getTime() + engine.usageGraceSeconds * 1000 > at.getTime()) return null;
    const totalRows = rowsOf<{ meter: string; quantity: string }>(
      await tx.execute(sql`select meter, quantity::text as quantity from billing.usage_totals where platform_id = ${platformId} and period_start = ${periodStart.toISOString()}::timestamptz`),
    );
    const totals: Record<string, string> = {};
    for (const row of totalRows) totals[row.meter] = canonical(row.quantity);
    const plan = engine.catalogue.plan(period.tier as Tier);
    const lines = period.tier === "free" ? [] : overageLines(plan, totals, periodStart, end);
    let invoiceId: string | null = null;
    if (period.customer_id && lines.some((line) => line.amountCents > 0)) {
      const priced = await priceUnderCustomerLock(tx, engine, period.customer_id, lines);
      // due at once: the worker's next item charges it as it charges a renewal, retries included (DESIGN §6.9)
      const invoice = await openInvoice(tx, engine, at, {
        priced,
        platformId,
        subscriptionId: period.subscription_id,
        reason: "usage",
        periodStart,
        periodEnd: end,
        intent: { kind: "renewal" },
        paymentMethodId: priced.customer.defaultPaymentMethodId,
        firstAttempt: "worker",
      });
      invoiceId = invoice.id;
    }
    await tx
      .update(usagePeriods)
      .set({ status: "closed", closedAt: at, invoiceId, closedTotals: totals })
      .where(sql`${usagePeriods.platformId} = ${platformId} and ${usagePeriods.periodStart} = ${periodStart.toISOString()}::timestamptz`);
    return invoiceId;
  });
}
