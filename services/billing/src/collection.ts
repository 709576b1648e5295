import { and, eq, inArray, isNotNull, isNull, lte, ne, or, sql } from "drizzle-orm";
import { ApiError, type Logger } from "@core/kit";
import { rowsOf, type Db } from "@core/storage";
import { customers, invoiceLines, invoices, subscriptions, type Intent, type InvoiceRow, type SubscriptionRow } from "./db/schema.js";
import type { Engine } from "./engine.js";
import { createDraft, emitInvoiceEvent, finalizeDraft, giveBackBalance, intentOf, type NewInvoice } from "./invoicing.js";
import { mailPaymentFailed, mailReceipt } from "./mail/messages.js";
import { whileRenewing } from "./leases.js";
import { HARD_DECLINES, PaymentDeclined, type ChargeOutcome, type ChargeRequest } from "./provider/types.js";
import { returnToFree, writeSubscription } from "./subscriptions.js";
import { recordTier } from "./tier-sync.js";

/**
 * Collection (DESIGN §6.9): the invoice is the payment. Every path that takes money finalizes its
 * invoice `open`, with its intent and the attempt it starts, before the provider is asked; this
 * module is then the only caller of `provider.charge`. An attempt's provider key is
 * `<invoiceId>:<attempt>`. Its answer is one of three outcomes, each settled through one guarded
 * transition (a write names the status and attempt it expects, so a stale writer changes nothing):
 *
 * - succeeded: the invoice is `paid` and its intent applied, in one transaction;
 * - declined: a one-shot change (upgrade, tier, seats, trial end) voids its invoice; a renewal or a
 *   manual invoice counts a dunning attempt (DESIGN §6.3);
 * - unknown: the attempt stays, `pending`, and the worker asks the provider about it after 1, 2, 4 …
 *   minutes (at most an hour apart) until it knows; the invoice is never charged again meanwhile.
 *
 * Stripe's payment events settle through the same transitions, whichever comes first.
 */

/** Retries of a refused renewal, in days after the first refusal (DESIGN §6.3). */
export const RETRY_DAYS = [1, 3, 5] as const;
const DAY_MS = 86_400_000;

/** The wait before the n-th check of an attempt whose outcome is unknown: 1, 2, 4 … minutes, at most an hour. */
export const checkDelayMs = (checks: number) => Math.min(60_000 * 2 ** Math.min(checks, 10), 3_600_000);

/**
 * The statuses an attempt can be in flight from: `open`, and `uncollectible` paid by hand ("Pay now",
 * `POST /operator/invoices/{id}/pay`), as Stripe lets an uncollectible invoice be paid (ADR 0021).
 * `uncollectible → paid` happens here only, through the same guarded transitions, and settles the
 * debt without applying the invoice's intent: the plan dunning ended is not restored.
 */
export const PAYABLE = ["open", "uncollectible"] as const;
export type PayableStatus = (typeof PAYABLE)[number];

/** One-shot intents: a decline voids the invoice (nothing changes, or a trial ends on free). */
const ONE_SHOT = new Set<Intent["kind"]>(["upgrade", "change_tier", "seats", "trial_end"]);


/** 503 PAYMENT_PENDING: the provider's answer for the invoice is unknown yet; a retry with the same key learns the outcome. */
export class PaymentPending extends ApiError {
  constructor(readonly invoiceId: string) {
    super(
      503,
      "PAYMENT_PENDING",
      `The payment of invoice ${invoiceId} has an unknown outcome yet (the payment provider did not answer); nothing will be charged twice. Retry with the same idempotency key to learn the outcome`,
      { invoiceId },
      { "retry-after": "60" },
    );
    this.name = "PaymentPending";
  }
}

/** The invoice of a subscription whose payment is in flight, if there is one. */
export async function inFlightInvoice(db: Db, subscriptionId: string): Promise<InvoiceRow | null> {
  const [row] = await db
    .select()
    .from(invoices)
    .where(and(eq(invoices.subscriptionId, subscriptionId), isNotNull(invoices.collectionState)))
    .limit(1);
  return row ?? null;
}

