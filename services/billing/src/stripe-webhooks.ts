import { eq } from "drizzle-orm";
import type Stripe from "stripe";
import type { Db } from "@core/storage";
import { settle } from "./collection.js";
import { markDisputed, recordExternalRefund, settleRefund } from "./credit-notes.js";
import { invoices, providerEvents } from "./db/schema.js";
import type { Engine } from "./engine.js";
import { StripeProvider } from "./provider/stripe.js";
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
 * `charge.refunded` records refunds made outside billing as credit notes and settles billing's own;
 * `charge.dispute.created` marks the invoice disputed (DESIGN §6.10).
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
  if (event.type === "charge.refunded") return refunded(engine, event.data.object);
  if (event.type === "charge.dispute.created") return disputed(engine, event.data.object);
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

const idOf = (ref: string | { id: string } | null | undefined): string | null => (typeof ref === "string" ? ref : (ref?.id ?? null));

/**
 * `charge.refunded` (DESIGN §6.10): each refund of the charge (the event's own list, or Stripe's when
 * the event carries none, as newer API versions send it). One of ours (`core_credit_note_id`) settles
 * its pending note as the provider's own answer would; any other was made outside billing and is
 * recorded as an `external` credit note, once (by its refund id). Pending refunds count, as they
 * count in Stripe's `amount_refunded`; failed and canceled ones gave nothing back.
 */
async function refunded(engine: Engine, charge: Stripe.Charge): Promise<string> {
  const paymentId = idOf(charge.payment_intent);
  if (!paymentId) return "ignored: a charge without a PaymentIntent is none of billing's";
  let refunds = charge.refunds?.data;
  if (!refunds) {
    if (!(engine.provider instanceof StripeProvider)) return "ignored: the event lists no refunds, and billing is not on Stripe to ask";
    refunds = await engine.provider.refundsOfCharge(charge.id);
  }
  const done: string[] = [];
  for (const refund of refunds) {
    if (refund.status === "failed" || refund.status === "canceled") continue;
    const ours = refund.metadata?.core_credit_note_id;
    if (ours) {
      if (refund.status !== "succeeded") continue;
      const note = await settleRefund(engine, ours, { status: "succeeded", refundId: refund.id });
      done.push(note ? `credit note ${ours}: refund ${note.refundState}` : `ignored: no credit note ${ours}`);
      continue;
    }
    done.push(await recordExternalRefund(engine, { refundId: refund.id, paymentId, amountCents: refund.amount }));
  }
  return done.length > 0 ? done.join("; ") : "nothing to do: no refund of the charge gave anything back";
}

/** `charge.dispute.created` (DESIGN §6.10): the invoice its payment paid is marked disputed. */
async function disputed(engine: Engine, dispute: Stripe.Dispute): Promise<string> {
  const paymentId = idOf(dispute.payment_intent);
  if (!paymentId) return "ignored: a dispute without a PaymentIntent is none of billing's";
  return markDisputed(engine, paymentId);
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
