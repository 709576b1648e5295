import { and, count, eq, inArray, sql } from "drizzle-orm";
import { ApiError, badRequest, type Clock, conflict, decodeCursor, newId, resourceNotFound, toPage, unixSeconds } from "@core/kit";
import { keysetAfter, keysetOrder, rowsOf, type Db, type KeysetColumns } from "@core/storage";
import { beginAttempt, checkCollection, collectBegun, openInvoice, PaymentPending, refuseWhileCollecting, requireSettledPaid, voidInvoice } from "./collection.js";
import { findCustomer } from "./customers.js";
import { invoices, operatorAudit, subscriptions, type InvoiceRow, type SubscriptionRow } from "./db/schema.js";
import type { Engine } from "./engine.js";
import { moveBalance, priceUnderCustomerLock, type Actor } from "./invoicing.js";
import { parseMajorAmount } from "./money.js";
import { TIERS, type Tier } from "./plans.js";
import { prorate } from "./proration.js";
import { changeWithoutPayment, withUpToDateSubscription } from "./renewals.js";
import { findSubscription, returnToFree, toSecond, withSubscriptionLease, writeSubscription } from "./subscriptions.js";
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

const NEWEST_FIRST: KeysetColumns = { key: operatorAudit.at, tie: operatorAudit.seq, direction: "desc" };

/** `GET /operator/audit` (DESIGN §6.4): a page of the operator audit, newest first. */
export async function listOperatorAudit(db: Db, page: { limit: number; cursor?: string }) {
  const rows = await db
    .select()
    .from(operatorAudit)
    .where(keysetAfter(NEWEST_FIRST, decodeCursor(page.cursor, { key: "timestamp", tie: "sequence" })))
    .orderBy(...keysetOrder(NEWEST_FIRST))
    .limit(page.limit + 1);
  const { data, cursor } = toPage(rows, page.limit, (r) => ({ k: r.at, id: r.seq }));
  return { data: data.map(({ seq: _, ...entry }) => ({ ...entry, at: unixSeconds(entry.at) })), cursor };
}

/**
 * `POST /operator/credits` (DESIGN §6.4): an amount in major units, parsed as a decimal to the
 * currency's minor units, raises the customer's balance through the immutable ledger; it is applied
 * to the next invoices before charging.
 */
export async function grantCredit(engine: Engine, input: BalanceAdjustment, actor: Actor) {
  return adjustBalance(engine, input, actor, "credit");
}

/**
 * `POST /operator/debits` (DESIGN §6.10): the same body as a credit, lowering the balance through the
 * same ledger (kind `debit`): a debt the customer owes, added to the next invoice as a `carried` line
 * by the balance rules (§6.3). It takes back a credit given by mistake, or charges for something
 * outside the plan.
 */
export async function grantDebit(engine: Engine, input: BalanceAdjustment, actor: Actor) {
  return adjustBalance(engine, input, actor, "debit");
}

export interface BalanceAdjustment {
  customerId: string;
  amount: number | string;
  currency?: string;
  description: string;
}

async function adjustBalance(engine: Engine, input: BalanceAdjustment, actor: Actor, kind: "credit" | "debit") {
  const customer = await findCustomer(engine.db, input.customerId);
  const currency = (input.currency ?? customer.currency).toLowerCase();
  const parsed = parseMajorAmount(input.amount, currency);
  if (!parsed.ok) throw new ApiError(400, "VALIDATION_ERROR", "Invalid body: amount", [{ path: "amount", message: parsed.reason, code: "invalid_amount" }]);
  if (currency !== customer.currency) {
    throw conflict("CURRENCY_MISMATCH", `The customer is billed in ${customer.currency.toUpperCase()}; a ${kind} in ${currency.toUpperCase()} cannot be applied`);
  }
  const now = await engine.time.now();
  const signed = kind === "credit" ? parsed.minorUnits : -parsed.minorUnits;
  const balanceCents = await engine.db.transaction((tx) => moveBalance(tx, now, customer.id, signed, { kind, description: input.description, currency, ...actor }));
  // the audit's before is the balance this movement started from (the row read above may be older: another invoice may have moved it since)
  return { before: { balanceCents: balanceCents - signed }, after: { balanceCents }, amountCents: parsed.minorUnits, currency };
}

/**
 * `POST /operator/subscriptions/{id}/trial` (DESIGN §6.3): a trial of `trialDays`, no charge during
 * it, kept across tier changes. On a paid period the unused time is credited to the balance; on free
 * it is a trial of starter. At its end a new period starts there and is charged.
 */
