import { and, asc, eq, isNull, lt, lte, ne, or } from "drizzle-orm";
import type { Logger } from "@core/kit";
import { isUniqueViolation, type Db } from "@core/storage";
import { findCustomer } from "./customers.js";
import { invoiceLines, invoices, subscriptions, type InvoiceRow, type SubscriptionRow } from "./db/schema.js";
import type { Engine } from "./engine.js";
import { createDraft, emitInvoiceEvent, finalizeDraft, markPaid, priceInvoice, subscriptionLine } from "./invoicing.js";
import { closePeriod, nextClose } from "./metering/close.js";
import { periodAt, periodOf } from "./periods.js";
import type { Tier } from "./plans.js";
import { HARD_DECLINES, type ChargeOutcome } from "./provider/types.js";
import { freeSubscription, lockUnderLease, withSubscriptionLease } from "./subscriptions.js";
import { recordTier } from "./tier-sync.js";

/** Retries of a refused renewal, in days after the first refusal (DESIGN §6.3). */
export const RETRY_DAYS = [1, 3, 5] as const;
const DAY_MS = 86_400_000;

const NO_PAYMENT_METHOD = { code: "no_payment_method", declineCode: null, hard: false };

type Failure = { code: string; declineCode: string | null; hard: boolean };

/** A charge of the customer's default payment method, or the reason there is none to make. */
async function chargeDefault(engine: Engine, invoice: InvoiceRow, key: string): Promise<{ paid: true } | ({ paid: false } & Failure)> {
  const chargeCents = invoice.amountDueCents - invoice.amountCarriedCents;
  if (chargeCents <= 0) return { paid: true };
  const customer = await findCustomer(engine.db, invoice.customerId);
  if (!customer.defaultPaymentMethodId) return { paid: false, ...NO_PAYMENT_METHOD };
  let outcome: ChargeOutcome;
  try {
    outcome = await engine.provider.charge({
      customerId: customer.id,
      paymentMethodId: customer.defaultPaymentMethodId,
      amountCents: chargeCents,
      currency: invoice.currency,
      invoiceId: invoice.id,
      idempotencyKey: key,
    });
  } catch {
    // the default card is gone (detached): as good as none
    return { paid: false, ...NO_PAYMENT_METHOD };
  }
  return outcome.status === "succeeded" ? { paid: true } : { paid: false, code: outcome.code, declineCode: outcome.declineCode, hard: outcome.hard };
}

/**
 * Ends a subscription and puts the platform back on free (DESIGN §6.3): the row keeps its id with
 * status `canceled`, and a new free row, anchored where the old one ended, becomes current.
 */
export async function returnToFree(engine: Engine, tx: Db, subscription: SubscriptionRow, at: Date): Promise<void> {
  await tx.update(subscriptions).set({ status: "canceled", current: false, canceledAt: at, leaseId: null, leaseUntil: null, updatedAt: at }).where(eq(subscriptions.id, subscription.id));
  await tx.insert(subscriptions).values(freeSubscription(engine.catalogue, subscription.platformId, at, subscription.customerId));
  await recordTier(tx, subscription.platformId, "free", engine.time.wallNow());
}

/**
 * Brings one subscription up to `now` while its lease is held (DESIGN §6.3): each period that ended
 * is renewed in order — a pending downgrade or cancellation takes effect, the next period opens and
 * its base price is invoiced once and charged, a trial's end starts a paid period there. A refused
 * renewal makes it `past_due`, for the retries; a refused trial end returns it to free.
 */
