import { eq } from "drizzle-orm";
import type Stripe from "stripe";
import type { Db } from "@core/storage";
import { settle } from "./collection.js";
import { invoices, providerEvents } from "./db/schema.js";
import type { Engine } from "./engine.js";
import { HARD_DECLINES } from "./provider/types.js";

export interface Receipt {
  duplicate: boolean;
  /** what the event did, or why nothing (kept with the event) */
  outcome: string;
}

/**
 * One event from Stripe, verified already (DESIGN §6.1, §6.9): handled once by its id, in any order.
 * `payment_intent.succeeded` and `payment_intent.payment_failed` for one of billing's invoices
 * (`metadata.core_invoice_id`) settle it through the same guarded transition as the engine's own
 * answer, whichever comes first: a success pays the open invoice and applies its intent; a failure
 * settles the attempt it is about (`metadata.core_attempt`) if that attempt is still in flight.
 * The effect is idempotent, so it runs before the event is recorded: a crash between the two leaves
 * Stripe's redelivery to do it (again, harmlessly). Anything else is recorded and answered 200.
 */
export async function receiveStripeEvent(engine: Engine, event: Stripe.Event, receivedAt: Date): Promise<Receipt> {
  const { db } = engine;
  if (await seen(db, event.id)) return { duplicate: true, outcome: "already handled" };
  const outcome = await effectOf(engine, event);
  return { duplicate: !(await record(db, event, outcome, receivedAt)), outcome };
}

async function effectOf(engine: Engine, event: Stripe.Event): Promise<string> {
  if (event.type !== "payment_intent.succeeded" && event.type !== "payment_intent.payment_failed") return `ignored: billing does not use ${event.type}`;
  const intent = event.data.object as Stripe.PaymentIntent;
  const invoiceId = intent.metadata?.core_invoice_id;
  if (!invoiceId) return "ignored: not a charge of billing's (no core_invoice_id)";
  const [invoice] = await engine.db.select().from(invoices).where(eq(invoices.id, invoiceId));
  if (!invoice) return `ignored: no invoice ${invoiceId}`;
  const attempt = Number(intent.metadata?.core_attempt ?? Number.NaN);
  if (event.type === "payment_intent.succeeded") {
    const after = await settle(engine, invoiceId, Number.isInteger(attempt) ? attempt : invoice.attemptCount, { status: "succeeded", paymentId: intent.id }, null);
    if (after.status === "paid" && after.paymentId === intent.id) return `paid: invoice ${invoiceId}, by ${intent.id}`;
    // money arrived for an invoice that was settled otherwise: payments/reconcile shows it to an operator
    engine.logger.warn({ eventId: event.id, invoiceId, status: after.status, paymentIntent: intent.id }, "Stripe reports a payment for an invoice paid otherwise or closed; see GET /operator/payments/reconcile");
    return `nothing to do: invoice ${invoiceId} is ${after.status}${after.paymentId ? ` (paid by ${after.paymentId})` : ""}`;
  }
  if (!Number.isInteger(attempt)) return `ignored: a failure without core_attempt for invoice ${invoiceId}`;
  const error = intent.last_payment_error;
  const code = error?.code || "card_declined";
  const declineCode = error?.decline_code || null;
  const after = await settle(engine, invoiceId, attempt, { status: "declined", paymentId: intent.id, code, declineCode, hard: HARD_DECLINES.has(declineCode ?? code) }, null);
  return `settled attempt ${attempt} of invoice ${invoiceId}: ${after.status}`;
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
