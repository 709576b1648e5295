import { eq } from "drizzle-orm";
import type Stripe from "stripe";
import type { Logger } from "@core/kit";
import type { Db } from "@core/storage";
import { invoices, providerEvents, subscriptions } from "./db/schema.js";
import type { Engine } from "./engine.js";
import { recordPaid } from "./renewals.js";
import { lockUnderLease, withSubscriptionLease } from "./subscriptions.js";

export interface Receipt {
  duplicate: boolean;
  /** what the event did, or why nothing (kept with the event) */
  outcome: string;
}

/**
 * One event from Stripe, verified already (DESIGN §6.1): handled once by its id, in any order.
 * The engine settles its own charges synchronously; what an event can add is a payment the engine
 * did not see succeed — an open invoice is marked paid, under its subscription's lease and in the
 * transaction that records the event. A draft is the engine's own charge still running, which it
 * settles itself; an invoice already settled, an unknown object or a type we do not use is recorded
 * and answered 200, so Stripe stops sending it.
 */
export async function receiveStripeEvent(engine: Engine, event: Stripe.Event, receivedAt: Date, logger: Logger): Promise<Receipt> {
  const { db } = engine;
  if (await seen(db, event.id)) return { duplicate: true, outcome: "already handled" };
  const note = async (outcome: string): Promise<Receipt> => ({ duplicate: !(await record(db, event, outcome, receivedAt)), outcome });

  if (event.type !== "payment_intent.succeeded") return note(`ignored: billing does not use ${event.type}`);
  const intent = event.data.object as Stripe.PaymentIntent;
  const invoiceId = intent.metadata?.core_invoice_id;
  if (!invoiceId) return note("ignored: not a charge of billing's (no core_invoice_id)");
  const [invoice] = await db.select().from(invoices).where(eq(invoices.id, invoiceId));
  if (!invoice) return note(`ignored: no invoice ${invoiceId}`);
  if (invoice.status === "draft") return note(`left to the engine: invoice ${invoiceId} is still being charged`);
  if (invoice.status !== "open") {
    if (invoice.status !== "paid") logger.warn({ eventId: event.id, invoiceId, status: invoice.status, paymentIntent: intent.id }, "Stripe reports a payment for an invoice that is not open; an operator should look");
    return note(`nothing to do: invoice ${invoiceId} is ${invoice.status}`);
  }

  // billing time (the test clock, when on) marks the payment; `receivedAt` is when Stripe's event came
  const at = await engine.time.now();
  const settle = async (tx: Db, leaseId: string | null): Promise<Receipt> => {
    let subscription = null;
    if (invoice.subscriptionId && leaseId) {
      if (!(await lockUnderLease(tx, invoice.subscriptionId, leaseId))) throw new Error("the subscription's lease was lost");
      [subscription] = await tx.select().from(subscriptions).where(eq(subscriptions.id, invoice.subscriptionId));
    }
    const outcome = `paid: invoice ${invoiceId}, by ${intent.id}`;
    if (!(await record(tx, event, outcome, receivedAt))) return { duplicate: true, outcome: "already handled" };
    const [fresh] = await tx.select().from(invoices).where(eq(invoices.id, invoiceId));
    if (fresh?.status === "open") await recordPaid(tx, fresh, subscription ?? null, at);
    return { duplicate: false, outcome };
  };
  if (!invoice.subscriptionId) return db.transaction((tx) => settle(tx, null));
  // a renewal being charged right now holds the lease; waiting for it is fine, it ends in seconds
  return withSubscriptionLease(db, () => engine.time.wallNow(), invoice.subscriptionId, (leaseId) => db.transaction((tx) => settle(tx, leaseId)));
}

async function seen(db: Db, id: string): Promise<boolean> {
  const [row] = await db.select({ id: providerEvents.id }).from(providerEvents).where(eq(providerEvents.id, id));
  return row !== undefined;
}

/** Records the event; false when another delivery of it got there first. */
async function record(db: Db, event: Stripe.Event, outcome: string, receivedAt: Date): Promise<boolean> {
  const inserted = await db.insert(providerEvents).values({ id: event.id, type: event.type, outcome, receivedAt }).onConflictDoNothing().returning({ id: providerEvents.id });
  return inserted.length > 0;
}
