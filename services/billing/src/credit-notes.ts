import Decimal from "decimal.js";
import { and, asc, eq, sql } from "drizzle-orm";
import { ApiError, conflict, type Logger, newId, resourceNotFound, unixSeconds } from "@core/kit";
import { isUniqueViolation, rowsOf, type Db } from "@core/storage";
import { checkDelayMs } from "./collection.js";
import { creditNotes, invoices, type CreditNoteRow, type InvoiceRow } from "./db/schema.js";
import type { Engine } from "./engine.js";
import { whileRenewing } from "./leases.js";
import { emitInvoiceEvent, moveBalance, type Actor } from "./invoicing.js";
import type { RefundOutcome } from "./provider/types.js";
import { emitEvent } from "./webhooks/outbox.js";

/**
 * Credit notes (DESIGN §6.10, Stripe's model): what is given back on a paid invoice, to the card
 * through the provider (`payment_method`) or to the customer's balance (`balance`). The invoice row is
 * locked while a note is written, so notes never give back more than was paid (and the database's
 * CHECK `invoices_credit_within_paid` holds it too). A refund to the card is written first, `pending`,
 * then asked of the provider with the key `refund:<creditNoteId>`; an unknown answer stays pending and
 * the worker asks again with the same key (1, 2, 4 … minutes apart, at most an hour) until it knows.
 * Finalized invoices never change otherwise: a note changes what was refunded or credited, never the
 * invoice's status.
 */

/** The reasons an operator gives (Stripe's); `external` is a refund made at the provider itself. */
export const CREDIT_NOTE_REASONS = ["duplicate", "fraudulent", "order_change", "product_unsatisfactory"] as const;
export type CreditNoteReason = (typeof CREDIT_NOTE_REASONS)[number];

export interface CreditNoteInput {
  amountCents: number;
  reason: CreditNoteReason;
  refundTo: "payment_method" | "balance";
  memo?: string;
}

const Money = Decimal.clone({ precision: 60, rounding: Decimal.ROUND_HALF_UP });


/** A credit note in its answer's shape: `GET /invoices/{id}/credit-notes` and the `credit_note.created` event alike (DESIGN §6.8, one shape). */
export function creditNoteJson(row: CreditNoteRow) {
  return {
    id: row.id,
    number: row.number,
    invoiceId: row.invoiceId,
    customerId: row.customerId,
    amountCents: row.amountCents,
    taxCents: row.taxCents,
    currency: row.currency,
    reason: row.reason,
    refundTo: row.refundTo,
    refundId: row.refundId,
    refundState: row.refundState,
    status: row.status,
    memo: row.memo,
    createdAt: unixSeconds(row.createdAt),
  };
}

/**
 * The tax part of a note (DESIGN §6.10): in proportion to the invoice's, tax / total, integer cents.
 * It is computed on everything credited so far, rounded once (half away from zero) and capped at the
 * invoice's tax, less the tax earlier notes credited: so the tax credited is always
 * round(credited × tax / total), and never more than the invoice's tax, however the notes are split.
 */
export function creditedTaxCents(invoice: { taxCents: number; totalCents: number }, creditedBeforeCents: number, taxCreditedBeforeCents: number, amountCents: number): number {
  if (invoice.taxCents <= 0 || invoice.totalCents <= 0) return 0;
  const through = new Money(creditedBeforeCents + amountCents).times(invoice.taxCents).dividedBy(invoice.totalCents).toDecimalPlaces(0).toNumber();
  return Math.max(Math.min(through, invoice.taxCents) - taxCreditedBeforeCents, 0);
}