export async function startTrial(engine: Engine, subscriptionId: string, trialDays: number): Promise<{ before: SubscriptionRow; after: SubscriptionRow }> {
  return changeWithoutPayment(engine, async () => subscriptionId, async (tx, before, now) => {
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
    const after = await writeSubscription(tx, before, { status: "trialing", tier, planId: plan.id, trialEnd, currentPeriodStart: now, currentPeriodEnd: trialEnd, periodPaidCents: 0, periodCreditedCents: 0, updatedAt: now });
    if (tier !== before.tier) await recordTier(tx, before.platformId, tier, engine.time.wallNow());
    return { before, after };
  });
}

/** Everything due of one subscription, done now: renewals and trial ends, each collected (an override that ended a trial). */
async function bringUpToDate(engine: Engine, subscriptionId: string): Promise<SubscriptionRow> {
  await withUpToDateSubscription(engine, async () => subscriptionId, async () => undefined, engine.logger);
  return findSubscription(engine.db, subscriptionId);
}

/**
 * `PATCH /operator/subscriptions/{id}/override` (DESIGN §6.3): sets the tier and the trial's end
 * directly, without proration. A `trialEnd` in the past ends the trial now.
 */
export async function overrideSubscription(engine: Engine, subscriptionId: string, input: { planTier?: string; trialEnd?: number }) {
  if (input.planTier !== undefined && !TIERS.includes(input.planTier as Tier)) {
    throw badRequest(`planTier must be one of ${TIERS.join(", ")}`, [{ path: "planTier", message: `one of ${TIERS.join(", ")}`, code: "invalid_value" }]);
  }
  const { before } = await changeWithoutPayment(engine, async () => subscriptionId, async (tx, before, now) => {
    if (!before.current) throw conflict("SUBSCRIPTION_ENDED", `Subscription ${subscriptionId} has ended`);
    const set: Partial<SubscriptionRow> = { updatedAt: now };
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
    const after = await writeSubscription(tx, before, set);
    if (after.tier !== before.tier) await recordTier(tx, before.platformId, after.tier, engine.time.wallNow());
    return { before, after };
  });
  // a trial end in the past (or now) ends the trial at once
  return { before, after: await bringUpToDate(engine, subscriptionId) };
}

/**
 * `DELETE /subscriptions/{id}` (DESIGN §6.3): at the period's end, or with `immediately` at once,
 * without a refund: the platform returns to free.
 */
export async function cancelSubscription(engine: Engine, subscriptionId: string, immediately: boolean) {
  const before = await changeWithoutPayment(engine, async () => subscriptionId, async (tx, held, now) => {
    if (!held.current || held.tier === "free") throw conflict("NOT_SUBSCRIBED", `Subscription ${subscriptionId} is not a current paid subscription`);
    if (immediately) await returnToFree(engine, tx, held, now);
    else await writeSubscription(tx, held, { cancelAtPeriodEnd: true, updatedAt: now });
    return held;
  });
  return { before, after: await findSubscription(engine.db, subscriptionId) };
}

/** The invoice a request made (its retry finds it), or null. */
async function invoiceMadeBy(db: Db, requestKey: string): Promise<InvoiceRow | null> {
  const [row] = await db.select().from(invoices).where(eq(invoices.requestKey, requestKey));
  return row ?? null;
}

/** Runs `work` under the customer's current subscription's lease, with no payment of it in flight; without a subscription, as it is. */
async function underCustomerSubscription<T>(engine: Engine, customerId: string, work: () => Promise<T>): Promise<T> {
  const [current] = await engine.db.select({ id: subscriptions.id }).from(subscriptions).where(and(eq(subscriptions.customerId, customerId), eq(subscriptions.current, true)));
  if (!current) return work();
  return withSubscriptionLease(engine, current.id, async () => {
    await refuseWhileCollecting(engine.db, current.id);
    return work();
  });
}

/**
 * `POST /operator/invoices/generate` (DESIGN §6.4): invoices what is pending for the customer — a
 * carried debit — finalizes it open and collects it from the default payment method (DESIGN §6.9): a
 * refusal leaves it open for dunning's retries. Usage is not pending here: a period's usage is
 * invoiced by its close, once its grace has ended (DESIGN §6.5). Nothing pending: 409 NOTHING_TO_INVOICE.
 */