/** 409 PAYMENT_PENDING: while an invoice of the subscription is being collected, nothing else of it changes (DESIGN §6.9). */
export async function refuseWhileCollecting(db: Db, subscriptionId: string): Promise<void> {
  const busy = await inFlightInvoice(db, subscriptionId);
  if (busy) {
    throw new ApiError(409, "PAYMENT_PENDING", `The payment of invoice ${busy.id} is still in progress: this subscription changes again once it is settled`, { invoiceId: busy.id });
  }
}

export interface OpenInvoice extends NewInvoice {
  intent: Intent;
  /** the card the first attempt charges (null: the customer has none, a decline without a charge) */
  paymentMethodId: string | null;
  /** `worker`: the first attempt is left to the worker, due at once (a period's close); default: begun here */
  firstAttempt?: "here" | "worker";
}

/**
 * Makes an invoice and finalizes it `open`, numbered, with its intent and its first attempt begun,
 * inside the caller's transaction: the charge that follows can only settle it. Nothing to charge (a
 * credit covers it, or it is under the minimum): it is `paid` at once and its intent applied.
 */
export async function openInvoice(tx: Db, engine: Engine, at: Date, input: OpenInvoice): Promise<InvoiceRow> {
  const draft = await createDraft(tx, at, input);
  await tx.update(invoices).set({ intent: input.intent }).where(eq(invoices.id, draft.id));
  const chargeCents = input.priced.amounts.chargeCents;
  if (chargeCents === 0) {
    const paid = await finalizeDraft(tx, at, draft.id, "paid", engine.tax.seller);
    await applyIntent(tx, engine, paid, at);
    return paid;
  }
  await finalizeDraft(tx, at, draft.id, "open", engine.tax.seller);
  if (input.firstAttempt === "worker") {
    const [due] = await tx.update(invoices).set({ nextAttemptAt: at }).where(eq(invoices.id, draft.id)).returning();
    return due!;
  }
  return (await beginAttempt(tx, engine, draft.id, 0, input.paymentMethodId))!;
}

/**
 * Begins the invoice's attempt `attempt` with `paymentMethodId` (guarded: the invoice is `from`, open
 * unless a person pays an uncollectible one, at that attempt with nothing in flight); null when
 * another writer got there first. The process that begins it holds it (`nextCheckAt`, a lease it
 * renews while it waits for the provider, `AttemptClaim`); once that runs out (the process died) the
 * worker asks the provider.
 */
export async function beginAttempt(
  tx: Db,
  engine: Engine,
  invoiceId: string,
  attempt: number,
  paymentMethodId: string | null,
  requestKey: string | null = null,
  from: PayableStatus = "open",
): Promise<InvoiceRow | null> {
  const wall = engine.time.wallNow();
  const [row] = await tx
    .update(invoices)
    .set({
      collectionState: "charging",
      collectionSince: wall,
      nextCheckAt: new Date(wall.getTime() + engine.leaseMs),
      checkCount: 0,
      chargePaymentMethodId: paymentMethodId,
      attemptRequestKey: requestKey,
      nextAttemptAt: null,
    })
    .where(and(eq(invoices.id, invoiceId), eq(invoices.status, from), eq(invoices.attemptCount, attempt), isNull(invoices.collectionState)))
    .returning();
  return row ?? null;
}

const requestOf = (invoice: InvoiceRow): ChargeRequest | null =>
  invoice.chargePaymentMethodId
    ? {
        customerId: invoice.customerId,
        paymentMethodId: invoice.chargePaymentMethodId,
        amountCents: invoice.amountDueCents - invoice.amountCarriedCents,
        currency: invoice.currency,
        invoiceId: invoice.id,
        attempt: invoice.attemptCount,
        idempotencyKey: `${invoice.id}:${invoice.attemptCount}`,
      }
    : null;

