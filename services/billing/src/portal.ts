import { randomBytes } from "node:crypto";
import { and, desc, eq, gt, isNotNull, ne } from "drizzle-orm";
import { ApiError } from "@core/kit";
import type { Db } from "@core/storage";
import { findCustomer } from "./customers.js";
import { invoices, portalSessions, subscriptions, type InvoiceRow, type SubscriptionRow } from "./db/schema.js";
import type { Engine } from "./engine.js";
import { latestInvoices } from "./invoices.js";
import type { PortalView } from "./pages/portal.js";
import { PAID_TIERS, type Tier } from "./plans.js";
import { TEST_CARDS } from "./provider/local.js";
import { declineMessage, type PaymentMethodView } from "./provider/types.js";
import { currentSubscription, subscriptionJson, toSecond } from "./subscriptions.js";
import { upcomingInvoice } from "./upcoming.js";
import { currentUsage, dailyUsage, dayOf, metersOf } from "./usage.js";

/** A portal session lasts an hour (DESIGN §6.1), on the wall clock: the test clock never ends one. */
export const PORTAL_SESSION_MS = 3_600_000;

export type PortalSession = typeof portalSessions.$inferSelect;

/**
 * A customer portal session (DESIGN §6.1): its id is the bearer of the portal's pages, so it is 32
 * random bytes, and it is bound to one customer and platform.
 */
export async function createPortalSession(db: Db, now: Date, input: { customerId: string; platformId: string; returnUrl: string }): Promise<PortalSession> {
  const [row] = await db
    .insert(portalSessions)
    .values({
      id: `bps_${randomBytes(32).toString("base64url")}`,
      customerId: input.customerId,
      platformId: input.platformId,
      returnUrl: input.returnUrl,
      createdAt: now,
      expiresAt: new Date(now.getTime() + PORTAL_SESSION_MS),
    })
    .returning();
  return row!;
}

/** The session of a portal link that has not expired, or null. */
export async function livePortalSession(db: Db, id: string, now: Date): Promise<PortalSession | null> {
  if (!/^bps_[A-Za-z0-9_-]{43}$/.test(id)) return null;
  const [row] = await db
    .select()
    .from(portalSessions)
    .where(and(eq(portalSessions.id, id), gt(portalSessions.expiresAt, now)));
  return row ?? null;
}

/** How many invoices the portal's page lists, newest first. */
const PORTAL_INVOICES = 24;

const testCardLabel = (token: string) => {
  const card = TEST_CARDS[token]!;
  const outcome = card.refused
    ? `declined: ${card.refused.declineCode ?? card.refused.code}`
    : card.failsCharges
      ? "attaches, then every charge fails"
      : card.losesFirstAnswer
        ? "its first charge's answer is lost, then found"
        : "succeeds";
  return `${card.brand} •••• ${card.last4} (${token}, ${outcome})`;
};

const unix = (d: Date | null) => (d ? Math.floor(d.getTime() / 1000) : null);

/** Why an attempt was refused, in the provider's words (Stripe's messages), from what the invoice recorded. */
const refusalOf = (row: Pick<InvoiceRow, "lastFailureCode" | "lastDeclineCode">) =>
  row.lastFailureCode === "no_payment_method" ? "There was no card to charge." : declineMessage(row.lastFailureCode ?? "card_declined", row.lastDeclineCode);

const cardLabel = (card: PaymentMethodView) => `${card.card.brand} •••• ${card.card.last4}`;

/**
 * The default card is failing when the last attempt that charged it was refused (DESIGN §6.9: every
 * attempt records its card and its refusal on the invoice), so the page can say so before the next
 * renewal. An attempt still in flight says nothing yet.
 */
async function defaultCardFailure(engine: Engine, customerId: string, card: PaymentMethodView | null) {
  if (!card) return null;
  const [last] = await engine.db
    .select()
    .from(invoices)
    .where(and(eq(invoices.customerId, customerId), eq(invoices.chargePaymentMethodId, card.id), isNotNull(invoices.collectionSince)))
    .orderBy(desc(invoices.collectionSince), desc(invoices.seq))
    .limit(1);
  if (!last || last.status === "paid" || last.collectionState !== null || !last.lastFailureCode) return null;
  return { card: cardLabel(card), reason: refusalOf(last), invoiceNumber: last.number };
}

/** A past-due subscription's refused invoice: the reason and when it is tried again (DESIGN §6.3 dunning). */
async function refusedInvoiceOf(engine: Engine, subscription: SubscriptionRow) {
  if (subscription.status !== "past_due") return null;
  const [row] = await engine.db
    .select()
    .from(invoices)
    .where(and(eq(invoices.subscriptionId, subscription.id), eq(invoices.status, "open"), isNotNull(invoices.lastFailureCode)))
    .orderBy(desc(invoices.createdAt), desc(invoices.seq))
    .limit(1);
  if (!row) return null;
  return { id: row.id, number: row.number, amountDueCents: row.amountDueCents, reason: refusalOf(row), attempts: row.attemptCount, nextAttemptAt: unix(row.nextAttemptAt), paying: row.collectionState !== null };
}

