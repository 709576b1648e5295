import { and, eq, isNull } from "drizzle-orm";
import type { Logger } from "@core/kit";
import { rowsOf, type Db } from "@core/storage";
import { sql } from "drizzle-orm";
import { checkRefund } from "./credit-notes.js";
import { beginAttempt, checkCollection, collectBegun, inFlightInvoice, openInvoice, refuseWhileCollecting } from "./collection.js";
import { findCustomer } from "./customers.js";
import { invoices, subscriptions, workBackoff, type InvoiceRow, type SubscriptionRow } from "./db/schema.js";
import type { Engine } from "./engine.js";
import { priceUnderCustomerLock, subscriptionLine } from "./invoicing.js";
import { closePeriod } from "./metering/close.js";
import { periodAt, periodOf } from "./periods.js";
import type { Tier } from "./plans.js";
import { changeInProgress, lockUnderLease, returnToFree, toSecond, withSubscriptionLease, writeSubscription } from "./subscriptions.js";
import { recordTier } from "./tier-sync.js";

export { RETRY_DAYS } from "./collection.js";

/** A period that was invoiced already while its subscription still shows it unrenewed: a fault to look at, not to retry blindly. */
async function refuseSecondCycle(tx: Db, subscriptionId: string, periodStart: Date): Promise<void> {
  const [made] = await tx
    .select({ id: invoices.id })
    .from(invoices)
    .where(and(eq(invoices.subscriptionId, subscriptionId), eq(invoices.periodStart, periodStart), sql`${invoices.reason} in ('subscription_cycle', 'trial_end')`));
  if (made) throw new Error(`subscription ${subscriptionId}: the period from ${periodStart.toISOString()} was invoiced already (${made.id})`);
}

/**
 * Brings one subscription up to `now` while its lease is held (DESIGN §6.3): each period that ended
 * is renewed in order — a pending downgrade or cancellation takes effect, the next period opens and
 * its base price is invoiced once — until one needs a payment. That invoice, open with its first
 * attempt begun, is answered for the caller to collect once the lease is released; nothing more of
 * the subscription moves until its payment is settled. A trial's end is invoiced the same way.
 */
export async function advanceSubscription(engine: Engine, subscriptionId: string, now: Date, leaseId: string): Promise<InvoiceRow | null> {
  for (;;) {
    const [subscription] = await engine.db.select().from(subscriptions).where(eq(subscriptions.id, subscriptionId));
    if (!subscription || !subscription.current || subscription.currentPeriodEnd > now) return null;
    // a payment in flight holds the subscription where it is until it is settled (DESIGN §6.9)
    if (await inFlightInvoice(engine.db, subscriptionId)) return null;
    const at = subscription.currentPeriodEnd;
    if (subscription.cancelAtPeriodEnd) {
      await engine.db.transaction(async (tx) => {
        if (await lockUnderLease(tx, subscriptionId, leaseId)) await returnToFree(engine, tx, subscription, at);
      });
      return null;
    }
    if (subscription.status === "trialing") return endTrial(engine, subscription, at, leaseId);
    const tier = (subscription.pendingTier ?? subscription.tier) as Tier;
    const quantity = subscription.pendingQuantity ?? subscription.quantity;
    const plan = engine.catalogue.plan(tier);
    const period = periodAt(subscription.billingAnchor, at);
    const rolled = { tier, planId: plan.id, pendingTier: null, quantity, pendingQuantity: null, currentPeriodStart: period.start, currentPeriodEnd: period.end, periodPaidCents: 0, periodCreditedCents: 0, updatedAt: at };
    if (tier !== "free" && !subscription.customerId) {
      // a paid tier with nobody to bill (an operator's override of a free platform): back to free
      await engine.db.transaction(async (tx) => {
        if (await lockUnderLease(tx, subscriptionId, leaseId)) await returnToFree(engine, tx, subscription, at);
      });
      return null;
    }
    const due = await engine.db.transaction(async (tx): Promise<InvoiceRow | "stop" | null> => {
      if (!(await lockUnderLease(tx, subscriptionId, leaseId))) return "stop";
      await writeSubscription(tx, subscription, { ...rolled, status: tier === "free" ? "active" : subscription.status });
      if (subscription.tier !== tier) await recordTier(tx, subscription.platformId, tier, engine.time.wallNow());
      if (tier === "free") return null;
      await refuseSecondCycle(tx, subscriptionId, period.start);
      const priced = await priceUnderCustomerLock(tx, engine, subscription.customerId!, [subscriptionLine(plan, quantity, period.start, period.end)]);
      const renewal = await openInvoice(tx, engine, at, {
        priced,
        platformId: subscription.platformId,
        subscriptionId,
        reason: "subscription_cycle",
        periodStart: period.start,
        periodEnd: period.end,
        intent: { kind: "renewal", tier, planId: plan.id, quantity },
        paymentMethodId: priced.customer.defaultPaymentMethodId,
      });
      return renewal.status === "open" ? renewal : null;
    });
    if (due === "stop") return null;
    if (due) return due;
  }
}