/** No card to charge: a refusal without a provider call, which dunning counts like any decline. */
const NO_PAYMENT_METHOD: ChargeOutcome = { status: "declined", paymentId: null, code: "no_payment_method", declineCode: null, hard: false };

/**
 * The claim of the process that sends an attempt, or asks the provider about it: the invoice's
 * `nextCheckAt` (wall-clock), a lease of `engine.leaseMs` renewed while the provider is waited for
 * (docs/vault/cross-cutting/security.md, Billing). Nobody else asks about the attempt while it holds;
 * a process that died frees it within a lease, and the worker (or the request's retry) asks then.
 */
class AttemptClaim {
  constructor(
    private readonly engine: Engine,
    private readonly invoiceId: string,
    private readonly attempt: number,
    private until: Date | null,
  ) {}

  static of(engine: Engine, invoice: InvoiceRow): AttemptClaim {
    return new AttemptClaim(engine, invoice.id, invoice.attemptCount, invoice.nextCheckAt);
  }

  hold<T>(work: () => Promise<T>): Promise<T> {
    return whileRenewing(
      this.engine.leaseMs,
      async () => {
        if (!this.until) return false;
        const next = new Date(this.engine.time.wallNow().getTime() + this.engine.leaseMs);
        const [renewed] = await this.engine.db
          .update(invoices)
          .set({ nextCheckAt: next })
          .where(and(eq(invoices.id, this.invoiceId), eq(invoices.attemptCount, this.attempt), isNotNull(invoices.collectionState), eq(invoices.nextCheckAt, this.until)))
          .returning({ id: invoices.id });
        if (renewed) this.until = next;
        return renewed !== undefined;
      },
      work,
    );
  }
}

/**
 * The one call of `provider.charge` (DESIGN §6.9), made holding the attempt's claim. It waits at
 * most the engine's charge deadline; an answer that comes later still settles the attempt, through
 * the same guarded transition.
 */
async function chargeAttempt(engine: Engine, invoice: InvoiceRow, claim: AttemptClaim, at: Date | null, logger?: Logger): Promise<ChargeOutcome> {
  const request = requestOf(invoice);
  if (!request) return NO_PAYMENT_METHOD;
  const call = engine.provider.charge(request).catch((err: unknown): ChargeOutcome => ({ status: "unknown", reason: (err as Error).message }));
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<"late">((resolve) => {
    timer = setTimeout(() => resolve("late"), engine.chargeDeadlineMs);
    timer.unref();
  });
  const first = await claim.hold(() => Promise.race([call, deadline]));
  clearTimeout(timer);
  if (first !== "late") return first;
  // the provider answers after we stopped waiting: what it says still settles the attempt, if nothing else did
  void call.then(async (late) => {
    if (late.status !== "unknown") await settle(engine, invoice.id, invoice.attemptCount, late, at).catch((err: unknown) => logger?.warn({ err: (err as Error).message, invoiceId: invoice.id }, "a late payment answer could not be recorded; the worker's check will"));
  });
  return { status: "unknown", reason: `no answer within ${engine.chargeDeadlineMs} ms` };
}

/**
 * Sends the attempt this process began (`openInvoice`, `beginAttempt`) and settles its answer;
 * answers the invoice as it stands then: `paid`, `void`, `open` (declined, dunning goes on) or `open`
 * with a collection still in flight (unknown). `at` is the billing time the payment counts at
 * (a renewal's period end); default now.
 */
export async function collectBegun(engine: Engine, invoice: InvoiceRow, at: Date | null = null, logger?: Logger): Promise<InvoiceRow> {
  if (!(PAYABLE as readonly string[]).includes(invoice.status) || invoice.collectionState === null) return invoice;
  const outcome = await chargeAttempt(engine, invoice, AttemptClaim.of(engine, invoice), at, logger);
  engine.metrics.collectionOutcome(outcome);
  return settle(engine, invoice.id, invoice.attemptCount, outcome, at);
}

