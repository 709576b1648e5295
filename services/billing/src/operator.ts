import { and, eq, sql } from "drizzle-orm";
import { ApiError, badRequest, conflict, newId, type Clock } from "@core/kit";
import { rowsOf, type Db } from "@core/storage";
import { findCustomer } from "./customers.js";
import { invoices, operatorAudit, subscriptions, type SubscriptionRow } from "./db/schema.js";
import type { Engine } from "./engine.js";
import { createDraft, emitInvoiceEvent, finalizeDraft, lockCustomer, markPaid, moveBalance, priceInvoice, type Actor } from "./invoicing.js";
import { parseMajorAmount } from "./money.js";
import { TIERS, type Tier } from "./plans.js";
import { prorate } from "./proration.js";
import { advanceSubscription, returnToFree } from "./renewals.js";
import { lockUnderLease, toSecond, withSubscriptionLease } from "./subscriptions.js";
import { recordTier } from "./tier-sync.js";

const DAY_SECONDS = 86_400;

/** One line of billing's operator audit (DESIGN §6.4): who did what to what, before and after. */
export async function auditOperatorAction(
  db: Db,
  clock: Clock,
  entry: Actor & { action: string; targetType: string; targetId: string; before?: unknown; after?: unknown; requestId: string | null },
): Promise<void> {
  await db.insert(operatorAudit).values({
    id: newId("oau"),
    at: clock.now(),
    actorType: entry.actorType,
    actorId: entry.actorId,
    action: entry.action,
    targetType: entry.targetType,
    targetId: entry.targetId,
    before: (entry.before ?? null) as object | null,
    after: (entry.after ?? null) as object | null,
    requestId: entry.requestId,
  });
}

/**
 * `POST /operator/credits` (DESIGN §6.4): an amount in major units, parsed as a decimal to the
 * currency's minor units, raises the customer's balance through the immutable ledger; it is applied
 * to the next invoices before charging.
 */
export async function grantCredit(engine: Engine, input: { customerId: string; amount: number | string; currency?: string; description: string }, actor: Actor) {
  const customer = await findCustomer(engine.db, input.customerId);
  const currency = (input.currency ?? customer.currency).toLowerCase();
  const parsed = parseMajorAmount(input.amount, currency);
  if (!parsed.ok) throw new ApiError(400, "VALIDATION_ERROR", "Invalid body: amount", [{ path: "amount", message: parsed.reason, code: "invalid_amount" }]);
  if (currency !== customer.currency) {
    throw conflict("CURRENCY_MISMATCH", `The customer is billed in ${customer.currency.toUpperCase()}; a credit in ${currency.toUpperCase()} cannot be applied`);
  }
  const now = await engine.time.now();
  const balanceCents = await engine.db.transaction((tx) =>
    moveBalance(tx, now, customer.id, parsed.minorUnits, { kind: "credit", description: input.description, currency, ...actor }),
  );
  return { before: { balanceCents: customer.balanceCents }, after: { balanceCents }, amountCents: parsed.minorUnits, currency };
}

/**
 * `POST /operator/subscriptions/{id}/trial` (DESIGN §6.3): a trial of `trialDays`, no charge during
 * it, kept across tier changes. On a paid period the unused time is credited to the balance; on free
 * it is a trial of starter. At its end a new period starts there and is charged.
 */
export async function startTrial(engine: Engine, subscriptionId: string, trialDays: number): Promise<{ before: SubscriptionRow; after: SubscriptionRow }> {
  return withSubscriptionLease(engine.db, () => engine.time.wallNow(), subscriptionId, async (leaseId) => {
    const now = toSecond(await engine.time.now());
    await advanceSubscription(engine, subscriptionId, now, leaseId);
    return engine.db.transaction(async (tx) => {
      const before = await lockUnderLease(tx, subscriptionId, leaseId);
      if (!before) throw conflict("CHANGE_IN_PROGRESS", "The subscription changed meanwhile; try again");
      if (!before.current) throw conflict("SUBSCRIPTION_ENDED", `Subscription ${subscriptionId} has ended`);
      const trialEnd = new Date(now.getTime() + trialDays * DAY_SECONDS * 1000);
      const tier: Tier = before.tier === "free" ? "starter" : (before.tier as Tier);
      if (before.tier !== "free" && before.status !== "trialing" && before.customerId) {
        const plan = engine.catalogue.plan(before.tier as Tier);
        const periodSeconds = (before.currentPeriodEnd.getTime() - before.currentPeriodStart.getTime()) / 1000;
        const remaining = Math.max((before.currentPeriodEnd.getTime() - now.getTime()) / 1000, 0);
        const creditable = Math.max(before.periodPaidCents - before.periodCreditedCents, 0);
        const unused = Math.min(prorate(plan.priceCents * before.quantity, remaining, periodSeconds), creditable);
        const customer = await findCustomer(tx, before.customerId);
        await moveBalance(tx, now, before.customerId, unused, { kind: "trial_credit", description: `Unused time on ${plan.name}: a trial started`, currency: customer.currency, actorType: "system", actorId: null });
      }
      const plan = engine.catalogue.plan(tier);
      const [after] = await tx
        .update(subscriptions)
        .set({ status: "trialing", tier, planId: plan.id, trialEnd, currentPeriodStart: now, currentPeriodEnd: trialEnd, periodPaidCents: 0, periodCreditedCents: 0, updatedAt: now })
        .where(eq(subscriptions.id, subscriptionId))
        .returning();
      if (tier !== before.tier) await recordTier(tx, before.platformId, tier, engine.time.wallNow());
      return { before, after: after! };
    });
  });
}