/**
 * The end of a trial (DESIGN §6.3): a new period starts there, the anchor moves to it, and it is
 * invoiced to the default payment method; paid, the subscription is active on it; refused, or with
 * nobody to bill, the platform returns to free.
 */
async function endTrial(engine: Engine, subscription: SubscriptionRow, at: Date, leaseId: string): Promise<InvoiceRow | null> {
  const tier = (subscription.pendingTier ?? subscription.tier) as Tier;
  const quantity = subscription.pendingQuantity ?? subscription.quantity;
  const plan = engine.catalogue.plan(tier);
  const period = periodOf(at, 0);
  return engine.db.transaction(async (tx) => {
    if (!(await lockUnderLease(tx, subscription.id, leaseId))) return null;
    if (!subscription.customerId || tier === "free") {
      await returnToFree(engine, tx, subscription, at);
      return null;
    }
    await refuseSecondCycle(tx, subscription.id, period.start);
    const priced = await priceUnderCustomerLock(tx, engine, subscription.customerId, [subscriptionLine(plan, quantity, period.start, period.end)]);
    const invoice = await openInvoice(tx, engine, at, {
      priced,
      platformId: subscription.platformId,
      subscriptionId: subscription.id,
      reason: "trial_end",
      periodStart: period.start,
      periodEnd: period.end,
      intent: { kind: "trial_end", tier, planId: plan.id, quantity },
      paymentMethodId: priced.customer.defaultPaymentMethodId,
    });
    return invoice.status === "open" ? invoice : null;
  });
}

/**
 * Runs `change` holding the subscription's lease once everything due of it has happened: a renewal
 * or trial end that comes due is collected first, outside the lease, as the worker would. `locate`
 * names the subscription again each round (a renewal may have ended it and made another current).
 */
export async function withUpToDateSubscription<T>(engine: Engine, locate: () => Promise<string>, change: (leaseId: string, now: Date, subscriptionId: string) => Promise<T>, logger?: Logger): Promise<T> {
  for (;;) {
    const subscriptionId = await locate();
    const step = await withSubscriptionLease(engine, subscriptionId, async (leaseId): Promise<{ due: InvoiceRow } | { done: T }> => {
      const now = toSecond(await engine.time.now());
      const due = await advanceSubscription(engine, subscriptionId, now, leaseId);
      return due ? { due } : { done: await change(leaseId, now, subscriptionId) };
    });
    if ("done" in step) return step.done;
    await collectBegun(engine, step.due, step.due.finalizedAt, logger);
  }
}

/**
 * A change of one subscription that moves no money (a trial, an override, a cancellation): under its
 * lease once it is up to date, refused while a payment of it is in flight (DESIGN §6.9), in one
 * transaction that holds the row, given as it was before.
 */
export async function changeWithoutPayment<T>(engine: Engine, locate: () => Promise<string>, change: (tx: Db, before: SubscriptionRow, now: Date) => Promise<T>): Promise<T> {
  return withUpToDateSubscription(
    engine,
    locate,
    async (leaseId, now, subscriptionId) => {
      await refuseWhileCollecting(engine.db, subscriptionId);
      return engine.db.transaction(async (tx) => {
        const before = await lockUnderLease(tx, subscriptionId, leaseId);
        if (!before) throw changeInProgress();
        return change(tx, before, now);
      });
    },
    engine.logger,
  );
}