export async function advanceSubscription(engine: Engine, subscriptionId: string, now: Date, leaseId: string): Promise<void> {
  for (let guard = 0; guard < 1200; guard++) {
    const [subscription] = await engine.db.select().from(subscriptions).where(eq(subscriptions.id, subscriptionId));
    if (!subscription || !subscription.current || subscription.currentPeriodEnd > now) return;
    const at = subscription.currentPeriodEnd;
    if (subscription.cancelAtPeriodEnd) {
      await engine.db.transaction(async (tx) => {
        if (await lockUnderLease(tx, subscriptionId, leaseId)) await returnToFree(engine, tx, subscription, at);
      });
      return;
    }
    if (subscription.status === "trialing") {
      await endTrial(engine, subscription, at, leaseId);
      return;
    }
    const tier = (subscription.pendingTier ?? subscription.tier) as Tier;
    const quantity = subscription.pendingQuantity ?? subscription.quantity;
    const plan = engine.catalogue.plan(tier);
    const period = periodAt(subscription.billingAnchor, at);
    const rolled = { tier, planId: plan.id, pendingTier: null, quantity, pendingQuantity: null, currentPeriodStart: period.start, currentPeriodEnd: period.end, periodPaidCents: 0, periodCreditedCents: 0, updatedAt: at };
    if (tier === "free" || !subscription.customerId) {
      if (tier !== "free") {
        // a paid tier with nobody to bill (an operator's override of a free platform): back to free
        await engine.db.transaction(async (tx) => {
          if (await lockUnderLease(tx, subscriptionId, leaseId)) await returnToFree(engine, tx, subscription, at);
        });
        return;
      }
      await engine.db.transaction(async (tx) => {
        if (!(await lockUnderLease(tx, subscriptionId, leaseId))) return;
        await tx.update(subscriptions).set({ ...rolled, status: "active" }).where(eq(subscriptions.id, subscriptionId));
        if (subscription.tier !== tier) await recordTier(tx, subscription.platformId, tier, engine.time.wallNow());
      });
      continue;
    }
    const invoice = await engine.db.transaction(async (tx) => {
      if (!(await lockUnderLease(tx, subscriptionId, leaseId))) return null;
      const customer = await findCustomer(tx, subscription.customerId!);
      const amounts = priceInvoice({
        lines: [subscriptionLine(plan, quantity, period.start, period.end)],
        taxPercent: engine.taxPercent,
        balanceCents: customer.balanceCents,
      });
      let renewal: InvoiceRow;
      try {
        const draft = await createDraft(tx, at, { customer, platformId: subscription.platformId, subscriptionId, reason: "subscription_cycle", periodStart: period.start, periodEnd: period.end, amounts });
        renewal = await finalizeDraft(tx, at, draft.id, "open");
        // due at once: a replica that dies before its charge leaves it to the next pass, which charges
        // it with the same provider key (attempt 0), so a charge made before the crash is not made twice
        const [due] = await tx.update(invoices).set({ nextAttemptAt: at }).where(eq(invoices.id, renewal.id)).returning();
        renewal = due!;
      } catch (err) {
        // each (subscription, period) is invoiced once: the unique index holds against any race
        if (!isUniqueViolation(err, "invoices_one_cycle_per_period_key")) throw err;
        return null;
      }
      await tx.update(subscriptions).set({ ...rolled, status: subscription.status }).where(eq(subscriptions.id, subscriptionId));
      if (subscription.tier !== tier) await recordTier(tx, subscription.platformId, tier, engine.time.wallNow());
      return renewal;
    });
    if (!invoice) continue;
    await settleAttempt(engine, invoice, 0, at, leaseId);
  }
}

/** What an invoice charged for its period's subscription (its `subscription` lines): the most a later change may credit back. */
async function periodChargeOf(tx: Db, invoiceId: string): Promise<number> {
  const lines = await tx.select({ amountCents: invoiceLines.amountCents }).from(invoiceLines).where(and(eq(invoiceLines.invoiceId, invoiceId), eq(invoiceLines.kind, "subscription")));
  return lines.reduce((sum, line) => sum + line.amountCents, 0);
}

/**
 * Charges an open renewal invoice (attempt 0 at renewal, then the retries) and records the outcome:
 * paid makes the subscription active; a refusal schedules the next retry, or, when they are spent or
 * the decline is hard, makes the invoice uncollectible and returns the platform to free.
 */
async function settleAttempt(engine: Engine, invoice: InvoiceRow, attempt: number, at: Date, leaseId: string): Promise<void> {
  const result = await chargeDefault(engine, invoice, `cycle:${invoice.id}:${attempt}`);
  await engine.db.transaction(async (tx) => {
    if (!invoice.subscriptionId || !(await lockUnderLease(tx, invoice.subscriptionId, leaseId))) return;
    const [subscription] = await tx.select().from(subscriptions).where(eq(subscriptions.id, invoice.subscriptionId));
    if (result.paid) {
      await recordPaid(tx, invoice, subscription ?? null, at);
      return;
    }
    const attempts = attempt + 1;
    const spent = result.hard || attempts > RETRY_DAYS.length;
    const firstRefusal = invoice.finalizedAt ?? at;
    const [failed] = await tx
      .update(invoices)
      .set({
        attemptCount: attempts,
        lastDeclineCode: result.declineCode ?? result.code,
        status: spent ? "uncollectible" : "open",
        nextAttemptAt: spent ? null : new Date(firstRefusal.getTime() + RETRY_DAYS[attempt]! * DAY_MS),
      })
      .where(eq(invoices.id, invoice.id))
      .returning();
    await emitInvoiceEvent(tx, "invoice.payment_failed", failed!, at);
    if (!subscription?.current) return;
    if (spent) await returnToFree(engine, tx, subscription, at);
    else await tx.update(subscriptions).set({ status: "past_due", updatedAt: at }).where(eq(subscriptions.id, subscription.id));
  });
}