/**
 * `PATCH /operator/subscriptions/{id}/override` (DESIGN §6.3): sets the tier and the trial's end
 * directly, without proration. A `trialEnd` in the past ends the trial now.
 */
export async function overrideSubscription(engine: Engine, subscriptionId: string, input: { planTier?: string; trialEnd?: number }) {
  if (input.planTier !== undefined && !TIERS.includes(input.planTier as Tier)) {
    throw badRequest(`planTier must be one of ${TIERS.join(", ")}`, [{ path: "planTier", message: `one of ${TIERS.join(", ")}`, code: "invalid_value" }]);
  }
  return withSubscriptionLease(engine.db, () => engine.time.wallNow(), subscriptionId, async (leaseId) => {
    const now = toSecond(await engine.time.now());
    await advanceSubscription(engine, subscriptionId, now, leaseId);
    const result = await engine.db.transaction(async (tx) => {
      const before = await lockUnderLease(tx, subscriptionId, leaseId);
      if (!before) throw conflict("CHANGE_IN_PROGRESS", "The subscription changed meanwhile; try again");
      if (!before.current) throw conflict("SUBSCRIPTION_ENDED", `Subscription ${subscriptionId} has ended`);
      const set: Partial<typeof subscriptions.$inferInsert> = { updatedAt: now };
      if (input.planTier !== undefined) {
        const plan = engine.catalogue.plan(input.planTier as Tier);
        Object.assign(set, { tier: plan.tier, planId: plan.id, pendingTier: null });
      }
      if (input.trialEnd !== undefined) {
        if (before.status !== "trialing" && input.trialEnd * 1000 <= now.getTime()) {
          throw conflict("NOT_TRIALING", "A trialEnd in the past ends a trial, and this subscription is not in one: give a future trialEnd to start one");
        }
        const trialEnd = new Date(Math.max(input.trialEnd * 1000, now.getTime()));
        const startsTrial = before.status !== "trialing";
        Object.assign(set, { status: "trialing", trialEnd, currentPeriodEnd: trialEnd, ...(startsTrial ? { currentPeriodStart: now } : {}) });
        if ((input.planTier ?? before.tier) === "free") Object.assign(set, { tier: "starter", planId: engine.catalogue.plan("starter").id });
      }
      const [after] = await tx.update(subscriptions).set(set).where(eq(subscriptions.id, subscriptionId)).returning();
      if (after!.tier !== before.tier) await recordTier(tx, before.platformId, after!.tier, engine.time.wallNow());
      return { before, after: after! };
    });
    // a trial end in the past (or now) ends the trial at once
    await advanceSubscription(engine, subscriptionId, now, leaseId);
    const [after] = await engine.db.select().from(subscriptions).where(eq(subscriptions.id, subscriptionId));
    return { before: result.before, after: after! };
  });
}

/**
 * `DELETE /subscriptions/{id}` (DESIGN §6.3): at the period's end, or with `immediately` at once,
 * without a refund: the platform returns to free.
 */
export async function cancelSubscription(engine: Engine, subscriptionId: string, immediately: boolean) {
  return withSubscriptionLease(engine.db, () => engine.time.wallNow(), subscriptionId, async (leaseId) => {
    const now = toSecond(await engine.time.now());
    await advanceSubscription(engine, subscriptionId, now, leaseId);
    const [before] = await engine.db.select().from(subscriptions).where(eq(subscriptions.id, subscriptionId));
    if (!before!.current || before!.tier === "free") throw conflict("NOT_SUBSCRIBED", `Subscription ${subscriptionId} is not a current paid subscription`);
    await engine.db.transaction(async (tx) => {
      if (!(await lockUnderLease(tx, subscriptionId, leaseId))) throw conflict("CHANGE_IN_PROGRESS", "The subscription changed meanwhile; try again");
      if (immediately) await returnToFree(engine, tx, before!, now);
      else await tx.update(subscriptions).set({ cancelAtPeriodEnd: true, updatedAt: now }).where(eq(subscriptions.id, subscriptionId));
    });
    const [after] = await engine.db.select().from(subscriptions).where(eq(subscriptions.id, subscriptionId));
    return { before: before!, after: after! };
  });
}

/**
 * `POST /operator/invoices/generate` (DESIGN §6.4): invoices what is pending for the customer — a
 * carried debit — finalizes it and charges the default payment method. Usage is not pending here:
 * a period's usage is invoiced by its close, once its grace has ended (DESIGN §6.5). Nothing
 * pending: 409 NOTHING_TO_INVOICE.
 */