export async function generateInvoice(engine: Engine, input: { customerId: string; description?: string }, requestKey: string): Promise<InvoiceRow> {
  const earlier = await invoiceMadeBy(engine.db, requestKey);
  if (earlier) return answerCollected(earlier.collectionState !== null ? await checkCollection(engine, earlier.id, engine.logger) : earlier);
  await findCustomer(engine.db, input.customerId);
  const begun = await underCustomerSubscription(engine, input.customerId, async () => {
    const now = toSecond(await engine.time.now());
    return engine.db.transaction(async (tx) => {
      const priced = await priceUnderCustomerLock(tx, engine, input.customerId, [], { balance: "debit" });
      const { customer, amounts } = priced;
      if (amounts.lines.length === 0) throw conflict("NOTHING_TO_INVOICE", "Nothing is pending for this customer: no carried balance (usage is invoiced when its period closes)");
      if (amounts.chargeCents === 0 && amounts.carriedForwardCents === amounts.amountDueCents) {
        // a debit under the minimum charge would only be carried again, on a new invoice each time
        throw conflict("NOTHING_TO_INVOICE", `Only ${amounts.amountDueCents} cents are pending, under the minimum charge: they are collected with the next invoice`);
      }
      if (input.description) amounts.lines[0] = { ...amounts.lines[0]!, description: `${input.description} (${amounts.lines[0]!.description.toLowerCase()})` };
      const [current] = await tx.select().from(subscriptions).where(and(eq(subscriptions.customerId, customer.id), eq(subscriptions.current, true)));
      return openInvoice(tx, engine, now, {
        priced,
        platformId: customer.platformId ?? current?.platformId ?? "",
        subscriptionId: current?.id ?? null,
        reason: "manual",
        periodStart: now,
        periodEnd: now,
        requestKey,
        intent: { kind: "manual" },
        paymentMethodId: customer.defaultPaymentMethodId,
      });
    });
  });
  return answerCollected(await collectBegun(engine, begun, null, engine.logger));
}

/** A collected invoice as an answer: whatever it came to, unless its outcome is unknown yet (503 PAYMENT_PENDING). */
function answerCollected(invoice: InvoiceRow): InvoiceRow {
  if (invoice.collectionState !== null) throw new PaymentPending(invoice.id);
  return invoice;
}

/**
 * `POST /operator/invoices/{id}/pay` and the portal's "Pay now" (DESIGN §6.9): the next attempt of an
 * open invoice, now, with the customer's default card or the one given. Paid: the invoice; refused:
 * 402 (dunning counts it); unknown: 503 PAYMENT_PENDING, and the request's retry answers what that
 * attempt came to, never beginning another.
 */
export async function payInvoice(engine: Engine, invoiceId: string, input: { paymentMethodId?: string; platformId?: string }, requestKey: string): Promise<InvoiceRow> {
  const [found] = await engine.db.select().from(invoices).where(eq(invoices.id, invoiceId));
  if (!found || found.status === "draft" || (input.platformId !== undefined && found.platformId !== input.platformId)) throw resourceNotFound("invoice");
  if (found.attemptRequestKey === requestKey) return outcomeOfAttempt(found.collectionState !== null ? await checkCollection(engine, found.id, engine.logger) : found);
  if (input.paymentMethodId !== undefined) {
    const card = await engine.provider.find(input.paymentMethodId);
    if (!card || card.customerId !== found.customerId) throw resourceNotFound("payment method", "the invoice's customer has no such card");
  }
  const begin = async () => {
    const [fresh] = await engine.db.select().from(invoices).where(eq(invoices.id, invoiceId));
    // an uncollectible invoice may still be paid by hand (ADR 0021): the debt is settled, nothing is restored
    if (fresh!.status !== "open" && fresh!.status !== "uncollectible") throw conflict("INVOICE_NOT_OPEN", `Invoice ${invoiceId} is ${fresh!.status}; only an open or uncollectible invoice is paid`);
    if (fresh!.collectionState !== null) throw new ApiError(409, "PAYMENT_PENDING", `A payment of invoice ${invoiceId} is in progress already`, { invoiceId });
    const customer = await findCustomer(engine.db, fresh!.customerId);
    const begun = await beginAttempt(engine.db, engine, invoiceId, fresh!.attemptCount, input.paymentMethodId ?? customer.defaultPaymentMethodId, requestKey, fresh!.status);
    if (!begun) throw new ApiError(409, "PAYMENT_PENDING", `A payment of invoice ${invoiceId} began meanwhile`, { invoiceId });
    return begun;
  };
  const begun = found.subscriptionId ? await withSubscriptionLease(engine, found.subscriptionId, begin) : await begin();
  return outcomeOfAttempt(await collectBegun(engine, begun, null, engine.logger));
}

/**
 * `POST /operator/invoices/{id}/void` (DESIGN §6.4): an open invoice with no payment in flight is
 * void, and the balance it applied given back; a paid one cannot be (409), nor one being paid.
 */
