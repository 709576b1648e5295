import { and, desc, eq, isNull, lt, ne, or, sql } from "drizzle-orm";
import { ApiError, badRequest, decodeCursor, newId, resourceNotFound, toPage, unixSeconds } from "@core/kit";
import { keysetAfter, keysetOrder, rowsOf, type Db, type KeysetColumns } from "@core/storage";
import { subscriptions, type SubscriptionRow } from "./db/schema.js";
import type { Engine } from "./engine.js";
import { periodAt } from "./periods.js";
import type { Catalogue, Tier } from "./plans.js";
import { whileRenewing } from "./leases.js";
import { recordTier } from "./tier-sync.js";
import { emitEvent, type EventType } from "./webhooks/outbox.js";

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

type SubscriptionChange = Partial<Omit<typeof subscriptions.$inferInsert, "id" | "platformId" | "createdAt">>;

/**
 * The event a subscription's write is (DESIGN §6.8), or none: created when a platform leaves free,
 * canceled when one ends, updated when anything else a reader sees changed; a free subscription
 * rolling its periods is no event.
 */
function eventOf(before: SubscriptionRow | null, after: SubscriptionRow): EventType | null {
  if (!before) return after.tier === "free" ? null : "subscription.created";
  const [was, is] = [subscriptionJson(before), subscriptionJson(after)];
  if (JSON.stringify(was) === JSON.stringify(is)) return null;
  if (after.status === "canceled" && before.status !== "canceled") return "subscription.canceled";
  if (before.tier === "free" && after.tier !== "free") return "subscription.created";
  if (before.tier === "free" && after.tier === "free" && before.pendingTier === after.pendingTier) return null;
  return "subscription.updated";
}

/**
 * The one way a subscription changes: the row is locked, written, and its event (if it is one) is
 * written to the outbox in the same transaction, in the shape the API answers (`subscriptionJson`).
 */
export async function writeSubscription(tx: Db, subscription: Pick<SubscriptionRow, "id">, set: SubscriptionChange): Promise<SubscriptionRow> {
  const [before] = await tx.select().from(subscriptions).where(eq(subscriptions.id, subscription.id)).for("update");
  if (!before) throw resourceNotFound("subscription");
  const [after] = await tx.update(subscriptions).set(set).where(eq(subscriptions.id, subscription.id)).returning();
  const type = eventOf(before, after!);
  if (type) await emitEvent(tx, type, subscriptionJson(after!), after!.updatedAt);
  return after!;
}

/** A new current subscription, and its event (a paid one is `subscription.created`). */
async function insertSubscription(tx: Db, values: typeof subscriptions.$inferInsert): Promise<SubscriptionRow | null> {
  const [row] = await tx.insert(subscriptions).values(values).onConflictDoNothing().returning();
  if (row && eventOf(null, row)) await emitEvent(tx, "subscription.created", subscriptionJson(row), row.createdAt);
  return row ?? null;
}

/**
 * Ends a subscription and puts the platform back on free (DESIGN §6.3): the row keeps its id with
 * status `canceled`, and a new free row, anchored where the old one ended, becomes current.
 */
export async function returnToFree(engine: Engine, tx: Db, subscription: Pick<SubscriptionRow, "id" | "platformId" | "customerId">, at: Date): Promise<void> {
  await writeSubscription(tx, subscription, { status: "canceled", current: false, canceledAt: at, leaseId: null, leaseUntil: null, updatedAt: at });
  await insertSubscription(tx, freeSubscription(engine.catalogue, subscription.platformId, at, subscription.customerId));
  await recordTier(tx, subscription.platformId, "free", engine.time.wallNow());
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
  await insertSubscription(db, freeSubscription(catalogue, platformId, toSecond(now)));
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
  if (!row) throw resourceNotFound("subscription");
  return row;
}

export async function subscriptionsOfCustomer(db: Db, customerId: string): Promise<SubscriptionRow[]> {
  return db.select().from(subscriptions).where(eq(subscriptions.customerId, customerId)).orderBy(desc(subscriptions.createdAt), desc(subscriptions.id));
}

const SUBSCRIPTIONS_NEWEST_FIRST: KeysetColumns = { key: subscriptions.createdAt, tie: subscriptions.id, direction: "desc" };