/**
 * On free: the paid plan that ended last, when, and why: an invoice dunning could not collect (still
 * owed: "Pay now" settles it, without restoring the plan), or a cancellation.
 */
async function endedPlanOf(engine: Engine, current: SubscriptionRow) {
  if (current.tier !== "free") return null;
  const [ended] = await engine.db
    .select()
    .from(subscriptions)
    .where(and(eq(subscriptions.platformId, current.platformId), eq(subscriptions.current, false), ne(subscriptions.tier, "free"), isNotNull(subscriptions.canceledAt)))
    .orderBy(desc(subscriptions.canceledAt))
    .limit(1);
  if (!ended) return null;
  const [unpaid] = await engine.db
    .select()
    .from(invoices)
    .where(and(eq(invoices.subscriptionId, ended.id), eq(invoices.status, "uncollectible")))
    .orderBy(desc(invoices.createdAt), desc(invoices.seq))
    .limit(1);
  return {
    planName: engine.catalogue.plan(ended.tier as Tier).name,
    endedAt: unix(ended.canceledAt)!,
    canceledByCustomer: ended.cancelAtPeriodEnd,
    unpaid: unpaid ? { id: unpaid.id, number: unpaid.number, amountDueCents: unpaid.amountDueCents, reason: refusalOf(unpaid), paying: unpaid.collectionState !== null } : null,
  };
}

/**
 * Each meter's usage per UTC day of the current period, from the daily rollups (`usage/daily`'s
 * function, never raw events), from the period's first day to today: the portal's usage picture.
 */
async function dailyOfPeriod(engine: Engine, subscription: SubscriptionRow, now: Date) {
  const plan = engine.catalogue.plan(subscription.tier as Tier);
  const meters = metersOf(plan);
  const first = dayOf(subscription.currentPeriodStart);
  const last = dayOf(new Date(subscription.currentPeriodEnd.getTime() - 1000));
  const today = dayOf(now);
  const to = today < last ? (today < first ? first : today) : last;
  const rows = await dailyUsage(engine.db, subscription.platformId, meters, first, to, { periodStart: subscription.currentPeriodStart });
  return { first, last, days: rows };
}

/**
 * Everything the portal's main page shows (DESIGN §6.1): plan and period and what they mean (a trial,
 * a refused payment, a cancellation or change waiting, a plan dunning ended), the next charge
 * (`GET /invoices/upcoming`'s amount), usage against the plan day by day, the latest invoices, the
 * cards (and whether the default one is failing), and the test cards a person can add (local provider only).
 */
export async function portalView(engine: Engine, session: PortalSession): Promise<PortalView> {
  const now = toSecond(await engine.time.now());
  const customer = await findCustomer(engine.db, session.customerId);
  const subscription = await currentSubscription(engine.db, engine.catalogue, session.platformId, now);
  const rows = await latestInvoices(engine.db, session.platformId, PORTAL_INVOICES);
  const cards = await engine.provider.list(customer.id);
  const defaultCard = cards.find((card) => card.id === customer.defaultPaymentMethodId) ?? null;
  return {
    base: `/portal/${session.id}`,
    returnUrl: session.returnUrl,
    email: customer.email,
    currency: customer.currency,
    now: unix(now)!,
    subscription: subscriptionJson(subscription),
    plan: engine.catalogue.plan(subscription.tier as Tier),
    plans: PAID_TIERS.map((tier) => engine.catalogue.plan(tier)),
    usage: await currentUsage(engine.db, engine.catalogue, subscription, undefined),
    daily: await dailyOfPeriod(engine, subscription, now),
    invoices: rows.map((r) => ({
      id: r.id,
      number: r.number,
      status: r.status,
      totalCents: r.totalCents,
      amountPaidCents: r.amountPaidCents,
      amountDueCents: r.amountDueCents,
      periodStart: unix(r.periodStart)!,
      periodEnd: unix(r.periodEnd)!,
      createdAt: unix(r.finalizedAt ?? r.createdAt)!,
      paying: r.collectionState !== null,
    })),
    upcoming: await upcomingInvoice(engine, session.platformId).catch((err: unknown) => {
      if (err instanceof ApiError && err.code === "NO_UPCOMING_INVOICE") return null;
      throw err;
    }),
    cards: cards.map((card) => ({ ...card, isDefault: card.id === customer.defaultPaymentMethodId })),
    defaultCard: defaultCard ? cardLabel(defaultCard) : null,
    failingCard: await defaultCardFailure(engine, customer.id, defaultCard),
    refused: await refusedInvoiceOf(engine, subscription),
    ended: await endedPlanOf(engine, subscription),
    testCards: engine.provider.name === "local" ? Object.keys(TEST_CARDS).map((token) => ({ token, label: testCardLabel(token) })) : null,
  };
}
