import { randomBytes } from "node:crypto";
import { and, eq, gt } from "drizzle-orm";
import { ApiError } from "@core/kit";
import type { Db } from "@core/storage";
import { findCustomer } from "./customers.js";
import { portalSessions } from "./db/schema.js";
import type { Engine } from "./engine.js";
import { latestInvoices } from "./invoices.js";
import type { PortalView } from "./pages/portal.js";
import { PAID_TIERS, type Tier } from "./plans.js";
import { TEST_CARDS } from "./provider/local.js";
import { currentSubscription, subscriptionJson, toSecond } from "./subscriptions.js";
import { upcomingInvoice } from "./upcoming.js";
import { currentUsage } from "./usage.js";

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

/**
 * Everything the portal's main page shows (DESIGN §6.1): plan and period, usage against the plan,
 * the latest invoices, the cards, and the test cards a person can add (local provider only).
 */
export async function portalView(engine: Engine, session: PortalSession): Promise<PortalView> {
  const now = toSecond(await engine.time.now());
  const customer = await findCustomer(engine.db, session.customerId);
  const subscription = await currentSubscription(engine.db, engine.catalogue, session.platformId, now);
  const invoices = await latestInvoices(engine.db, session.platformId, PORTAL_INVOICES);
  const cards = await engine.provider.list(customer.id);
  return {
    base: `/portal/${session.id}`,
    returnUrl: session.returnUrl,
    email: customer.email,
    currency: customer.currency,
    subscription: subscriptionJson(subscription),
    plan: engine.catalogue.plan(subscription.tier as Tier),
    plans: PAID_TIERS.map((tier) => engine.catalogue.plan(tier)),
    usage: await currentUsage(engine.db, engine.catalogue, subscription, undefined),
    invoices: invoices.map((r) => ({
      id: r.id,
      number: r.number,
      status: r.status,
      totalCents: r.totalCents,
      amountPaidCents: r.amountPaidCents,
      amountDueCents: r.amountDueCents,
      periodStart: Math.floor(r.periodStart.getTime() / 1000),
      createdAt: Math.floor(r.createdAt.getTime() / 1000),
      paying: r.collectionState !== null,
    })),
    upcoming: await upcomingInvoice(engine, session.platformId).catch((err: unknown) => {
      if (err instanceof ApiError && err.code === "NO_UPCOMING_INVOICE") return null;
      throw err;
    }),
    cards: cards.map((card) => ({ ...card, isDefault: card.id === customer.defaultPaymentMethodId })),
    testCards: engine.provider.name === "local" ? Object.keys(TEST_CARDS).map((token) => ({ token, label: testCardLabel(token) })) : null,
  };
}
