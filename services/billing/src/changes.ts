import { and, eq } from "drizzle-orm";
import { ApiError, badRequest, conflict, unixSeconds } from "@core/kit";
import type { Db } from "@core/storage";
import { atProvider, customerOfPlatform, ensurePlatformCustomer } from "./customers.js";
import { customers, invoices, subscriptions, type CustomerRow, type InvoiceRow, type SubscriptionRow } from "./db/schema.js";
import type { Engine } from "./engine.js";
import { createDraft, emitInvoiceEvent, finalizeDraft, linesOf, priceInvoice, subscriptionLine, type DraftLine, type InvoiceAmounts } from "./invoicing.js";
import { addMonthsClamped } from "./periods.js";
import type { Plan, Tier } from "./plans.js";
import { prorationLines } from "./proration.js";
import { PaymentDeclined, type ChargeOutcome } from "./provider/types.js";
import { advanceSubscription } from "./renewals.js";
import { currentSubscription, lockUnderLease, toSecond, withSubscriptionLease } from "./subscriptions.js";
import { recordTier } from "./tier-sync.js";

/** A preview's `prorationDate` stays good for 5 minutes (DESIGN §6.3). */
const PRORATION_DATE_WINDOW_SECONDS = 300;

async function chargeFor(engine: Engine, customer: CustomerRow, invoice: InvoiceRow, amounts: InvoiceAmounts, paymentMethodId: string | null, key: string): Promise<ChargeOutcome | null> {
  if (amounts.chargeCents === 0) return null;
  if (!paymentMethodId) throw conflict("PAYMENT_METHOD_REQUIRED", "The customer has no default payment method: add one first (POST /payment-methods/{id}/attach)");
  return engine.provider.charge({
    customerId: customer.id,
    paymentMethodId,
    amountCents: amounts.chargeCents,
    currency: customer.currency,
    invoiceId: invoice.id,
    idempotencyKey: key,
  });
}

/** A refused charge: its invoice is finalized void (numbers stay gapless) and the refusal answered, 402. */
async function refused(engine: Engine, invoiceId: string, now: Date, outcome: Extract<ChargeOutcome, { status: "failed" }>): Promise<never> {
  await engine.db.transaction(async (tx) => {
    const voided = await finalizeDraft(tx, now, invoiceId, "void");
    await emitInvoiceEvent(tx, "invoice.payment_failed", voided, now);
  });
  throw new PaymentDeclined(outcome.code, outcome.declineCode);
}

/** The draft a request made before (its retry after a crash), with its pricing, or null. */
async function draftOfRequest(db: Db, requestKey: string): Promise<InvoiceRow | null> {
  const [row] = await db.select().from(invoices).where(eq(invoices.requestKey, requestKey));
  return row ?? null;
}

const amountsOf = async (db: Db, invoice: InvoiceRow): Promise<InvoiceAmounts> => ({
  lines: (await linesOf(db, invoice.id)).map((l) => ({ kind: l.kind, description: l.description, amountCents: l.amountCents })),
  subtotalCents: invoice.subtotalCents,
  taxCents: invoice.taxCents,
  totalCents: invoice.totalCents,
  creditAppliedCents: invoice.creditAppliedCents,
  amountDueCents: invoice.amountDueCents,
  carriedForwardCents: invoice.amountCarriedCents,
  chargeCents: invoice.amountDueCents - invoice.amountCarriedCents,
  creditedBackCents: invoice.totalCents < 0 ? -invoice.totalCents : 0,
});

/**
 * `POST /api/billing/upgrade` (DESIGN §6.3): free → a paid plan. The customer is made or brought up
 * to date, the payment method attached, the first period charged in full, and only then the plan
 * switched. A refused card changes nothing: the subscription stays free and the invoice is void.
 * `requestKey` comes from the idempotency record: its retry charges once.
 */