/** 409 CREDIT_EXCEEDS_PAID, with what is left to give back. */
function exceedsPaid(invoice: InvoiceRow, amountCents: number): ApiError {
  const remainingCents = invoice.amountPaidCents - invoice.amountRefundedCents - invoice.amountCreditedCents;
  return new ApiError(
    409,
    "CREDIT_EXCEEDS_PAID",
    `Invoice ${invoice.id} was paid ${invoice.amountPaidCents} and ${invoice.amountPaidCents - remainingCents} of it was given back already: at most ${remainingCents} can be credited, not ${amountCents}`,
    { amountPaidCents: invoice.amountPaidCents, amountRefundedCents: invoice.amountRefundedCents, amountCreditedCents: invoice.amountCreditedCents, remainingCents },
  );
}

/** The invoice row, locked for the rest of the transaction (every note of it waits its turn). */
async function lockInvoice(tx: Db, invoiceId: string): Promise<InvoiceRow | null> {
  rowsOf(await tx.execute(sql`select id from billing.invoices where id = ${invoiceId} for update`));
  const [row] = await tx.select().from(invoices).where(eq(invoices.id, invoiceId));
  return row ?? null;
}

/** The tax the invoice's notes credited so far (a refund that failed gave nothing back). */
async function taxCreditedOf(tx: Db, invoiceId: string): Promise<number> {
  const [row] = rowsOf<{ cents: string | number }>(
    await tx.execute(sql`select coalesce(sum(tax_cents), 0) as cents from billing.credit_notes where invoice_id = ${invoiceId} and (refund_state is null or refund_state <> 'failed')`),
  );
  return Number(row?.cents ?? 0);
}

/** Writes a note against a locked invoice: its number, the invoice's totals, the balance, the event. */
async function writeNote(
  tx: Db,
  engine: Engine,
  invoice: InvoiceRow,
  at: Date,
  note: { amountCents: number; reason: CreditNoteRow["reason"]; refundTo: CreditNoteRow["refundTo"]; memo: string | null; refundId: string | null; refundState: CreditNoteRow["refundState"]; requestKey: string | null } & Actor,
): Promise<CreditNoteRow> {
  const creditedBefore = invoice.amountRefundedCents + invoice.amountCreditedCents;
  const taxCents = creditedTaxCents(invoice, creditedBefore, await taxCreditedOf(tx, invoice.id), note.amountCents);
  const sequence = invoice.creditNoteCount + 1;
  const toCard = note.refundTo === "payment_method";
  const [row] = await tx
    .insert(creditNotes)
    .values({
      id: newId("cn"),
      number: `${invoice.number}-CN${sequence}`,
      invoiceId: invoice.id,
      customerId: invoice.customerId,
      currency: invoice.currency,
      amountCents: note.amountCents,
      taxCents,
      reason: note.reason,
      refundTo: note.refundTo,
      status: "issued",
      memo: note.memo,
      refundId: note.refundId,
      refundState: note.refundState,
      // the writer's claim on the refund, a lease it renews while it waits for the provider (askRefund)
      refundNextCheckAt: note.refundState === "pending" ? new Date(engine.time.wallNow().getTime() + engine.leaseMs) : null,
      requestKey: note.requestKey,
      actorType: note.actorType,
      actorId: note.actorId,
      createdAt: at,
    })
    .returning();
  await tx
    .update(invoices)
    .set({
      creditNoteCount: sequence,
      ...(toCard ? { amountRefundedCents: invoice.amountRefundedCents + note.amountCents } : { amountCreditedCents: invoice.amountCreditedCents + note.amountCents }),
    })
    .where(eq(invoices.id, invoice.id));
  if (!toCard) {
    await moveBalance(tx, at, invoice.customerId, note.amountCents, {
      kind: "credit_note",
      description: `Credit note ${row!.number}`,
      invoiceId: invoice.id,
      currency: invoice.currency,
      actorType: note.actorType,
      actorId: note.actorId,
    });
  }
  await emitEvent(tx, "credit_note.created", creditNoteJson(row!), at);
  return row!;
}