export async function generateInvoice(engine: Engine, input: { customerId: string; description?: string }, requestKey: string) {
  const now = toSecond(await engine.time.now());
  const [existing] = await engine.db.select().from(invoices).where(eq(invoices.requestKey, requestKey));
  const draft =
    existing ??
    (await engine.db.transaction(async (tx) => {
      const customer = await lockCustomer(tx, input.customerId);
      const amounts = priceInvoice({ lines: [], taxPercent: engine.taxPercent, balanceCents: Math.min(customer.balanceCents, 0) });
      if (amounts.lines.length === 0) throw conflict("NOTHING_TO_INVOICE", "Nothing is pending for this customer: no carried balance (usage is invoiced when its period closes)");
      if (amounts.chargeCents === 0 && amounts.carriedForwardCents === amounts.amountDueCents) {
        // a debit under the minimum charge would only be carried again, on a new invoice each time
        throw conflict("NOTHING_TO_INVOICE", `Only ${amounts.amountDueCents} cents are pending, under the minimum charge: they are collected with the next invoice`);
      }
      if (input.description) amounts.lines[0] = { ...amounts.lines[0]!, description: `${input.description} (${amounts.lines[0]!.description.toLowerCase()})` };
      const [current] = await tx.select().from(subscriptions).where(and(eq(subscriptions.customerId, customer.id), eq(subscriptions.current, true)));
      return createDraft(tx, now, {
        customer,
        platformId: customer.platformId ?? current?.platformId ?? "",
        subscriptionId: current?.id ?? null,
        reason: "manual",
        periodStart: now,
        periodEnd: now,
        amounts,
        requestKey,
      });
    }));
  let invoice = draft.status === "draft" ? await engine.db.transaction((tx) => finalizeDraft(tx, now, draft.id, "open")) : draft;
  if (invoice.status !== "open") return invoice;
  const customer = await findCustomer(engine.db, invoice.customerId);
  const chargeCents = invoice.amountDueCents - invoice.amountCarriedCents;
  if (chargeCents > 0 && customer.defaultPaymentMethodId) {
    const outcome = await engine.provider.charge({ customerId: customer.id, paymentMethodId: customer.defaultPaymentMethodId, amountCents: chargeCents, currency: invoice.currency, invoiceId: invoice.id, idempotencyKey: requestKey });
    if (outcome.status === "succeeded") invoice = await engine.db.transaction((tx) => markPaid(tx, now, invoice));
    else {
      await engine.db.transaction(async (tx) => {
        const [failed] = await tx.update(invoices).set({ attemptCount: 1, lastDeclineCode: outcome.declineCode ?? outcome.code }).where(eq(invoices.id, invoice.id)).returning();
        await emitInvoiceEvent(tx, "invoice.payment_failed", failed!, now);
      });
    }
  } else if (chargeCents <= 0) {
    invoice = await engine.db.transaction((tx) => markPaid(tx, now, invoice));
  }
  const [fresh] = await engine.db.select().from(invoices).where(eq(invoices.id, invoice.id));
  return fresh!;
}

/**
 * `GET /operator/overview` (DESIGN §6.4): monthly recurring revenue (the current prices of paid
 * subscriptions, active or past due), platforms by state and tier, and the revenue collected this calendar month.
 */
export async function overview(engine: Engine) {
  const now = await engine.time.now();
  const current = await engine.db.select().from(subscriptions).where(eq(subscriptions.current, true));
  const byTier = Object.fromEntries(TIERS.map((t) => [t, 0])) as Record<Tier, number>;
  let mrrCents = 0;
  for (const s of current) {
    byTier[s.tier as Tier] = (byTier[s.tier as Tier] ?? 0) + 1;
    // a past_due subscription is still subscribed (its payment is being retried); a trial pays nothing yet
    if ((s.status === "active" || s.status === "past_due") && s.tier !== "free") mrrCents += engine.catalogue.plan(s.tier as Tier).priceCents * s.quantity;
  }
  const monthStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  const [revenue] = rowsOf<{ cents: string | number | null }>(
    await engine.db.execute(
      sql`select coalesce(sum(${invoices.amountPaidCents}), 0) as cents from ${invoices} where ${invoices.status} = 'paid' and ${invoices.paidAt} >= ${monthStart.toISOString()} and ${invoices.paidAt} <= ${now.toISOString()}`,
    ),
  );
  return {
    currency: engine.catalogue.currency,
    mrrCents,
    activePlatforms: current.filter((s) => s.status !== "canceled").length,
    paidPlatforms: current.filter((s) => s.tier !== "free" && s.status === "active").length,
    trialingPlatforms: current.filter((s) => s.status === "trialing").length,
    pastDuePlatforms: current.filter((s) => s.status === "past_due").length,
    platformsByTier: byTier,
    revenueThisMonthCents: Number(revenue?.cents ?? 0),
  };
}