/**
 * Asks about an attempt whose outcome is unknown, or whose process stopped waiting (the worker, and a
 * retry of the request that began it), once its check is due: the provider's record of the key
 * settles it; when the provider has none, the same request is sent again under the same key, which
 * charges at most once. Not due yet: the invoice as it is.
 */
export async function checkCollection(engine: Engine, invoiceId: string, logger?: Logger): Promise<InvoiceRow> {
  const wall = engine.time.wallNow();
  const [due] = await engine.db
    .select()
    .from(invoices)
    .where(and(eq(invoices.id, invoiceId), inArray(invoices.status, PAYABLE), isNotNull(invoices.collectionState), lte(invoices.nextCheckAt, wall)));
  if (!due) return currentInvoice(engine.db, invoiceId);
  // claimed for this check, held while the provider is asked: another replica's worker waits for it
  const [claimed] = await engine.db
    .update(invoices)
    .set({ nextCheckAt: new Date(wall.getTime() + engine.leaseMs) })
    .where(and(eq(invoices.id, invoiceId), eq(invoices.attemptCount, due.attemptCount), eq(invoices.nextCheckAt, due.nextCheckAt!)))
    .returning();
  if (!claimed) return currentInvoice(engine.db, invoiceId);
  const claim = AttemptClaim.of(engine, claimed);
  const request = requestOf(claimed);
  let outcome: ChargeOutcome;
  if (!request) outcome = NO_PAYMENT_METHOD;
  else {
    const found = await claim.hold(() => engine.provider.findCharge({ ...request, since: claimed.collectionSince ?? wall })).catch((err: unknown): ChargeOutcome => ({ status: "unknown", reason: (err as Error).message }));
    outcome = found.status === "none" ? await chargeAttempt(engine, claimed, claim, null, logger) : found;
  }
  engine.metrics.collectionOutcome(outcome);
  return settle(engine, invoiceId, claimed.attemptCount, outcome, null);
}

/**
 * The payments a request left in flight when its process died (its idempotency lease ran out
 * unrenewed, `IdempotencyKeys`): nobody waits for their answer any more, so their check is due now,
 * and the request's retry asks the provider at once instead of waiting out the attempt's claim.
 */
export async function askNowAboutPayments(engine: Engine, requestKey: string): Promise<void> {
  await engine.db
    .update(invoices)
    .set({ nextCheckAt: engine.time.wallNow() })
    .where(and(isNotNull(invoices.collectionState), or(eq(invoices.requestKey, requestKey), eq(invoices.attemptRequestKey, requestKey))));
}

async function currentInvoice(db: Db, invoiceId: string): Promise<InvoiceRow> {
  const [row] = await db.select().from(invoices).where(eq(invoices.id, invoiceId));
  return row!;
}

/**
 * Records an attempt's outcome (the engine's own answer, a check's, Stripe's event): the one set of
 * guarded transitions. A success pays any open invoice (money arrived for it); a decline or an
 * unknown outcome only touches the attempt it is about. Answers the invoice as it stands after.
 */
export async function settle(engine: Engine, invoiceId: string, attempt: number, outcome: ChargeOutcome, at: Date | null): Promise<InvoiceRow> {
  const when = at ?? (await engine.time.now());
  if (outcome.status === "succeeded") return settlePaid(engine, invoiceId, outcome.paymentId, when);
  if (outcome.status === "declined") return settleDeclined(engine, invoiceId, attempt, outcome, when);
  return settleUnknown(engine, invoiceId, attempt, when);
}

/**
 * Paid: the invoice leaves `open` once, and its intent is applied in the same transaction. An
 * uncollectible invoice paid by hand leaves `uncollectible` once, and its intent is not applied: the
 * debt is settled, the subscription dunning ended stays ended (ADR 0021).
 */