export async function upgrade(
  engine: Engine,
  input: {
    platformId: string;
    userId: string | null;
    planId: string;
    paymentMethodId: string;
    billingEmail: string;
    requestKey: string;
    quantity?: number;
    metadata?: Record<string, unknown>;
  },
): Promise<{ subscription: SubscriptionRow; invoice: InvoiceRow }> {
  const quantity = input.quantity ?? 1;
  const plan = engine.catalogue.byId(input.planId);
  if (!plan) throw badRequest(`No plan "${input.planId}": see GET /plans`, { path: "planId" });
  if (plan.tier === "free") throw badRequest("The free plan is where a platform starts; choose starter, growth or scale", { path: "planId" });
  const start = await engine.time.now();
  const found = await currentSubscription(engine.db, engine.catalogue, input.platformId, start);
  return withSubscriptionLease(engine.db, () => engine.time.wallNow(), found.id, async (leaseId) => {
    const now = toSecond(await engine.time.now());
    await advanceSubscription(engine, found.id, now, leaseId);
    const subscription = await currentSubscription(engine.db, engine.catalogue, input.platformId, now);
    if (subscription.tier !== "free") throw conflict("ALREADY_SUBSCRIBED", `The platform is on ${subscription.tier} already: use POST /subscription/change-tier`);
    const customer = await atProvider(engine, await ensurePlatformCustomer(engine.db, now, {
      platformId: input.platformId,
      userId: input.userId,
      email: input.billingEmail,
      currency: engine.catalogue.currency,
    }));
    // a retry of this request attaches nothing new: its charge must carry the first try's card
    const card = await engine.provider.attach(customer.id, input.paymentMethodId, { idempotencyKey: `${input.requestKey}:attach` });
    const end = addMonthsClamped(now, 1);
    let draft = await draftOfRequest(engine.db, input.requestKey);
    const amounts = draft
      ? await amountsOf(engine.db, draft)
      : priceInvoice({ lines: [subscriptionLine(plan, quantity, now, end)], taxPercent: engine.taxPercent, balanceCents: customer.balanceCents });
    draft ??= await createDraft(engine.db, now, {
      customer,
      platformId: input.platformId,
      subscriptionId: subscription.id,
      reason: "subscription_create",
      periodStart: now,
      periodEnd: end,
      amounts,
      requestKey: input.requestKey,
    });
    const outcome = await chargeFor(engine, customer, draft, amounts, card.id, input.requestKey);
    const invoiceId = draft.id;
    if (outcome?.status === "failed") await refused(engine, invoiceId, now, outcome);
    await engine.provider.setDefaultPaymentMethod(customer.id, card.id);
    return engine.db.transaction(async (tx) => {
      const held = await lockUnderLease(tx, subscription.id, leaseId);
      if (!held) throw new ApiError(409, "CHANGE_IN_PROGRESS", "The subscription changed while the payment was made; try again");
      const invoice = await finalizeDraft(tx, now, invoiceId, "paid");
      await tx.update(customers).set({ defaultPaymentMethodId: card.id, updatedAt: now }).where(eq(customers.id, customer.id));
      const [upgraded] = await tx
        .update(subscriptions)
        .set({
          customerId: customer.id,
          tier: plan.tier,
          planId: plan.id,
          status: "active",
          billingAnchor: now,
          currentPeriodStart: now,
          currentPeriodEnd: end,
          cancelAtPeriodEnd: false,
          pendingTier: null,
          quantity,
          pendingQuantity: null,
          ...(input.metadata ? { metadata: input.metadata } : {}),
          periodPaidCents: plan.priceCents * quantity,
          periodCreditedCents: 0,
          updatedAt: now,
        })
        .where(eq(subscriptions.id, subscription.id))
        .returning();
      await recordTier(tx, input.platformId, plan.tier, engine.time.wallNow());
      return { subscription: upgraded!, invoice };
    });
  });
}

export interface ChangePreview {
  currentTier: Tier;
  newTier: Tier;
  currentQuantity: number;
  newQuantity: number;
  /** when the change takes effect: now for an upgrade, the period's end for a downgrade */
  effectiveAt: Date;
  prorationDate: Date | null;
  currency: string;
  amounts: InvoiceAmounts;
  /** what the proration lines cover */
  periodStart: Date;
  periodEnd: Date;
}