async function noteByRequestKey(db: Db, requestKey: string): Promise<CreditNoteRow | null> {
  const [row] = await db.select().from(creditNotes).where(eq(creditNotes.requestKey, requestKey));
  return row ?? null;
}

/** 402 REFUND_FAILED: the provider refused the refund (nothing moved); the note records it, and what it held is free again. */
export class RefundFailed extends ApiError {
  constructor(note: CreditNoteRow) {
    super(402, "REFUND_FAILED", `The payment provider refused the refund of credit note ${note.number} (${note.refundFailure ?? "refund_failed"}); nothing was refunded`, {
      creditNoteId: note.id,
      code: note.refundFailure,
    });
    this.name = "RefundFailed";
  }
}

/**
 * `POST /operator/invoices/{id}/credit-notes` (DESIGN §6.10): a note on a paid invoice, refunded to the
 * card or credited to the balance. `requestKey` is the request's (DESIGN §6.6): a retry after a crash
 * or an unknown refund finds its note again and asks the provider with the same key. Answers the note
 * with its refund `succeeded` or still `pending` (the worker settles it); a refused refund is 402.
 */
export async function issueCreditNote(engine: Engine, invoiceId: string, input: CreditNoteInput, actor: Actor, requestKey: string, logger?: Logger): Promise<CreditNoteRow> {
  let note = await noteByRequestKey(engine.db, requestKey);
  if (!note) {
    const now = await engine.time.now();
    note = await engine.db.transaction(async (tx) => {
      const invoice = await lockInvoice(tx, invoiceId);
      if (!invoice || invoice.status === "draft") throw resourceNotFound("invoice");
      const again = await noteByRequestKey(tx, requestKey);
      if (again) return again;
      if (invoice.status !== "paid") {
        throw conflict("INVOICE_NOT_PAID", `Invoice ${invoiceId} is ${invoice.status}: only a paid invoice takes credit notes (void an open one instead)`);
      }
      if (input.amountCents > invoice.amountPaidCents - invoice.amountRefundedCents - invoice.amountCreditedCents) throw exceedsPaid(invoice, input.amountCents);
      if (input.refundTo === "payment_method" && !invoice.paymentId) {
        throw conflict("NO_PAYMENT_TO_REFUND", `Invoice ${invoiceId} was not paid through the payment provider: credit it to the balance (refundTo: "balance")`);
      }
      return writeNote(tx, engine, invoice, now, {
        amountCents: input.amountCents,
        reason: input.reason,
        refundTo: input.refundTo,
        memo: input.memo ?? null,
        refundId: null,
        refundState: input.refundTo === "payment_method" ? "pending" : null,
        requestKey,
        ...actor,
      });
    });
  }
  if (note.refundState === "pending") note = await askRefund(engine, note, logger);
  if (note.refundState === "failed") throw new RefundFailed(note);
  return note;
}

/**
 * Asks the provider for a pending note's refund, with its one key, and records what it says. The
 * note's claim (`refundNextCheckAt`) is held meanwhile, renewed as a lease (docs/vault/cross-cutting/security.md,
 * Billing): the worker asks about it only once a process that died stopped renewing it.
 */
async function askRefund(engine: Engine, note: CreditNoteRow, logger?: Logger): Promise<CreditNoteRow> {
  const [invoice] = await engine.db.select().from(invoices).where(eq(invoices.id, note.invoiceId));
  let held = note.refundNextCheckAt;
  const renew = async () => {
    if (!held) return false;
    const next = new Date(engine.time.wallNow().getTime() + engine.leaseMs);
    const [renewed] = await engine.db
      .update(creditNotes)
      .set({ refundNextCheckAt: next })
      .where(and(eq(creditNotes.id, note.id), eq(creditNotes.refundState, "pending"), eq(creditNotes.refundNextCheckAt, held)))
      .returning({ id: creditNotes.id });
    if (renewed) held = next;
    return renewed !== undefined;
  };
  const outcome: RefundOutcome = await whileRenewing(engine.leaseMs, renew, () =>
    engine.provider.refund({
      creditNoteId: note.id,
      invoiceId: note.invoiceId,
      customerId: note.customerId,
      paymentId: invoice!.paymentId!,
      amountCents: note.amountCents,
      currency: note.currency,
      idempotencyKey: `refund:${note.id}`,
    }),
  ).catch((err: unknown): RefundOutcome => ({ status: "unknown", reason: (err as Error).message }));
  if (outcome.status === "unknown") logger?.warn({ creditNoteId: note.id, reason: outcome.reason }, "a refund's outcome is unknown; the worker asks the provider again with the same key");
  return (await settleRefund(engine, note.id, outcome))!;
}