async function settlePaid(engine: Engine, invoiceId: string, paymentId: string, at: Date): Promise<InvoiceRow> {
  return engine.db.transaction(async (tx) => {
    const [before] = await tx.select({ status: invoices.status }).from(invoices).where(eq(invoices.id, invoiceId)).for("update");
    if (!before || !(PAYABLE as readonly string[]).includes(before.status)) return currentInvoice(tx, invoiceId);
    const [paid] = await tx
      .update(invoices)
      .set({
        status: "paid",
        paidAt: at,
        amountPaidCents: sql`${invoices.amountDueCents} - ${invoices.amountCarriedCents}`,
        paymentId,
        collectionState: null,
        nextCheckAt: null,
        nextAttemptAt: null,
      })
      .where(and(eq(invoices.id, invoiceId), eq(invoices.status, before.status as PayableStatus)))
      .returning();
    if (!paid) return currentInvoice(tx, invoiceId);
    if (before.status === "open") await applyIntent(tx, engine, paid, at);
    await emitInvoiceEvent(tx, "invoice.paid", paid, at);
    await mailReceipt(tx, engine, paid);
    return paid;
  });
}

/** Declined: a one-shot change voids its invoice; a renewal or manual invoice counts a dunning attempt. */
async function settleDeclined(engine: Engine, invoiceId: string, attempt: number, outcome: Extract<ChargeOutcome, { status: "declined" }>, at: Date): Promise<InvoiceRow> {
  return engine.db.transaction(async (tx) => {
    const [invoice] = await tx
      .update(invoices)
      .set({ collectionState: null, nextCheckAt: null, lastFailureCode: outcome.code, lastDeclineCode: outcome.declineCode })
      .where(and(eq(invoices.id, invoiceId), inArray(invoices.status, PAYABLE), eq(invoices.attemptCount, attempt), isNotNull(invoices.collectionState)))
      .returning();
    if (!invoice) return currentInvoice(tx, invoiceId);
    if (invoice.status === "uncollectible") {
      // a person's payment of a debt was refused: it stays uncollectible, no dunning; the next attempt gets a new key
      const [refused] = await tx.update(invoices).set({ attemptCount: attempt + 1 }).where(eq(invoices.id, invoiceId)).returning();
      await emitInvoiceEvent(tx, "invoice.payment_failed", refused!, at);
      return refused!;
    }
    const intent = intentOf(invoice);
    const subscription = invoice.subscriptionId ? await lockSubscription(tx, invoice.subscriptionId) : null;
    if (ONE_SHOT.has(intent.kind)) {
      await emitInvoiceEvent(tx, "invoice.payment_failed", invoice, at);
      const voided = await voidInvoice(tx, invoice, at, { actorType: "system", actorId: null });
      // a trial that could not be paid ends on free (DESIGN §6.3); the other changes change nothing
      if (intent.kind === "trial_end" && subscription?.current) await returnToFree(engine, tx, subscription, at);
      await mailPaymentFailed(tx, engine, voided, attempt);
      return voided;
    }
    const attempts = attempt + 1;
    const spent = outcome.hard || HARD_DECLINES.has(outcome.declineCode ?? outcome.code) || attempts > RETRY_DAYS.length;
    const firstRefusal = invoice.finalizedAt ?? at;
    const [failed] = await tx
      .update(invoices)
      .set({
        attemptCount: attempts,
        status: spent ? "uncollectible" : "open",
        nextAttemptAt: spent ? null : new Date(firstRefusal.getTime() + RETRY_DAYS[attempt]! * DAY_MS),
      })
      .where(eq(invoices.id, invoiceId))
      .returning();
    await emitInvoiceEvent(tx, "invoice.payment_failed", failed!, at);
    if (spent) await emitInvoiceEvent(tx, "invoice.marked_uncollectible", failed!, at);
    await mailPaymentFailed(tx, engine, failed!, attempt);
    if (intent.kind === "renewal" && subscription?.current) {
      if (spent) await returnToFree(engine, tx, subscription, at);
      else if (subscription.status !== "past_due") await writeSubscription(tx, subscription, { status: "past_due", updatedAt: at });
    }
    return failed!;
  });
}