export async function voidByOperator(engine: Engine, invoiceId: string, actor: Actor): Promise<{ before: InvoiceRow; after: InvoiceRow }> {
  const now = await engine.time.now();
  return engine.db.transaction(async (tx) => {
    const [before] = await tx.select().from(invoices).where(eq(invoices.id, invoiceId)).for("update");
    if (!before || before.status === "draft") throw resourceNotFound("invoice");
    if (before.status !== "open") throw conflict("INVOICE_NOT_OPEN", `Invoice ${invoiceId} is ${before.status}; only an open invoice can be voided`);
    if (before.collectionState !== null) throw new ApiError(409, "PAYMENT_PENDING", `A payment of invoice ${invoiceId} is in progress: it can be voided once its outcome is known`, { invoiceId });
    return { before, after: await voidInvoice(tx, before, now, actor) };
  });
}

/** What a request that began an attempt answers: the paid invoice, 402 with the provider's codes, or 503 while unknown. */
function outcomeOfAttempt(invoice: InvoiceRow): InvoiceRow {
  if (invoice.status === "paid") return invoice;
  return requireSettledPaid(invoice);
}

/**
 * `GET /operator/overview` (DESIGN §6.4, §6.12): monthly recurring revenue (the current prices of paid
 * subscriptions, active or past due), platforms by state and tier, and the revenue collected this
 * calendar month. The platforms are every platform the platform registry knows: one billing has not
 * read yet has no subscription row, and is on free (DESIGN §6.3), so it counts as an active free one.
 *
 * Set-based: billing's own counts are one grouped query; the registry's platforms come a page of ids
 * at a time (`platformIdPages`), and each page costs one query for how many of them billing has read.
 * When the registry cannot be asked, the overview still answers what billing knows — MRR and revenue
 * are billing's own and complete — with `platformCountsComplete: false`: the platform counts then
 * leave out the platforms billing has not read yet. A dashboard that shows something with a warning
 * is more use to an operator in an incident than a 503 (Stripe's dashboard does the same).
 */
export async function overview(engine: Engine, registryPlatformIds: () => AsyncIterable<string[]>) {
  const now = await engine.time.now();
  const groups = rowsOf<{ tier: string; status: string; platforms: string | number; seats: string | number }>(
    await engine.db.execute(
      sql`select ${subscriptions.tier} as tier, ${subscriptions.status} as status, count(*) as platforms, coalesce(sum(${subscriptions.quantity}), 0) as seats
            from ${subscriptions} where ${subscriptions.current} group by 1, 2`,
    ),
  );
  let unread = 0;
  let platformCountsComplete = true;
  try {
    for await (const ids of registryPlatformIds()) {
      if (ids.length === 0) continue;
      const [read] = await engine.db
        .select({ n: count() })
        .from(subscriptions)
        .where(and(eq(subscriptions.current, true), inArray(subscriptions.platformId, ids)));
      unread += ids.length - Number(read?.n ?? 0);
    }
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    engine.logger.warn({ err: err.message }, "overview without the platform registry: its platform counts are those billing has read");
    platformCountsComplete = false;
    unread = 0;
  }
  const byTier = Object.fromEntries(TIERS.map((t) => [t, 0])) as Record<Tier, number>;
  let mrrCents = 0;
  const platformsWith = (status: string, paid?: boolean) =>
    groups.filter((g) => g.status === status && (paid === undefined || (g.tier !== "free") === paid)).reduce((sum, g) => sum + Number(g.platforms), 0);
  for (const g of groups) {
    byTier[g.tier as Tier] = (byTier[g.tier as Tier] ?? 0) + Number(g.platforms);
    // a past_due subscription is still subscribed (its payment is being retried); a trial pays nothing yet
    if ((g.status === "active" || g.status === "past_due") && g.tier !== "free") mrrCents += engine.catalogue.plan(g.tier as Tier).priceCents * Number(g.seats);
  }
  byTier.free += unread;
  const monthStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  const [revenue] = rowsOf<{ cents: string | number | null }>(
    await engine.db.execute(
      sql`select coalesce(sum(${invoices.amountPaidCents}), 0) as cents from ${invoices} where ${invoices.status} = 'paid' and ${invoices.paidAt} >= ${monthStart.toISOString()} and ${invoices.paidAt} <= ${now.toISOString()}`,
    ),
  );
  return {
    currency: engine.catalogue.currency,
    mrrCents,
    activePlatforms: groups.filter((g) => g.status !== "canceled").reduce((sum, g) => sum + Number(g.platforms), 0) + unread,
    paidPlatforms: platformsWith("active", true),
    trialingPlatforms: platformsWith("trialing"),
    pastDuePlatforms: platformsWith("past_due"),
    platformsByTier: byTier,
    revenueThisMonthCents: Number(revenue?.cents ?? 0),
    platformCountsComplete,
  };
}