/**
 * An open invoice is paid (a charge of ours, or one Stripe reports by webhook): the invoice is
 * marked paid once (only an open one changes), and its current subscription is active again when
 * nothing else of it is owed. Runs in the transaction that holds the subscription's lease.
 */
export async function recordPaid(tx: Db, invoice: InvoiceRow, subscription: SubscriptionRow | null, at: Date): Promise<void> {
  await markPaid(tx, at, invoice);
  const paidForPeriod = subscription && invoice.reason !== "usage" && invoice.periodStart.getTime() === subscription.currentPeriodStart.getTime();
  if (!subscription?.current) return;
  // past due until nothing of it is owed any more (a renewal and a usage invoice may both be open)
  const [stillOwed] = await tx
    .select({ id: invoices.id })
    .from(invoices)
    .where(and(eq(invoices.subscriptionId, subscription.id), eq(invoices.status, "open"), ne(invoices.id, invoice.id)))
    .limit(1);
  await tx
    .update(subscriptions)
    .set({
      ...(subscription.status === "past_due" && !stillOwed ? { status: "active" as const } : {}),
      ...(paidForPeriod ? { periodPaidCents: await periodChargeOf(tx, invoice.id) } : {}),
      updatedAt: at,
    })
    .where(eq(subscriptions.id, subscription.id));
}

/**
 * The end of a trial (DESIGN §6.3): a new period starts there, the anchor moves to it, and it is
 * charged to the default payment method; with none, or a refused payment, the platform returns to free.
 */
async function endTrial(engine: Engine, subscription: SubscriptionRow, at: Date, leaseId: string): Promise<void> {
  const tier = (subscription.pendingTier ?? subscription.tier) as Tier;
  const quantity = subscription.pendingQuantity ?? subscription.quantity;
  const plan = engine.catalogue.plan(tier);
  const period = periodOf(at, 0);
  const customer = subscription.customerId ? await findCustomer(engine.db, subscription.customerId) : null;
  if (!customer || tier === "free") {
    await engine.db.transaction(async (tx) => {
      if (await lockUnderLease(tx, subscription.id, leaseId)) await returnToFree(engine, tx, subscription, at);
    });
    return;
  }
  const amounts = priceInvoice({
    lines: [subscriptionLine(plan, quantity, period.start, period.end)],
    taxPercent: engine.taxPercent,
    balanceCents: customer.balanceCents,
  });
  let draft: InvoiceRow;
  try {
    draft = await createDraft(engine.db, at, { customer, platformId: subscription.platformId, subscriptionId: subscription.id, reason: "trial_end", periodStart: period.start, periodEnd: period.end, amounts });
  } catch (err) {
    if (!isUniqueViolation(err, "invoices_one_cycle_per_period_key")) throw err;
    return;
  }
  const result = await chargeDefault(engine, draft, `trial:${draft.id}`);
  await engine.db.transaction(async (tx) => {
    if (!(await lockUnderLease(tx, subscription.id, leaseId))) return;
    if (!result.paid) {
      const voided = await finalizeDraft(tx, at, draft.id, "void");
      await emitInvoiceEvent(tx, "invoice.payment_failed", voided, at);
      await returnToFree(engine, tx, subscription, at);
      return;
    }
    await finalizeDraft(tx, at, draft.id, "paid");
    await tx
      .update(subscriptions)
      .set({
        status: "active",
        tier,
        planId: plan.id,
        pendingTier: null,
        quantity,
        pendingQuantity: null,
        billingAnchor: at,
        currentPeriodStart: period.start,
        currentPeriodEnd: period.end,
        periodPaidCents: plan.priceCents * quantity,
        periodCreditedCents: 0,
        updatedAt: at,
      })
      .where(eq(subscriptions.id, subscription.id));
    if (tier !== subscription.tier) await recordTier(tx, subscription.platformId, tier, engine.time.wallNow());
  });
}

/** A retry of a refused renewal that is due (DESIGN §6.3), under its subscription's lease. */
async function retryInvoice(engine: Engine, invoice: InvoiceRow, now: Date): Promise<void> {
  if (!invoice.subscriptionId) return;
  await withSubscriptionLease(engine.db, () => engine.time.wallNow(), invoice.subscriptionId, async (leaseId) => {
    const [fresh] = await engine.db.select().from(invoices).where(eq(invoices.id, invoice.id));
    if (!fresh || fresh.status !== "open" || !fresh.nextAttemptAt || fresh.nextAttemptAt > now) return;
    await settleAttempt(engine, fresh, fresh.attemptCount, fresh.nextAttemptAt, leaseId);
  });
}