/** Unknown: the attempt stays in flight, asked about again later; the first time, `invoice.payment_pending` goes out. */
async function settleUnknown(engine: Engine, invoiceId: string, attempt: number, at: Date): Promise<InvoiceRow> {
  return engine.db.transaction(async (tx) => {
    const [before] = rowsOf<{ collection_state: string | null; check_count: number }>(
      await tx.execute(sql`select collection_state, check_count from billing.invoices where id = ${invoiceId} and status in ('open', 'uncollectible') and attempt_count = ${attempt} for update`),
    );
    if (!before?.collection_state) return currentInvoice(tx, invoiceId);
    const checks = Number(before.check_count);
    const [pending] = await tx
      .update(invoices)
      .set({ collectionState: "pending", checkCount: checks + 1, nextCheckAt: new Date(engine.time.wallNow().getTime() + checkDelayMs(checks)) })
      .where(eq(invoices.id, invoiceId))
      .returning();
    if (before.collection_state === "charging") await emitInvoiceEvent(tx, "invoice.payment_pending", pending!, at);
    return pending!;
  });
}

async function lockSubscription(tx: Db, subscriptionId: string): Promise<SubscriptionRow | null> {
  rowsOf(await tx.execute(sql`select id from billing.subscriptions where id = ${subscriptionId} for update`));
  const [row] = await tx.select().from(subscriptions).where(eq(subscriptions.id, subscriptionId));
  return row ?? null;
}

/** What an invoice charged for its period's subscription (its `subscription` lines): the most a later change may credit back. */
async function subscriptionChargeOf(tx: Db, invoiceId: string): Promise<number> {
  const lines = await tx.select({ amountCents: invoiceLines.amountCents }).from(invoiceLines).where(and(eq(invoiceLines.invoiceId, invoiceId), eq(invoiceLines.kind, "subscription")));
  return lines.reduce((sum, line) => sum + line.amountCents, 0);
}

/**
 * What becomes true once the invoice is paid (DESIGN §6.9), in the paying transaction. Nothing else
 * changes a subscription while its invoice is collected (`refuseWhileCollecting`), so the intent
 * meets the subscription it was priced on.
 */