/** What a change asks for: a tier, a quantity (seats), or both. */
export interface ChangeTarget {
  tier: Tier;
  quantity: number;
}

const priceName = (plan: Plan, quantity: number) => (quantity === 1 ? plan.name : `${quantity} × ${plan.name}`);

/**
 * What a change would do (DESIGN §6.3), computed as the change itself computes it. A change that
 * raises the period's price (a higher tier, more seats) applies now: Stripe's proration of the rest
 * of the period, priced with tax, the customer's credit and the minimum charge, so `amountDueCents`
 * is what the card will be charged. One that lowers it waits for the period's end and charges
 * nothing now. During a trial the change applies at once and nothing is due.
 */
export function previewChange(engine: Engine, subscription: SubscriptionRow, customer: CustomerRow | null, to: ChangeTarget, at: Date): ChangePreview {
  const from = subscription.tier as Tier;
  const none = priceInvoice({ lines: [], taxPercent: engine.taxPercent, balanceCents: 0 });
  const base = {
    currentTier: from,
    newTier: to.tier,
    currentQuantity: subscription.quantity,
    newQuantity: to.quantity,
    currency: customer?.currency ?? engine.catalogue.currency,
    periodStart: at,
    periodEnd: subscription.currentPeriodEnd,
  };
  if (subscription.status === "trialing") return { ...base, effectiveAt: at, prorationDate: null, amounts: none };
  const oldPlan = engine.catalogue.plan(from);
  const newPlan = engine.catalogue.plan(to.tier);
  const oldPrice = oldPlan.priceCents * subscription.quantity;
  const newPrice = newPlan.priceCents * to.quantity;
  if (newPrice <= oldPrice) return { ...base, effectiveAt: subscription.currentPeriodEnd, prorationDate: null, amounts: none };
  const proration = prorationLines({
    fromName: priceName(oldPlan, subscription.quantity),
    fromPriceCents: oldPrice,
    toName: priceName(newPlan, to.quantity),
    toPriceCents: newPrice,
    periodStart: subscription.currentPeriodStart,
    periodEnd: subscription.currentPeriodEnd,
    at,
    creditableCents: Math.max(subscription.periodPaidCents - subscription.periodCreditedCents, 0),
  });
  const lines: DraftLine[] = proration.lines.map((line) => ({ kind: "proration", ...line }));
  const amounts = priceInvoice({ lines, taxPercent: engine.taxPercent, balanceCents: customer?.balanceCents ?? 0 });
  return { ...base, effectiveAt: at, prorationDate: at, amounts };
}

/** The preview in the answer's shape of DESIGN §6.3. */
export function previewJson(preview: ChangePreview) {
  const a = preview.amounts;
  return {
    currentTier: preview.currentTier,
    newTier: preview.newTier,
    effectiveAt: unixSeconds(preview.effectiveAt),
    prorationDate: preview.prorationDate ? unixSeconds(preview.prorationDate) : null,
    currency: preview.currency,
    lines: a.lines.map((line) => ({
      description: line.description,
      amountCents: line.amountCents,
      periodStart: line.periodStart ? unixSeconds(line.periodStart) : unixSeconds(preview.periodStart),
      periodEnd: line.periodEnd ? unixSeconds(line.periodEnd) : unixSeconds(preview.periodEnd),
    })),
    subtotalCents: a.subtotalCents,
    taxCents: a.taxCents,
    creditAppliedCents: a.creditAppliedCents,
    amountDueCents: a.amountDueCents,
  };
}

const nothingPending = (s: SubscriptionRow) => s.pendingTier === null && s.pendingQuantity === null;

function refuseSameOrFree(subscription: SubscriptionRow, to: ChangeTarget) {
  if (subscription.tier === "free") {
    throw conflict("USE_UPGRADE", "The platform is on free: move it to a paid plan with POST /api/billing/upgrade, which takes a payment method");
  }
  if (to.tier === subscription.tier && to.quantity === subscription.quantity && nothingPending(subscription)) {
    throw conflict("SAME_TIER", to.quantity === 1 ? `The platform is on ${to.tier} already` : `The subscription is on ${to.quantity} × ${to.tier} already`);
  }
}