/**
 * Retries a customer's open renewals at once: a new default payment method was given (DESIGN §6.3).
 */
export async function retryOpenInvoicesNow(engine: Engine, customerId: string): Promise<void> {
  const now = await engine.time.now();
  const open = await engine.db
    .select()
    .from(invoices)
    .where(and(eq(invoices.customerId, customerId), eq(invoices.status, "open")));
  for (const invoice of open) {
    if (!invoice.subscriptionId) continue;
    await withSubscriptionLease(engine.db, () => engine.time.wallNow(), invoice.subscriptionId, (leaseId) => settleAttempt(engine, invoice, invoice.attemptCount, now, leaseId));
  }
}

type Due =
  | { kind: "subscription"; row: SubscriptionRow; at: Date }
  | { kind: "retry"; row: InvoiceRow; at: Date }
  | { kind: "close"; row: { id: string; platformId: string; periodStart: Date }; at: Date };

/** The earliest thing due by `now`: a period's end (renewal, trial end, cancellation), a retry, or a period's close. */
async function nextDue(engine: Engine, now: Date, wallNow: Date): Promise<Due | null> {
  const { db } = engine;
  const [subscription] = await db
    .select()
    .from(subscriptions)
    .where(and(eq(subscriptions.current, true), lte(subscriptions.currentPeriodEnd, now), or(isNull(subscriptions.leaseUntil), lt(subscriptions.leaseUntil, wallNow))))
    .orderBy(asc(subscriptions.currentPeriodEnd), asc(subscriptions.id))
    .limit(1);
  const [retry] = await db
    .select()
    .from(invoices)
    .where(and(eq(invoices.status, "open"), lte(invoices.nextAttemptAt, now)))
    .orderBy(asc(invoices.nextAttemptAt), asc(invoices.id))
    .limit(1);
  const close = await nextClose(db, now, engine.usageGraceSeconds);
  const due: Due[] = [];
  if (subscription) due.push({ kind: "subscription", row: subscription, at: subscription.currentPeriodEnd });
  if (retry) due.push({ kind: "retry", row: retry, at: retry.nextAttemptAt! });
  if (close) due.push({ kind: "close", row: { id: `${close.platformId}@${close.periodStart.toISOString()}`, ...close }, at: close.at });
  // earliest first; at one instant a renewal before a close before a retry, so a close's invoice is charged after it is made
  const rank = { subscription: 0, close: 1, retry: 2 } as const;
  due.sort((a, b) => a.at.getTime() - b.at.getTime() || rank[a.kind] - rank[b.kind]);
  return due[0] ?? null;
}

/**
 * Runs everything due by `now` in time order — renewals, trial ends, cancellations, retries, period
 * closes — across all subscriptions (DESIGN §6.3, §6.5). Every replica runs it; leases keep two replicas off one
 * subscription, and the invoice's unique index keeps a period from being invoiced twice.
 */
export async function runDue(engine: Engine, now: Date, logger?: Logger): Promise<number> {
  let done = 0;
  for (let guard = 0; guard < 10_000; guard++) {
    const due = await nextDue(engine, now, engine.time.wallNow());
    if (!due) return done;
    try {
      if (due.kind === "retry") await retryInvoice(engine, due.row, now);
      else if (due.kind === "close") await closePeriod(engine, due.row.platformId, due.row.periodStart, due.at);
      // only what falls due at this instant: the next pass takes the next earliest, whoever's it is
      else await withSubscriptionLease(engine.db, () => engine.time.wallNow(), due.row.id, (leaseId) => advanceSubscription(engine, due.row.id, due.at, leaseId));
      done++;
    } catch (err) {
      logger?.error({ err: (err as Error).message, kind: due.kind, id: due.row.id }, "billing work failed; it is tried again on the next pass");
      return done;
    }
  }
  return done;
}

/** The worker of one replica: a pass every `intervalMs`, and at once when asked (the test clock). */
export class BillingWorker {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly engine: Engine,
    private readonly intervalMs: number,
    private readonly logger: Logger,
    private readonly alsoEachPass: () => Promise<unknown> = async () => {},
  ) {}

  start(): void {
    this.timer ??= setInterval(() => void this.pass(), this.intervalMs);
    this.timer.unref();
  }

  /** One pass, never two at once in this replica; answers how many items it handled. */
  pass(): Promise<number> {
    const next = this.running.then(async () => {
      const done = await runDue(this.engine, await this.engine.time.now(), this.logger);
      await this.alsoEachPass().catch((err: unknown) => this.logger.error({ err: (err as Error).message }, "billing side work failed"));
      return done;
    });
    this.running = next.catch(() => undefined);
    return next;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }
}