/**
 * A retry of an open invoice (dunning, DESIGN §6.3; a usage invoice's first charge): attempt
 * `attemptCount` begins with the customer's default card under the subscription's lease, then is
 * collected. Answers the invoice as it stands after, or null when it was not due any more.
 */
async function retryInvoice(engine: Engine, invoiceId: string, now: Date, logger?: Logger): Promise<InvoiceRow | null> {
  const begin = async (db: Db): Promise<InvoiceRow | null> => {
    const [fresh] = await db.select().from(invoices).where(and(eq(invoices.id, invoiceId), eq(invoices.status, "open"), isNull(invoices.collectionState)));
    if (!fresh || !fresh.nextAttemptAt || fresh.nextAttemptAt > now) return null;
    if (fresh.subscriptionId && (await inFlightInvoice(db, fresh.subscriptionId))) return null;
    const customer = await findCustomer(db, fresh.customerId);
    return beginAttempt(db, engine, fresh.id, fresh.attemptCount, customer.defaultPaymentMethodId);
  };
  const [due] = await engine.db.select({ subscriptionId: invoices.subscriptionId, at: invoices.nextAttemptAt }).from(invoices).where(eq(invoices.id, invoiceId));
  if (!due) return null;
  const begun = due.subscriptionId ? await withSubscriptionLease(engine, due.subscriptionId, () => begin(engine.db)) : await begin(engine.db);
  return begun ? collectBegun(engine, begun, due.at, logger) : null;
}

/** Retries a customer's refused invoices at once: a new default payment method was given (DESIGN §6.3). */
export async function retryOpenInvoicesNow(engine: Engine, customerId: string, logger?: Logger): Promise<void> {
  const now = await engine.time.now();
  const refused = await engine.db
    .select({ id: invoices.id })
    .from(invoices)
    .where(and(eq(invoices.customerId, customerId), eq(invoices.status, "open"), isNull(invoices.collectionState)));
  for (const { id } of refused) {
    // due now: the retry's begin checks it again under the subscription's lease
    await engine.db.update(invoices).set({ nextAttemptAt: now }).where(and(eq(invoices.id, id), eq(invoices.status, "open"), isNull(invoices.collectionState)));
    await retryInvoice(engine, id, now, logger);
  }
}

/** One due item of the worker (DESIGN §6.9): each has its own next time, and its own backoff when it fails. */
type Due =
  | { kind: "check"; id: string; platformId: string; at: Date }
  | { kind: "refund"; id: string; platformId: string; at: Date }
  | { kind: "subscription"; id: string; platformId: string; at: Date }
  | { kind: "retry"; id: string; platformId: string; at: Date }
  | { kind: "close"; id: string; platformId: string; periodStart: Date; at: Date };

const itemOf = (due: Pick<Due, "kind" | "id">) => `${due.kind}:${due.id}`;
/** Items a replica works on at once: one provider that hangs for one customer holds one of them. */
const CONCURRENCY = 4;
const backoffMs = (failures: number) => Math.min(1_000 * 2 ** Math.min(failures, 12), 300_000);

/**
 * Not in backoff, and of no platform this replica is working on: the SQL condition on an item. One
 * platform's items go one at a time, in time order (a renewal before the close after it), and never
 * lock the same rows at once.
 */
const available = (item: ReturnType<typeof sql>, platform: ReturnType<typeof sql>, wall: Date, busy: string[]) =>
  sql`not exists (select 1 from billing.work_backoff b where b.item = ${item} and b.not_before > ${wall.toISOString()}::timestamptz)
      ${busy.length > 0 ? sql`and ${platform} not in (${sql.join(busy.map((k) => sql`${k}`), sql`, `)})` : sql``}`;

const time = (value: Date | string) => (value instanceof Date ? value : new Date(value));