/** What `GET /subscriptions?status=` takes: a status, or `all` (Stripe's word for every status, ended ones too). */
export const SUBSCRIPTION_LIST_STATUSES = ["active", "trialing", "past_due", "canceled", "all"] as const;
export type SubscriptionListStatus = (typeof SUBSCRIPTION_LIST_STATUSES)[number];

/**
 * `GET /subscriptions` (DESIGN §6.12): a page of subscriptions, newest first, for operators. Without
 * `status` it lists those that have not ended, as Stripe's list does: every platform's history of
 * ended subscriptions would otherwise bury the ones that bill; `status=canceled` lists the ended
 * ones, `status=all` everything. Filters combine with AND.
 */
export async function listSubscriptions(db: Db, query: { status?: SubscriptionListStatus; tier?: Tier; platformId?: string; limit: number; cursor?: string }) {
  const after = decodeCursor(query.cursor, { key: "timestamp", tie: "id" });
  // a cursor of another listing (a customer's, an invoice's) is no position in this one
  if (after && !after.id.startsWith("sub_")) throw badRequest("Invalid cursor", { path: "cursor" });
  const status = query.status ?? null;
  const rows = await db
    .select()
    .from(subscriptions)
    .where(
      and(
        status === null ? ne(subscriptions.status, "canceled") : status === "all" ? undefined : eq(subscriptions.status, status),
        query.tier === undefined ? undefined : eq(subscriptions.tier, query.tier),
        query.platformId === undefined ? undefined : eq(subscriptions.platformId, query.platformId),
        keysetAfter(SUBSCRIPTIONS_NEWEST_FIRST, after),
      ),
    )
    .orderBy(...keysetOrder(SUBSCRIPTIONS_NEWEST_FIRST))
    .limit(query.limit + 1);
  const page = toPage(rows, query.limit, (r) => ({ k: r.createdAt, id: r.id }));
  return { data: page.data.map(subscriptionJson), cursor: page.cursor };
}

/** How long a change waits for another one (or a renewal) to finish before answering 409. */
const WAIT_MS = 10_000;

export const changeInProgress = () =>
  new ApiError(409, "CHANGE_IN_PROGRESS", "Another change of this subscription is in progress; try again in a moment");

/**
 * Runs `change` holding the subscription's lease (DESIGN §6.3: every change takes the subscription
 * first). The lease is a row claim with an expiry, not a database lock: provider calls (a card's
 * attach) happen while it is held. It is short and renewed while the change runs (`whileRenewing`):
 * a slow provider never loses it, and a process that dies mid-change frees it within a lease
 * (`engine.leaseMs`). Other changes and renewals wait for it; the change itself applies its result
 * under `lockUnderLease`.
 */
export async function withSubscriptionLease<T>(engine: Pick<Engine, "db" | "time" | "leaseMs">, subscriptionId: string, change: (leaseId: string) => Promise<T>): Promise<T> {
  const { db } = engine;
  const wallNow = () => engine.time.wallNow();
  const leaseId = newId("lse");
  const deadline = wallNow().getTime() + WAIT_MS;
  for (;;) {
    const now = wallNow();
    const [claimed] = await db
      .update(subscriptions)
      .set({ leaseId, leaseUntil: new Date(now.getTime() + engine.leaseMs) })
      .where(and(eq(subscriptions.id, subscriptionId), or(isNull(subscriptions.leaseUntil), lt(subscriptions.leaseUntil, now))))
      .returning({ id: subscriptions.id });
    if (claimed) break;
    // nothing to wait for when there is no such subscription
    const [exists] = await db.select({ id: subscriptions.id }).from(subscriptions).where(eq(subscriptions.id, subscriptionId));
    if (!exists) throw resourceNotFound("subscription");
    if (now.getTime() > deadline) throw changeInProgress();
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  const renew = async () => {
    const [renewed] = await db
      .update(subscriptions)
      .set({ leaseUntil: new Date(wallNow().getTime() + engine.leaseMs) })
      .where(and(eq(subscriptions.id, subscriptionId), eq(subscriptions.leaseId, leaseId)))
      .returning({ id: subscriptions.id });
    return renewed !== undefined;
  };
  try {
    return await whileRenewing(engine.leaseMs, renew, () => change(leaseId));
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