async function applyIntent(tx: Db, engine: Engine, invoice: InvoiceRow, at: Date): Promise<void> {
  const intent = intentOf(invoice);
  const subscription = invoice.subscriptionId ? await lockSubscription(tx, invoice.subscriptionId) : null;
  if (!subscription?.current) return;
  const wall = engine.time.wallNow();
  switch (intent.kind) {
    case "upgrade": {
      await tx.update(customers).set({ defaultPaymentMethodId: intent.paymentMethodId, updatedAt: at }).where(eq(customers.id, invoice.customerId));
      await writeSubscription(tx, subscription, {
        customerId: invoice.customerId,
        tier: intent.tier,
        planId: intent.planId,
        status: "active",
        billingAnchor: invoice.periodStart,
        currentPeriodStart: invoice.periodStart,
        currentPeriodEnd: invoice.periodEnd,
        cancelAtPeriodEnd: false,
        pendingTier: null,
        quantity: intent.quantity,
        pendingQuantity: null,
        ...(intent.metadata ? { metadata: intent.metadata } : {}),
        periodPaidCents: await subscriptionChargeOf(tx, invoice.id),
        periodCreditedCents: 0,
        updatedAt: at,
      });
      await recordTier(tx, subscription.platformId, intent.tier, wall);
      return;
    }
    case "change_tier":
    case "seats": {
      if (intent.defaultPaymentMethodId) {
        await tx.update(customers).set({ defaultPaymentMethodId: intent.defaultPaymentMethodId, updatedAt: at }).where(eq(customers.id, invoice.customerId));
      }
      await writeSubscription(tx, subscription, {
        tier: intent.tier,
        planId: intent.planId,
        quantity: intent.quantity,
        // only what was asked for calls off a waiting change: seats never touch a waiting tier or the cancellation (DESIGN §6.9)
        ...(intent.clearPendingTier ? { pendingTier: null } : {}),
        ...(intent.clearPendingQuantity ? { pendingQuantity: null } : {}),
        ...(intent.cancelAtPeriodEnd !== null ? { cancelAtPeriodEnd: intent.cancelAtPeriodEnd } : {}),
        periodPaidCents: subscription.periodPaidCents + intent.chargedCents,
        periodCreditedCents: subscription.periodCreditedCents + intent.creditedCents,
        updatedAt: at,
      });
      if (intent.tier !== subscription.tier) await recordTier(tx, subscription.platformId, intent.tier, wall);
      return;
    }
    case "trial_end": {
      await writeSubscription(tx, subscription, {
        status: "active",
        tier: intent.tier,
        planId: intent.planId,
        pendingTier: null,
        quantity: intent.quantity,
        pendingQuantity: null,
        billingAnchor: invoice.periodStart,
        currentPeriodStart: invoice.periodStart,
        currentPeriodEnd: invoice.periodEnd,
        periodPaidCents: await subscriptionChargeOf(tx, invoice.id),
        periodCreditedCents: 0,
        updatedAt: at,
      });
      if (intent.tier !== subscription.tier) await recordTier(tx, subscription.platformId, intent.tier, wall);
      return;
    }
    case "renewal":
    case "manual": {
      const forThisPeriod = invoice.reason !== "usage" && invoice.reason !== "manual" && invoice.periodStart.getTime() === subscription.currentPeriodStart.getTime();
      // past due until nothing of it is owed any more (a renewal and a usage invoice may both be open)
      const [stillOwed] = await tx
        .select({ id: invoices.id })
        .from(invoices)
        .where(and(eq(invoices.subscriptionId, subscription.id), eq(invoices.status, "open"), ne(invoices.id, invoice.id)))
        .limit(1);
      const active = subscription.status === "past_due" && !stillOwed;
      if (!forThisPeriod && !active) return;
      await writeSubscription(tx, subscription, {
        ...(active ? { status: "active" as const } : {}),
        ...(forThisPeriod ? { periodPaidCents: subscription.periodPaidCents + (await subscriptionChargeOf(tx, invoice.id)) } : {}),
        updatedAt: at,
      });
      return;
    }
  }
}

/**
 * Voids an open invoice inside the caller's transaction (a declined change, an operator's void):
 * the balance it moved is given back, and `invoice.voided` goes out. Only an open invoice with no
 * payment in flight is voided; answers null otherwise.
 */
export async function voidInvoice(tx: Db, invoice: InvoiceRow, at: Date, actor: { actorType: string; actorId: string | null }): Promise<InvoiceRow> {
  const [voided] = await tx
    .update(invoices)
    .set({ status: "void", voidedAt: at, nextAttemptAt: null, collectionState: null, nextCheckAt: null })
    .where(and(eq(invoices.id, invoice.id), eq(invoices.status, "open"), isNull(invoices.collectionState)))
    .returning();
  if (!voided) return currentInvoice(tx, invoice.id);
  await giveBackBalance(tx, at, voided, actor);
  await emitInvoiceEvent(tx, "invoice.voided", voided, at);
  return voided;
}

/**
 * What a request that collected `invoice` answers: its intent's result when paid; 402 with the
 * provider's codes when declined; 503 PAYMENT_PENDING while the outcome is unknown.
 */
export function requireSettledPaid(invoice: InvoiceRow): InvoiceRow {
  if (invoice.status === "paid") return invoice;
  if (invoice.collectionState !== null) throw new PaymentPending(invoice.id);
  throw new PaymentDeclined(invoice.lastFailureCode ?? "card_declined", invoice.lastDeclineCode);
}