/**
 * The next item due: a check of a payment whose outcome is unknown (first: it frees a subscription),
 * else the earliest by billing time of a period's end (renewal, trial end, cancellation), a period's
 * close and a dunning retry — at one instant in that order, so a close's invoice is charged after it is
 * made. A subscription whose payment is in flight, or whose lease another holds, waits.
 */
async function nextDue(engine: Engine, now: Date, wall: Date, busy: string[]): Promise<Due | null> {
  const { db } = engine;
  const [check] = rowsOf<{ id: string; platform_id: string; at: Date | string }>(
    await db.execute(sql`select id, platform_id, next_check_at as at from billing.invoices i
      where collection_state is not null and next_check_at <= ${wall.toISOString()}::timestamptz and ${available(sql`'check:' || i.id`, sql`i.platform_id`, wall, busy)}
      order by next_check_at, id limit 1`),
  );
  if (check) return { kind: "check", id: check.id, platformId: check.platform_id, at: time(check.at) };
  // a credit note's refund whose outcome is unknown (DESIGN §6.10): asked again with its key, as a payment check is
  const [refund] = rowsOf<{ id: string; platform_id: string; at: Date | string }>(
    await db.execute(sql`select n.id, i.platform_id, n.refund_next_check_at as at from billing.credit_notes n join billing.invoices i on i.id = n.invoice_id
      where n.refund_state = 'pending' and n.refund_next_check_at <= ${wall.toISOString()}::timestamptz and ${available(sql`'refund:' || n.id`, sql`i.platform_id`, wall, busy)}
      order by n.refund_next_check_at, n.id limit 1`),
  );
  if (refund) return { kind: "refund", id: refund.id, platformId: refund.platform_id, at: time(refund.at) };
  const [subscription] = rowsOf<{ id: string; platform_id: string; at: Date | string }>(
    await db.execute(sql`select id, platform_id, current_period_end as at from billing.subscriptions s
      where current and current_period_end <= ${now.toISOString()}::timestamptz
        and (lease_until is null or lease_until < ${wall.toISOString()}::timestamptz)
        and not exists (select 1 from billing.invoices i where i.subscription_id = s.id and i.collection_state is not null)
        and ${available(sql`'subscription:' || s.id`, sql`s.platform_id`, wall, busy)}
      order by current_period_end, id limit 1`),
  );
  const [retry] = rowsOf<{ id: string; platform_id: string; at: Date | string }>(
    await db.execute(sql`select id, platform_id, next_attempt_at as at from billing.invoices i
      where status = 'open' and collection_state is null and next_attempt_at <= ${now.toISOString()}::timestamptz
        and not exists (select 1 from billing.invoices j where j.subscription_id = i.subscription_id and j.collection_state is not null)
        and ${available(sql`'retry:' || i.id`, sql`i.platform_id`, wall, busy)}
      order by next_attempt_at, id limit 1`),
  );
  const cutoff = new Date(now.getTime() - engine.usageGraceSeconds * 1000);
  const [close] = rowsOf<{ platform_id: string; period_start: Date | string; period_end: Date | string }>(
    await db.execute(sql`select platform_id, period_start, period_end from billing.usage_periods p
      where status = 'open' and period_end <= ${cutoff.toISOString()}::timestamptz
        and ${available(sql`'close:' || p.platform_id || '@' || floor(extract(epoch from p.period_start))::bigint`, sql`p.platform_id`, wall, busy)}
      order by period_end, platform_id limit 1`),
  );
  const due: Due[] = [];
  if (subscription) due.push({ kind: "subscription", id: subscription.id, platformId: subscription.platform_id, at: time(subscription.at) });
  if (close) {
    const periodStart = time(close.period_start);
    due.push({ kind: "close", id: `${close.platform_id}@${Math.floor(periodStart.getTime() / 1000)}`, platformId: close.platform_id, periodStart, at: new Date(time(close.period_end).getTime() + engine.usageGraceSeconds * 1000) });
  }
  if (retry) due.push({ kind: "retry", id: retry.id, platformId: retry.platform_id, at: time(retry.at) });
  const rank = { check: 0, refund: 0, subscription: 1, close: 2, retry: 3 } as const;
  due.sort((a, b) => a.at.getTime() - b.at.getTime() || rank[a.kind] - rank[b.kind]);
  return due[0] ?? null;
}

