import { eq } from "drizzle-orm";
import { ApiError, badRequest, conflict, unixSeconds } from "@core/kit";
import type { Db } from "@core/storage";
import { checkCollection, collectBegun, openInvoice, refuseWhileCollecting, requireSettledPaid, type OpenInvoice } from "./collection.js";
import { atProvider, customerOfPlatform, ensurePlatformCustomer, findCustomer } from "./customers.js";
import { customers, invoices, type CustomerRow, type Intent, type InvoiceRow, type SubscriptionRow } from "./db/schema.js";
import type { Engine } from "./engine.js";
import { priceInvoice, priceUnderCustomerLock, subscriptionLine, taxOf, type DraftLine, type InvoiceAmounts } from "./invoicing.js";
import { addMonthsClamped } from "./periods.js";
import type { Plan, Tier } from "./plans.js";
import { prorationLines } from "./proration.js";
import { changeWithoutPayment, retryOpenInvoicesNow, withUpToDateSubscription } from "./renewals.js";
import { changeInProgress, currentSubscription, findSubscription, lockUnderLease, toSecond, writeSubscription } from "./subscriptions.js";
import { recordTier } from "./tier-sync.js";

/** A preview's `prorationDate` stays good for 5 minutes (DESIGN §6.3). */
const PRORATION_DATE_WINDOW_SECONDS = 300;

/** The invoice a request made before (its retry, after a crash or to learn an unknown outcome), or null. */
async function invoiceOfRequest(db: Db, requestKey: string): Promise<InvoiceRow | null> {
  const [row] = await db.select().from(invoices).where(eq(invoices.requestKey, requestKey));
  return row ?? null;
}

/**
 * The outcome of a request's own invoice, found again by its retry (DESIGN §6.9): asked about when
 * its check is due, then paid (the answer), void (the stored 402) or still pending (503 again).
 */
async function outcomeOfEarlier(engine: Engine, earlier: InvoiceRow): Promise<InvoiceRow> {
  const fresh = earlier.collectionState !== null ? await checkCollection(engine, earlier.id, engine.logger) : earlier;
  return requireSettledPaid(fresh);
}

/**
 * A change's invoice, priced and opened while the change still holds its subscription's lease (else
 * 409 CHANGE_IN_PROGRESS): `invoiceOf` prices it under the customer's lock, in this transaction.
 */
async function openUnderLease(engine: Engine, subscriptionId: string, leaseId: string, at: Date, invoiceOf: (tx: Db) => Promise<OpenInvoice>): Promise<InvoiceRow> {
  return engine.db.transaction(async (tx) => {
    if (!(await lockUnderLease(tx, subscriptionId, leaseId))) throw changeInProgress();
    return openInvoice(tx, engine, at, await invoiceOf(tx));
  });
}

/** 409 AMOUNT_CHANGED (DESIGN §6.3): the amount the client expects is no longer what this change comes to. */
function refuseChangedAmount(expected: number | undefined, amountDueCents: number): void {
  if (expected !== undefined && expected !== amountDueCents) {
    throw new ApiError(409, "AMOUNT_CHANGED", `The amount due is now ${amountDueCents} cents, not ${expected}: preview again`, { amountDueCents });
  }
}

/** An invoice of a request, and the subscription as its payment left it. */
async function paidChange(engine: Engine, invoice: InvoiceRow): Promise<{ subscription: SubscriptionRow; invoice: InvoiceRow }> {
  return { subscription: await findSubscription(engine.db, invoice.subscriptionId!), invoice };
}

