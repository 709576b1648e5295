import { and, eq, sql } from "drizzle-orm";
import { ApiError, unixSeconds } from "@core/kit";
import { usageTotals } from "./db/schema.js";
import { customerOfPlatform } from "./customers.js";
import type { Engine } from "./engine.js";
import { intentJson, lineJson, priceInvoice, snapshotJson, snapshotOf, subscriptionLine, taxOf, type DraftLine } from "./invoicing.js";
import { overageLines } from "./metering/close.js";
import { canonical } from "./metering/events.js";
import { periodAt, periodOf } from "./periods.js";
import type { Tier } from "./plans.js";
import { currentSubscription, toSecond } from "./subscriptions.js";

/**
 * `GET /invoices/upcoming` (DESIGN §6.9): what the next renewal will charge, in the invoice's shape
 * (`id` and `number` null, `status: "upcoming"`): the next period's base line with a waiting tier and
 * seats applied, the overage of this period's usage so far, tax, the customer's credit, and
 * `nextChargeAt`. Priced as it will be: the renewal (or a trial's end) first, then this period's
 * usage invoice at its close, each with its own tax and the credit left by the one before, so
 * `amountDueCents` is what the card will be charged to the cent if usage stops now. Every "next
 * charge" shown (the portal, `core billing status`) is this. A platform that will not be charged
 * (on free, or ending at its period's end) has none: 404 NO_UPCOMING_INVOICE.
 */
export async function upcomingInvoice(engine: Engine, platformId: string) {
  const now = toSecond(await engine.time.now());
  const subscription = await currentSubscription(engine.db, engine.catalogue, platformId, now);
  const customer = await customerOfPlatform(engine.db, platformId);
  const tier = (subscription.pendingTier ?? subscription.tier) as Tier;
  const quantity = subscription.pendingQuantity ?? subscription.quantity;
  if (!customer || subscription.cancelAtPeriodEnd || (tier === "free" && subscription.tier === "free")) {
    const why = subscription.cancelAtPeriodEnd ? "the subscription ends at its period's end" : "the platform is on free";
    throw new ApiError(404, "NO_UPCOMING_INVOICE", `No invoice is coming: ${why}`);
  }
  const at = subscription.currentPeriodEnd;
  const next = subscription.status === "trialing" ? periodOf(at, 0) : periodAt(subscription.billingAnchor, at);
  const plan = engine.catalogue.plan(tier);
  const baseLines: DraftLine[] = tier === "free" ? [] : [subscriptionLine(plan, quantity, next.start, next.end)];
  const renewal = priceInvoice({ lines: baseLines, tax: taxOf(engine, customer), balanceCents: customer.balanceCents });
  // this period's usage so far, priced by the plan in force at its end (the current one)
  const totals = Object.fromEntries(
    (
      await engine.db
        .select({ meter: usageTotals.meter, quantity: sql<string>`${usageTotals.quantity}::text` })
        .from(usageTotals)
        .where(and(eq(usageTotals.platformId, platformId), eq(usageTotals.periodStart, subscription.currentPeriodStart)))
    ).map((row) => [row.meter, canonical(row.quantity)]),
  );
  const usageLines = subscription.tier === "free" || subscription.status === "trialing" ? [] : overageLines(engine.catalogue.plan(subscription.tier as Tier), totals, subscription.currentPeriodStart, at);
  // the balance as the renewal leaves it: a debit collected, credit applied, an amount under the minimum carried on
  const balanceAfterRenewal = Math.max(customer.balanceCents, 0) - renewal.creditAppliedCents - renewal.carriedForwardCents + renewal.creditedBackCents;
  // a close with nothing to charge makes no invoice (metering/close.ts), and carries nothing on
  const billable = usageLines.some((line) => line.amountCents > 0);
  const usage = priceInvoice({ lines: billable ? usageLines : [], tax: taxOf(engine, customer), balanceCents: billable ? balanceAfterRenewal : 0 });
  const lines = [...renewal.lines, ...usage.lines];
  const sum = (field: "subtotalCents" | "taxBaseCents" | "taxCents" | "totalCents" | "creditAppliedCents" | "amountDueCents" | "chargeCents") => renewal[field] + usage[field];
  return {
    id: null,
    number: null,
    platformId,
    customerId: customer.id,
    status: "upcoming" as const,
    currency: customer.currency,
    subtotalCents: sum("subtotalCents"),
    taxCents: sum("taxCents"),
    creditAppliedCents: sum("creditAppliedCents"),
    totalCents: sum("totalCents"),
    amountDueCents: sum("amountDueCents"),
    amountPaidCents: 0,
    amountRefundedCents: 0,
    amountCreditedCents: 0,
    disputed: false,
    periodStart: unixSeconds(next.start),
    periodEnd: unixSeconds(next.end),
    createdAt: unixSeconds(now),
    finalizedAt: null,
    paidAt: null,
    customerSnapshot: snapshotJson(snapshotOf(customer)),
    seller: engine.tax.seller,
    taxRatePercent: renewal.taxRatePercent,
    taxBaseCents: sum("taxBaseCents"),
    taxTreatment: renewal.taxTreatment,
    attemptCount: 0,
    nextPaymentAttempt: null,
    collection: null,
    // what the renewal (or the trial's end) will make true: the period of this tier and seats
    intent: intentJson({ kind: subscription.status === "trialing" ? "trial_end" : "renewal", tier, planId: plan.id, quantity }),
    nextChargeAt: unixSeconds(at),
    /** what the card will be charged: the amount due less what is under the minimum and carried on */
    chargeCents: sum("chargeCents"),
    lines: lines.map((line) => lineJson(line, null)),
  };
}