/** One item's work. A subscription's renewal is made under its lease; its payment is collected after. */
async function work(engine: Engine, due: Due, logger?: Logger): Promise<void> {
  switch (due.kind) {
    case "check":
      await checkCollection(engine, due.id, logger);
      return;
    case "refund":
      await checkRefund(engine, due.id, logger);
      return;
    case "retry":
      await retryInvoice(engine, due.id, due.at, logger);
      return;
    case "close":
      await closePeriod(engine, due.platformId, due.periodStart, due.at);
      return;
    case "subscription": {
      // only what falls due at this instant: the next item is the next earliest, whoever's it is
      const begun = await withSubscriptionLease(engine, due.id, (leaseId) => advanceSubscription(engine, due.id, due.at, leaseId));
      if (begun) await collectBegun(engine, begun, begun.finalizedAt, logger);
      return;
    }
  }
}

/** Lets the requests waiting for the event loop (and, on PGlite, for the database) go first. */
const yieldToRequests = () => new Promise<void>((resolve) => setImmediate(resolve));

async function noteFailure(db: Db, item: string, err: unknown, wall: Date): Promise<void> {
  const message = ((err as Error).message || String(err)).slice(0, 500);
  await db
    .insert(workBackoff)
    .values({ item, failures: 1, notBefore: new Date(wall.getTime() + backoffMs(0)), lastError: message })
    .onConflictDoUpdate({
      target: workBackoff.item,
      set: { failures: sql`${workBackoff.failures} + 1`, notBefore: sql`${new Date(wall.getTime()).toISOString()}::timestamptz + least(interval '1 second' * power(2, least(${workBackoff.failures}, 12)), interval '300 seconds')`, lastError: message },
    });
}

/**
 * Runs everything due by `now` (DESIGN §6.3, §6.5, §6.9) across all subscriptions, up to
 * `CONCURRENCY` items at once, so a provider that hangs for one customer holds back nobody else. An
 * item that fails backs off (1 s, 2 s, 4 s … at most 5 minutes) while the others go on. Every replica
 * runs it; leases keep two replicas off one subscription, guarded transitions off one attempt.
 * Answers how many items it worked on.
 */
export async function runDue(engine: Engine, now: Date, logger?: Logger): Promise<number> {
  /** what this replica works on, by platform */
  const running = new Map<string, Promise<void>>();
  /** when each item was last found due in this pass: found again at the same time, it made no progress */
  const seen = new Map<string, number>();
  let started = 0;
  let finished = 0;
  for (;;) {
    while (running.size < CONCURRENCY) {
      const finishedBefore = finished;
      const due = await nextDue(engine, now, engine.time.wallNow(), [...running.keys()]);
      // an item that finished while we looked may have made its platform's next item due: look again
      if (!due && finished === finishedBefore) break;
      if (!due) continue;
      const item = itemOf(due);
      const stuck = seen.get(item) === due.at.getTime();
      seen.set(item, due.at.getTime());
      const done = (stuck ? Promise.reject(new Error("no progress: the item is due again as it was")) : work(engine, due, logger))
        .then(() => engine.db.delete(workBackoff).where(eq(workBackoff.item, item)))
        .then(
          () => undefined,
          async (err: unknown) => {
            logger?.error({ err: (err as Error).message, item }, "billing work failed; it backs off and is tried again");
            await noteFailure(engine.db, item, err, engine.time.wallNow()).catch(() => undefined);
          },
        )
        .finally(() => {
          running.delete(due.platformId);
          finished++;
        });
      running.set(due.platformId, done);
      started++;
      await yieldToRequests();
    }
    if (running.size === 0) return started;
    await Promise.race(running.values());
  }
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
      // the pass of the due items: renewals, trial ends, dunning retries, period closes, payment checks, refund checks
      const done = await this.engine.metrics.service.timePass("renewals", async () => runDue(this.engine, await this.engine.time.now(), this.logger));
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