/**
 * `POST /api/billing/upgrade` (DESIGN §6.3, §6.9): free → a paid plan. The customer is made or
 * brought up to date and the card attached; the first period's invoice is finalized open with the
 * upgrade as its intent, then collected: paid, the plan switches in the paying transaction; refused,
 * the invoice is void and nothing changed (402); unknown, 503 PAYMENT_PENDING, and the request's
 * retry (same `requestKey`) answers what it came to.
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
    /** the buyer's name a new customer starts with (the platform's, from the registry), until billing details give one */
    customerName?: string | null;
  },
): Promise<{ subscription: SubscriptionRow; invoice: InvoiceRow }> {
  const quantity = input.quantity ?? 1;
  const plan = engine.catalogue.byId(input.planId);
  if (!plan) throw badRequest(`No plan "${input.planId}": see GET /plans`, { path: "planId" });
  if (plan.tier === "free") throw badRequest("The free plan is where a platform starts; choose starter, growth or scale", { path: "planId" });
  const locate = async () => (await currentSubscription(engine.db, engine.catalogue, input.platformId, await engine.time.now())).id;
  const made = await withUpToDateSubscription(
    engine,
    locate,
    async (leaseId, now): Promise<{ earlier: InvoiceRow } | { begun: InvoiceRow; customer: CustomerRow; cardId: string }> => {
      const earlier = await invoiceOfRequest(engine.db, input.requestKey);
      if (earlier) return { earlier };
      const subscription = await currentSubscription(engine.db, engine.catalogue, input.platformId, now);
      await refuseWhileCollecting(engine.db, subscription.id);
      if (subscription.tier !== "free") throw conflict("ALREADY_SUBSCRIBED", `The platform is on ${subscription.tier} already: use POST /subscription/change-tier`);
      const customer = await atProvider(
        engine,
        await ensurePlatformCustomer(engine.db, now, { platformId: input.platformId, userId: input.userId, email: input.billingEmail, name: input.customerName ?? null, currency: engine.catalogue.currency }),
      );
      // a retry of this request attaches nothing new: its charge must carry the first try's card
      const card = await engine.provider.attach(customer.id, input.paymentMethodId, { idempotencyKey: `${input.requestKey}:attach` });
      const end = addMonthsClamped(now, 1);
      const begun = await openUnderLease(engine, subscription.id, leaseId, now, async (tx) => ({
        // the balance as it is now, under the customer's lock: the card's attach above may have taken a while
        priced: await priceUnderCustomerLock(tx, engine, customer.id, [subscriptionLine(plan, quantity, now, end)]),
        platformId: input.platformId,
        subscriptionId: subscription.id,
        reason: "subscription_create",
        periodStart: now,
        periodEnd: end,
        requestKey: input.requestKey,
        intent: { kind: "upgrade", tier: plan.tier, planId: plan.id, quantity, paymentMethodId: card.id, metadata: input.metadata ?? null },
        paymentMethodId: card.id,
      }));
      return { begun, customer, cardId: card.id };
    },
    engine.logger,
  );
  if ("earlier" in made) return paidChange(engine, await outcomeOfEarlier(engine, made.earlier));
  const invoice = requireSettledPaid(await collectBegun(engine, made.begun, null, engine.logger));
  // Stripe's record of the default card follows the engine's (its own portal shows it); the engine's is what charges
  await engine.provider.setDefaultPaymentMethod(made.customer.id, made.cardId).catch((err: unknown) => engine.logger.warn({ err: (err as Error).message, customerId: made.customer.id }, "the provider did not take the new default card; the engine's default is set"));
  return paidChange(engine, invoice);
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
  /** what is charged for the change (the proration lines), before tax and balance */
  lines: DraftLine[];
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
  const none = priceInvoice({ lines: [], tax: taxOf(engine, customer), balanceCents: 0 });
  const base = {
    currentTier: from,
    newTier: to.tier,
    currentQuantity: subscription.quantity,
    newQuantity: to.quantity,
    currency: customer?.currency ?? engine.catalogue.currency,
    periodStart: at,
    periodEnd: subscription.currentPeriodEnd,
  };
  if (subscription.status === "trialing") return { ...base, effectiveAt: at, prorationDate: null, lines: [], amounts: none };
  const oldPlan = engine.catalogue.plan(from);
  const newPlan = engine.catalogue.plan(to.tier);
  const oldPrice = oldPlan.priceCents * subscription.quantity;
  const newPrice = newPlan.priceCents * to.quantity;
  if (newPrice <= oldPrice) return { ...base, effectiveAt: subscription.currentPeriodEnd, prorationDate: null, lines: [], amounts: none };
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
  const amounts = priceInvoice({ lines, tax: taxOf(engine, customer), balanceCents: customer?.balanceCents ?? 0 });
  return { ...base, effectiveAt: at, prorationDate: at, lines, amounts };
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

/** What a change asks for (a tier, seats, or both), and what else the same request sets (PATCH /subscriptions/{id}). */
export interface ChangeRequest {
  tier?: Tier;
  quantity?: number;
  /** a card of the customer's, attached already: charged for this change, and the default once it is paid */
  defaultPaymentMethodId?: string;
  cancelAtPeriodEnd?: boolean;
  prorationDate?: number;
  expectedAmountDueCents?: number;
  requestKey: string;
}

function refuseFree(subscription: SubscriptionRow) {
  if (subscription.tier === "free") {
    throw conflict("USE_UPGRADE", "The platform is on free: move it to a paid plan with POST /api/billing/upgrade, which takes a payment method");
  }
}

/** `change-tier`'s refusal of a change that changes nothing (DESIGN §6.3): the same tier, and no other tier waiting. */
function refuseSame(subscription: SubscriptionRow, tier: Tier) {
  if (tier === subscription.tier && subscription.pendingTier === null) throw conflict("SAME_TIER", `The platform is on ${tier} already`);
}

/** `GET /subscription/proration-preview` (DESIGN §6.3): nothing is written. */
export async function previewTierChange(engine: Engine, platformId: string, tier: Tier): Promise<ChangePreview> {
  const now = toSecond(await engine.time.now());
  const subscription = await currentSubscription(engine.db, engine.catalogue, platformId, now);
  refuseFree(subscription);
  refuseSame(subscription, tier);
  return previewChange(engine, subscription, await customerOfPlatform(engine.db, platformId), { tier, quantity: subscription.quantity }, now);
}

/**
 * `POST /subscription/change-tier` (DESIGN §6.3): a change of the platform's tier. Asking for the
 * current tier while a downgrade waits calls it off; asking for it with nothing waiting is 409 SAME_TIER.
 */
export async function changePlan(
  engine: Engine,
  input: { platformId: string; tier: Tier; prorationDate?: number; expectedAmountDueCents?: number; requestKey: string },
): Promise<{ subscription: SubscriptionRow; invoice: InvoiceRow | null }> {
  const locate = async () => (await currentSubscription(engine.db, engine.catalogue, input.platformId, await engine.time.now())).id;
  return changeSubscription(engine, locate, input, (s) => {
    refuseFree(s);
    refuseSame(s, input.tier);
  });
}

/**
 * `PATCH /subscriptions/{id}` (spec table B, DESIGN §6.9): the plan, the seats, the default card and
 * the cancellation flag of a current subscription, as one change. A change that raises the period's
 * price is charged now (with the new card, when one is given) and nothing of the request applies
 * unless it is paid; otherwise everything applies in one transaction.
 */
export async function updateSubscription(engine: Engine, subscriptionId: string, input: Omit<ChangeRequest, "prorationDate" | "expectedAmountDueCents">) {
  const ended = (s: SubscriptionRow) => {
    if (!s.current) throw conflict("SUBSCRIPTION_ENDED", `Subscription ${subscriptionId} has ended (status ${s.status})`);
    if (s.tier === "free" && (input.tier !== undefined || input.quantity !== undefined)) refuseFree(s);
    if (s.tier === "free" && input.cancelAtPeriodEnd) throw conflict("NOT_SUBSCRIBED", `Subscription ${subscriptionId} is on free: there is no paid subscription to cancel`);
  };
  const before = await findSubscription(engine.db, subscriptionId);
  ended(before);
  if (input.defaultPaymentMethodId !== undefined && !before.customerId) throw conflict("NO_CUSTOMER", `Subscription ${subscriptionId} is on free and has no customer to hold a card`);
  const result = await changeSubscription(engine, async () => subscriptionId, input, ended);
  return { before, ...result };
}

/**
 * One change of a subscription under its lease, once it is up to date (DESIGN §6.3, §6.9): a higher
 * price (a higher tier, more seats) applies now and charges Stripe's proration of the rest of the
 * period — finalized open with the change as its intent, then collected; a lower one waits for the
 * period's end (`pendingTier`, `pendingQuantity`); during a trial it applies at once, free. Asking for
 * what is current calls off what waits for that field only: seats never touch a waiting tier or the
 * cancellation. With the preview's `prorationDate` the charge is the preview's, to the cent; with an
 * `expectedAmountDueCents` that no longer holds, 409 AMOUNT_CHANGED and nothing changes.
 */
async function changeSubscription(
  engine: Engine,
  locate: () => Promise<string>,
  input: ChangeRequest,
  refuse: (subscription: SubscriptionRow) => void,
): Promise<{ subscription: SubscriptionRow; invoice: InvoiceRow | null }> {
  const made = await withUpToDateSubscription(
    engine,
    locate,
    async (leaseId, now): Promise<{ earlier: InvoiceRow } | { begun: InvoiceRow } | { subscription: SubscriptionRow; invoice: null }> => {
      const earlier = await invoiceOfRequest(engine.db, input.requestKey);
      if (earlier) return { earlier };
      const subscription = await findSubscription(engine.db, await locate());
      await refuseWhileCollecting(engine.db, subscription.id);
      refuse(subscription);
      const target: ChangeTarget = { tier: input.tier ?? (subscription.tier as Tier), quantity: input.quantity ?? subscription.quantity };
      const customer = subscription.customerId ? await findCustomer(engine.db, subscription.customerId) : null;
      const differs = target.tier !== subscription.tier || target.quantity !== subscription.quantity;
      const at = differs ? prorationInstant(input.prorationDate, now, subscription) : now;
      const preview = differs ? previewChange(engine, subscription, customer, target, at) : null;
      // a change that charges is checked again on the amount priced under the customer's lock, below
      if (preview) refuseChangedAmount(input.expectedAmountDueCents, preview.amounts.amountDueCents);
      const plan = engine.catalogue.plan(target.tier);
      const alsoAsked = {
        ...(input.cancelAtPeriodEnd !== undefined ? { cancelAtPeriodEnd: input.cancelAtPeriodEnd } : {}),
      };
      // a change that applies without a charge: everything the request asked, in one transaction
      const applyNow = (set: Partial<SubscriptionRow>) =>
        engine.db.transaction(async (tx) => {
          const held = await lockUnderLease(tx, subscription.id, leaseId);
          if (!held) throw changeInProgress();
          if (input.defaultPaymentMethodId !== undefined) {
            await tx.update(customers).set({ defaultPaymentMethodId: input.defaultPaymentMethodId, updatedAt: now }).where(eq(customers.id, customer!.id));
          }
          const changed = await writeSubscription(tx, subscription, { ...set, ...alsoAsked, updatedAt: now });
          if (changed.tier !== subscription.tier) await recordTier(tx, subscription.platformId, changed.tier, engine.time.wallNow());
          return { subscription: changed, invoice: null };
        });
      const calledOff = {
        ...(input.tier !== undefined ? { pendingTier: null } : {}),
        ...(input.quantity !== undefined ? { pendingQuantity: null } : {}),
      };
      if (!preview) return applyNow(calledOff);
      if (subscription.status === "trialing") {
        // a trial keeps its end across changes, and nothing is charged during it (DESIGN §6.3)
        return applyNow({ tier: plan.tier, planId: plan.id, quantity: target.quantity, ...calledOff });
      }
      if (preview.prorationDate === null) {
        return applyNow({
          ...(input.tier !== undefined ? { pendingTier: target.tier === subscription.tier ? null : target.tier } : {}),
          ...(input.quantity !== undefined ? { pendingQuantity: target.quantity === subscription.quantity ? null : target.quantity } : {}),
        });
      }
      if (!customer) throw conflict("NO_CUSTOMER", "The platform has no billing customer; upgrade it first");
      const sumOf = (sign: 1 | -1) => Math.abs(preview.lines.filter((l) => l.kind === "proration" && Math.sign(l.amountCents) === sign).reduce((sum, l) => sum + l.amountCents, 0));
      const intent: Intent = {
        kind: target.tier !== subscription.tier ? "change_tier" : "seats",
        tier: plan.tier,
        planId: plan.id,
        quantity: target.quantity,
        chargedCents: sumOf(1),
        creditedCents: sumOf(-1),
        clearPendingTier: input.tier !== undefined,
        clearPendingQuantity: input.quantity !== undefined,
        defaultPaymentMethodId: input.defaultPaymentMethodId ?? null,
        cancelAtPeriodEnd: input.cancelAtPeriodEnd ?? null,
      };
      const begun = await openUnderLease(engine, subscription.id, leaseId, now, async (tx) => {
        // the preview's lines with the balance as it is under the lock: what another invoice applied meanwhile is gone
        const priced = await priceUnderCustomerLock(tx, engine, customer.id, preview.lines);
        refuseChangedAmount(input.expectedAmountDueCents, priced.amounts.amountDueCents);
        return {
          priced,
          platformId: subscription.platformId,
          subscriptionId: subscription.id,
          reason: "subscription_update",
          periodStart: at,
          periodEnd: subscription.currentPeriodEnd,
          requestKey: input.requestKey,
          intent,
          paymentMethodId: input.defaultPaymentMethodId ?? priced.customer.defaultPaymentMethodId,
        };
      });
      return { begun };
    },
    engine.logger,
  );
  if ("subscription" in made) {
    // a new default card retries what was refused with the old one (DESIGN §6.3)
    if (input.defaultPaymentMethodId !== undefined && made.subscription.customerId) await retryOpenInvoicesNow(engine, made.subscription.customerId, engine.logger);
    return made;
  }
  const invoice = "earlier" in made ? await outcomeOfEarlier(engine, made.earlier) : requireSettledPaid(await collectBegun(engine, made.begun, null, engine.logger));
  if (input.defaultPaymentMethodId !== undefined) await retryOpenInvoicesNow(engine, invoice.customerId, engine.logger);
  return paidChange(engine, invoice);
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
 * `cancel: false` resumes it.
 */
export async function cancelAtPeriodEnd(engine: Engine, platformId: string, cancel: boolean): Promise<SubscriptionRow> {
  const locate = async () => (await currentSubscription(engine.db, engine.catalogue, platformId, await engine.time.now())).id;
  const found = await findSubscription(engine.db, await locate());
  if (found.tier === "free") throw conflict("NOT_SUBSCRIBED", "The platform is on free: there is no paid subscription to cancel");
  return changeWithoutPayment(engine, locate, async (tx, subscription, now) => {
    if (subscription.tier === "free") throw conflict("NOT_SUBSCRIBED", "The subscription has ended already");
    return writeSubscription(tx, subscription, { cancelAtPeriodEnd: cancel, updatedAt: now });
  });
}
