import { and, desc, eq, isNull, lt, or, sql } from "drizzle-orm";
import { ApiError, newId, notFound, unixSeconds } from "@core/kit";
import { rowsOf, type Db } from "@core/storage";
import { subscriptions, type SubscriptionRow } from "./db/schema.js";
import { periodAt } from "./periods.js";
import type { Catalogue, Tier } from "./plans.js";

const seconds = (d: Date | null) => (d ? unixSeconds(d) : null);

/** The subscription of DESIGN §6.3 in its answer's shape (Unix seconds). */
export function subscriptionJson(row: SubscriptionRow) {
  return {
    id: row.id,
    platformId: row.platformId,
    customerId: row.customerId,
    tier: row.tier as Tier,
    planId: row.planId,
    status: row.status,
    billingAnchor: unixSeconds(row.billingAnchor),
    currentPeriodStart: unixSeconds(row.currentPeriodStart),
    currentPeriodEnd: unixSeconds(row.currentPeriodEnd),
    cancelAtPeriodEnd: row.cancelAtPeriodEnd,
    canceledAt: seconds(row.canceledAt),
    trialEnd: seconds(row.trialEnd),
    pendingTier: row.pendingTier as Tier | null,
    quantity: row.quantity,
    pendingQuantity: row.pendingQuantity,
    metadata: row.metadata,
    createdAt: unixSeconds(row.createdAt),
  };
}

/** Billing time truncated to the second: periods and prorations count whole seconds. */
export const toSecond = (d: Date) => new Date(Math.floor(d.getTime() / 1000) * 1000);

/**
 * The platform's current subscription. A platform billing has not seen yet is on free: the first
 * read makes its free subscription, anchored now, idempotently (the unique index on the current
 * row settles two first reads at once).
 */
export async function currentSubscription(db: Db, catalogue: Catalogue, platformId: string, now: Date): Promise<SubscriptionRow> {
  const [row] = await db.select().from(subscriptions).where(and(eq(subscriptions.platformId, platformId), eq(subscriptions.current, true)));
  if (row) return row;
  await db.insert(subscriptions).values(freeSubscription(catalogue, platformId, toSecond(now))).onConflictDoNothing();
  const [made] = await db.select().from(subscriptions).where(and(eq(subscriptions.platformId, platformId), eq(subscriptions.current, true)));
  return made!;
}

/** A new free subscription row for a platform, its periods anchored at `anchor`. */
export function freeSubscription(catalogue: Catalogue, platformId: string, anchor: Date, customerId: string | null = null) {
  const period = periodAt(anchor, anchor);
  const free = catalogue.plan("free");
  return {
    id: newId("sub"),
    platformId,
    customerId,
    tier: "free",
    planId: free.id,
    status: "active" as const,
    current: true,
    billingAnchor: anchor,
    currentPeriodStart: period.start,
    currentPeriodEnd: period.end,
    createdAt: anchor,
    updatedAt: anchor,
  };
}

export async function findSubscription(db: Db, id: string): Promise<SubscriptionRow> {
  const [row] = await db.select().from(subscriptions).where(eq(subscriptions.id, id));
  if (!row) throw notFound(`No subscription ${id}`);
  return row;
}

export async function subscriptionsOfCustomer(db: Db, customerId: string): Promise<SubscriptionRow[]> {
  return db.select().from(subscriptions).where(eq(subscriptions.customerId, customerId)).orderBy(desc(subscriptions.createdAt), desc(subscriptions.id));
}

/** How long a change holds its subscription: longer than any provider call it waits for. */
const LEASE_MS = 60_000;
/** How long a change waits for another one (or a renewal) to finish before answering 409. */
const WAIT_MS = 10_000;

export const changeInProgress = () =>
  new ApiError(409, "CHANGE_IN_PROGRESS", "Another change of this subscription is in progress; try again in a moment");

/**
 * Runs `change` holding the subscription's lease (DESIGN §6.3: every change takes the subscription
 * first). The lease is a row claim with an expiry, not a database lock: the provider's charge
 * happens while it is held, and a process that dies mid-change frees it by expiry. Other changes and
 * renewals wait for it; the change itself applies its result with `applyUnderLease`.
 */
export async function withSubscriptionLease<T>(db: Db, wallNow: () => Date, subscriptionId: string, change: (leaseId: string) => Promise<T>): Promise<T> {
  const leaseId = newId("lse");
  const deadline = wallNow().getTime() + WAIT_MS;
  for (;;) {
    const now = wallNow();
    const [claimed] = await db
      .update(subscriptions)
      .set({ leaseId, leaseUntil: new Date(now.getTime() + LEASE_MS) })
      .where(and(eq(subscriptions.id, subscriptionId), or(isNull(subscriptions.leaseUntil), lt(subscriptions.leaseUntil, now))))
      .returning({ id: subscriptions.id });
    if (claimed) break;
    // nothing to wait for when there is no such subscription
    const [exists] = await db.select({ id: subscriptions.id }).from(subscriptions).where(eq(subscriptions.id, subscriptionId));
    if (!exists) throw notFound(`No subscription ${subscriptionId}`);
    if (now.getTime() > deadline) throw changeInProgress();
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  try {
    return await change(leaseId);
  } finally {
    await db.update(subscriptions).set({ leaseId: null, leaseUntil: null }).where(and(eq(subscriptions.id, subscriptionId), eq(subscriptions.leaseId, leaseId)));
  }
}

/**
 * The subscription row, locked for the rest of the transaction, while the lease is still this
 * change's; null when it is not (it expired and another change took it over).
 */
export async function lockUnderLease(tx: Db, subscriptionId: string, leaseId: string): Promise<SubscriptionRow | null> {
  const held = rowsOf<{ id: string }>(await tx.execute(sql`select id from billing.subscriptions where id = ${subscriptionId} and lease_id = ${leaseId} for update`));
  if (held.length === 0) return null;
  const [row] = await tx.select().from(subscriptions).where(eq(subscriptions.id, subscriptionId));
  return row ?? null;
}