/** `GET /subscription/proration-preview` (DESIGN §6.3): nothing is written. */
export async function previewTierChange(engine: Engine, platformId: string, tier: Tier): Promise<ChangePreview> {
  const now = toSecond(await engine.time.now());
  const subscription = await currentSubscription(engine.db, engine.catalogue, platformId, now);
  const target = { tier, quantity: subscription.quantity };
  refuseSameOrFree(subscription, target);
  return previewChange(engine, subscription, await customerOfPlatform(engine.db, platformId), target, now);
}

/**
 * A change of the current subscription's tier and/or quantity: `POST /subscription/change-tier` and
 * `PATCH /subscriptions/{id}` (DESIGN §6.3). A higher price applies now and charges the prorated
 * difference at once (a refused card leaves everything as it was and voids the invoice); a lower one
 * waits for the period's end (`pendingTier`, `pendingQuantity`); asking for what is current while a
 * change waits calls it off. With the preview's `prorationDate` the charge is the preview's, to the
 * cent; with an `expectedAmountDueCents` that no longer holds, 409 AMOUNT_CHANGED and nothing changes.
 */
export async function changePlan(
  engine: Engine,
  input: { platformId: string; tier?: Tier; quantity?: number; prorationDate?: number; expectedAmountDueCents?: number; requestKey: string },
): Promise<{ subscription: SubscriptionRow; invoice: InvoiceRow | null }> {
  const targetOf = (s: SubscriptionRow): ChangeTarget => ({ tier: input.tier ?? (s.tier as Tier), quantity: input.quantity ?? s.quantity });
  const start = await engine.time.now();
  const found = await currentSubscription(engine.db, engine.catalogue, input.platformId, start);
  refuseSameOrFree(found, targetOf(found));
  return withSubscriptionLease(engine.db, () => engine.time.wallNow(), found.id, async (leaseId) => {
    const now = toSecond(await engine.time.now());
    await advanceSubscription(engine, found.id, now, leaseId);
    const subscription = await currentSubscription(engine.db, engine.catalogue, input.platformId, now);
    const target = targetOf(subscription);
    refuseSameOrFree(subscription, target);
    const update = (tx: Db, set: Partial<typeof subscriptions.$inferInsert>) =>
      tx.update(subscriptions).set({ ...set, updatedAt: now }).where(eq(subscriptions.id, subscription.id)).returning();

    if (target.tier === subscription.tier && target.quantity === subscription.quantity) {
      // what is current, while a change waits: the waiting change is called off
      const [kept] = await update(engine.db, { pendingTier: null, pendingQuantity: null });
      return { subscription: kept!, invoice: null };
    }
    const at = prorationInstant(input.prorationDate, now, subscription);
    const customer = await customerOfPlatform(engine.db, input.platformId);
    const preview = previewChange(engine, subscription, customer, target, at);
    if (input.expectedAmountDueCents !== undefined && input.expectedAmountDueCents !== preview.amounts.amountDueCents) {
      throw new ApiError(409, "AMOUNT_CHANGED", `The amount due is now ${preview.amounts.amountDueCents} cents, not ${input.expectedAmountDueCents}: preview again`, {
        amountDueCents: preview.amounts.amountDueCents,
      });
    }
    const newPlan = engine.catalogue.plan(target.tier);
    const applied = { tier: newPlan.tier, planId: newPlan.id, quantity: target.quantity, pendingTier: null, pendingQuantity: null };
    if (subscription.status === "trialing") {
      // a trial keeps its end across changes, and nothing is charged during it (DESIGN §6.3)
      return engine.db.transaction(async (tx) => {
        const [changed] = await update(tx, applied);
        if (newPlan.tier !== subscription.tier) await recordTier(tx, subscription.platformId, newPlan.tier, engine.time.wallNow());
        return { subscription: changed!, invoice: null };
      });
    }
    if (preview.prorationDate === null) {
      const [scheduled] = await update(engine.db, {
        pendingTier: target.tier === subscription.tier ? null : target.tier,
        pendingQuantity: target.quantity === subscription.quantity ? null : target.quantity,
      });
      return { subscription: scheduled!, invoice: null };
    }
    if (!customer) throw conflict("NO_CUSTOMER", "The platform has no billing customer; upgrade it first");
    let draft = await draftOfRequest(engine.db, input.requestKey);
    const amounts = draft ? await amountsOf(engine.db, draft) : preview.amounts;
    draft ??= await createDraft(engine.db, now, {
      customer,
      platformId: subscription.platformId,
      subscriptionId: subscription.id,
      reason: "subscription_update",
      periodStart: at,
      periodEnd: subscription.currentPeriodEnd,
      amounts,
      requestKey: input.requestKey,
    });
    const outcome = await chargeFor(engine, customer, draft, amounts, customer.defaultPaymentMethodId, input.requestKey);
    const invoiceId = draft.id;
    const [credit, charge] = [amounts.lines.filter((l) => l.kind === "proration" && l.amountCents < 0), amounts.lines.filter((l) => l.kind === "proration" && l.amountCents > 0)].map((ls) =>
      Math.abs(ls.reduce((sum, l) => sum + l.amountCents, 0)),
    );
    if (outcome?.status === "failed") await refused(engine, invoiceId, now, outcome);
    return engine.db.transaction(async (tx) => {
      const held = await lockUnderLease(tx, subscription.id, leaseId);
      if (!held) throw new ApiError(409, "CHANGE_IN_PROGRESS", "The subscription changed while the payment was made; try again");
      const invoice = await finalizeDraft(tx, now, invoiceId, "paid");
      const [changed] = await update(tx, {
        ...applied,
        periodPaidCents: held.periodPaidCents + charge!,
        periodCreditedCents: held.periodCreditedCents + credit!,
      });
      if (newPlan.tier !== subscription.tier) await recordTier(tx, subscription.platformId, newPlan.tier, engine.time.wallNow());
      return { subscription: changed!, invoice };
    });
  });
}