/**
 * Records a refund's outcome (the provider's answer, a check's, Stripe's event), guarded: only a
 * pending note changes. Made: `succeeded` with the provider's refund id. Refused: `failed`, and the
 * amount it held is taken off the invoice's `amountRefundedCents` (nothing went back), so it may be
 * credited again. Unknown: asked again after 1, 2, 4 … minutes, at most an hour.
 */
export async function settleRefund(engine: Engine, creditNoteId: string, outcome: RefundOutcome): Promise<CreditNoteRow | null> {
  return engine.db.transaction(async (tx) => {
    const [before] = rowsOf<{ invoice_id: string; refund_attempts: number }>(
      await tx.execute(sql`select invoice_id, refund_attempts from billing.credit_notes where id = ${creditNoteId} and refund_state = 'pending' for update`),
    );
    if (!before) return (await tx.select().from(creditNotes).where(eq(creditNotes.id, creditNoteId)))[0] ?? null;
    const attempts = Number(before.refund_attempts) + 1;
    if (outcome.status === "succeeded") {
      const [row] = await tx
        .update(creditNotes)
        .set({ refundState: "succeeded", refundId: outcome.refundId, refundAttempts: attempts, refundNextCheckAt: null, refundFailure: null })
        .where(eq(creditNotes.id, creditNoteId))
        .returning();
      return row!;
    }
    if (outcome.status === "failed") {
      await lockInvoice(tx, before.invoice_id);
      const [row] = await tx
        .update(creditNotes)
        .set({ refundState: "failed", refundId: outcome.refundId, refundAttempts: attempts, refundNextCheckAt: null, refundFailure: outcome.code })
        .where(eq(creditNotes.id, creditNoteId))
        .returning();
      await tx
        .update(invoices)
        .set({ amountRefundedCents: sql`${invoices.amountRefundedCents} - ${row!.amountCents}` })
        .where(eq(invoices.id, before.invoice_id));
      return row!;
    }
    const [row] = await tx
      .update(creditNotes)
      .set({ refundAttempts: attempts, refundNextCheckAt: new Date(engine.time.wallNow().getTime() + checkDelayMs(attempts - 1)) })
      .where(eq(creditNotes.id, creditNoteId))
      .returning();
    return row!;
  });
}

/**
 * The worker's check of a pending refund once it is due (DESIGN §6.10): claimed first (another
 * replica waits until it would be due again), then asked of the provider with the same key, which
 * refunds at most once.
 */
export async function checkRefund(engine: Engine, creditNoteId: string, logger?: Logger): Promise<CreditNoteRow | null> {
  const wall = engine.time.wallNow();
  const [due] = await engine.db.select().from(creditNotes).where(and(eq(creditNotes.id, creditNoteId), eq(creditNotes.refundState, "pending")));
  if (!due?.refundNextCheckAt || due.refundNextCheckAt > wall) return due ?? null;
  const [claimed] = await engine.db
    .update(creditNotes)
    .set({ refundNextCheckAt: new Date(wall.getTime() + engine.leaseMs) })
    .where(and(eq(creditNotes.id, creditNoteId), eq(creditNotes.refundState, "pending"), eq(creditNotes.refundNextCheckAt, due.refundNextCheckAt)))
    .returning();
  if (!claimed) return null;
  return askRefund(engine, claimed, logger);
}

/** The refunds a request left in flight when its process died: asked about now (as `askNowAboutPayments`). */
export async function askNowAboutRefunds(engine: Engine, requestKey: string): Promise<void> {
  await engine.db
    .update(creditNotes)
    .set({ refundNextCheckAt: engine.time.wallNow() })
    .where(and(eq(creditNotes.requestKey, requestKey), eq(creditNotes.refundState, "pending")));
}

/** `GET /invoices/{id}/credit-notes`: an invoice's notes, in the order they were issued. */
export async function creditNotesOf(db: Db, invoiceId: string): Promise<CreditNoteRow[]> {
  return db.select().from(creditNotes).where(eq(creditNotes.invoiceId, invoiceId)).orderBy(asc(creditNotes.createdAt), asc(creditNotes.number));
}

/**
 * A refund made at the provider itself (Stripe's dashboard; `charge.refunded` without a
 * `core_credit_note_id`): recorded as a credit note with reason `external`, refunded to the card, on
 * the invoice its payment paid. Found again by its `refundId` (a unique index), so a replayed event
 * records nothing twice. Answers what it did, for the event's record.
 */
export async function recordExternalRefund(engine: Engine, refund: { refundId: string; paymentId: string; amountCents: number }): Promise<string> {
  const now = await engine.time.now();
  try {
    return await engine.db.transaction(async (tx) => {
      const [paid] = await tx.select({ id: invoices.id }).from(invoices).where(eq(invoices.paymentId, refund.paymentId));
      if (!paid) return `ignored: no invoice paid by ${refund.paymentId}`;
      const invoice = (await lockInvoice(tx, paid.id))!;
      const [known] = await tx.select({ id: creditNotes.id }).from(creditNotes).where(eq(creditNotes.refundId, refund.refundId));
      if (known) return `already recorded: ${refund.refundId} is credit note ${known.id}`;
      if (refund.amountCents > invoice.amountPaidCents - invoice.amountRefundedCents - invoice.amountCreditedCents) {
        engine.logger.warn({ invoiceId: invoice.id, refundId: refund.refundId }, "a refund made at the provider exceeds what is left of the invoice's payment after its credit notes; not recorded, see the invoice's credit notes");
        return `not recorded: ${refund.refundId} (${refund.amountCents}) exceeds what is left of invoice ${invoice.id}`;
      }
      const note = await writeNote(tx, engine, invoice, now, {
        amountCents: refund.amountCents,
        reason: "external",
        refundTo: "payment_method",
        memo: "Refunded at the payment provider",
        refundId: refund.refundId,
        refundState: "succeeded",
        requestKey: null,
        actorType: "provider",
        actorId: null,
      });
      return `recorded: ${refund.refundId} as credit note ${note.id} on invoice ${invoice.id}`;
    });
  } catch (err) {
    // the same refund recorded at once by another delivery of the event
    if (isUniqueViolation(err, "credit_notes_refund_key")) return `already recorded: ${refund.refundId}`;
    throw err;
  }
}

/** Stripe's `charge.dispute.created` (DESIGN §6.10): the invoice its payment paid is `disputed`, and `invoice.disputed` goes out once. */
export async function markDisputed(engine: Engine, paymentId: string): Promise<string> {
  const now = await engine.time.now();
  return engine.db.transaction(async (tx) => {
    const [row] = await tx
      .update(invoices)
      .set({ disputed: true })
      .where(and(eq(invoices.paymentId, paymentId), eq(invoices.disputed, false)))
      .returning();
    if (!row) return `nothing to do: no undisputed invoice paid by ${paymentId}`;
    await emitInvoiceEvent(tx, "invoice.disputed", row, now);
    return `disputed: invoice ${row.id}`;
  });
}