/** The instant a change is prorated at: the preview's, when it is recent and inside this period; else now. */
function prorationInstant(prorationDate: number | undefined, now: Date, subscription: SubscriptionRow): Date {
  if (prorationDate === undefined) return now;
  const at = new Date(prorationDate * 1000);
  const fresh = now.getTime() - at.getTime() <= PRORATION_DATE_WINDOW_SECONDS * 1000 && at.getTime() <= now.getTime();
  if (!fresh || at < subscription.currentPeriodStart) {
    throw badRequest("prorationDate must come from a preview of the last 5 minutes, inside the current period", { path: "prorationDate" });
  }
  return at;
}

/**
 * `POST /subscription/cancel` (DESIGN §6.3): the subscription ends at its period's end, and the
 * platform returns to free then; until then nothing changes. Cancelling twice answers the same.
 */
export async function cancelAtPeriodEnd(engine: Engine, platformId: string, cancel: boolean): Promise<SubscriptionRow> {
  const now = toSecond(await engine.time.now());
  const found = await currentSubscription(engine.db, engine.catalogue, platformId, now);
  if (found.tier === "free") throw conflict("NOT_SUBSCRIBED", "The platform is on free: there is no paid subscription to cancel");
  return withSubscriptionLease(engine.db, () => engine.time.wallNow(), found.id, async (leaseId) => {
    await advanceSubscription(engine, found.id, now, leaseId);
    const [row] = await engine.db
      .update(subscriptions)
      .set({ cancelAtPeriodEnd: cancel, updatedAt: now })
      .where(and(eq(subscriptions.id, found.id), eq(subscriptions.current, true)))
      .returning();
    if (!row) throw conflict("NOT_SUBSCRIBED", "The subscription has ended already");
    return row;
  });
}
