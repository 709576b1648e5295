import Decimal from "decimal.js";
import { and, asc, eq, inArray, sql } from "drizzle-orm";
import { conflict, newId, resourceNotFound, unixSeconds } from "@core/kit";
import { rowsOf, type Db } from "@core/storage";
import { balanceLedger, customers, invoiceLines, invoices, type CustomerRow, type CustomerSnapshot, type Intent, type InvoiceLineRow, type InvoiceRow, type Seller } from "./db/schema.js";
import type { Engine } from "./engine.js";
import type { Tier } from "./plans.js";
import { decideTax, type TaxDecision } from "./tax.js";
import { emitEvent, eventWanted, type EventType } from "./webhooks/outbox.js";

/** Stripe's smallest charge: a due amount below it is carried to the next invoice (DESIGN §6.3). */
export const MINIMUM_CHARGE_CENTS = 50;

const Money = Decimal.clone({ precision: 60, rounding: Decimal.ROUND_HALF_UP });

export interface DraftLine {
  kind: InvoiceLineRow["kind"];
  description: string;
  amountCents: number;
  meter?: string | null;
  quantity?: string | null;
  unitAmountCents?: string | null;
  periodStart?: Date | null;
  periodEnd?: Date | null;
}

/** The line that charges a plan for a period: its price × the subscription's quantity. */
export function subscriptionLine(plan: { name: string; priceCents: number }, quantity: number, start: Date, end: Date): DraftLine {
  return {
    kind: "subscription",
    description: quantity === 1 ? `${plan.name} (monthly)` : `${quantity} × ${plan.name} (monthly)`,
    amountCents: plan.priceCents * quantity,
    quantity: String(quantity),
    unitAmountCents: String(plan.priceCents),
    periodStart: start,
    periodEnd: end,
  };
}

/** The buyer as an invoice names it (DESIGN §6.11). */
export function snapshotOf(customer: CustomerRow): CustomerSnapshot {
  return { email: customer.email, name: customer.name, address: customer.address ?? null, taxIds: customer.taxIds ?? [], taxExempt: customer.taxExempt };
}

/** What an invoice of these lines comes to for a customer with this balance (DESIGN §6.3, §6.4, §6.11). */
export interface InvoiceAmounts {
  /** every line with its quantity and unit price, and the tax rate of a taxed line (null on a `carried` one) */
  lines: PricedLine[];
  subtotalCents: number;
  /** the subtotal without `carried` lines (they were taxed on their own invoice): what the rate applies to */
  taxBaseCents: number;
  taxRatePercent: string;
  taxTreatment: TaxDecision["treatment"];
  taxCents: number;
  totalCents: number;
  creditAppliedCents: number;
  amountDueCents: number;
  /** a due amount of 1 to 49 cents: not charged, carried to the next invoice */
  carriedForwardCents: number;
  /** what the provider is asked to charge */
  chargeCents: number;
  /** a negative total: given back to the customer's balance */
  creditedBackCents: number;
}

export interface PricedLine extends DraftLine {
  taxRatePercent: string | null;
}

/** The tax decision for this customer's invoices now (DESIGN §6.11); no customer yet: the default rate. */
export function taxOf(engine: Pick<Engine, "tax">, customer: Pick<CustomerRow, "address" | "taxIds" | "taxExempt"> | null | undefined): TaxDecision {
  return decideTax(engine.tax.rates, engine.tax.seller, customer ?? null);
}

/**
 * The pricing of an invoice, one pure function so a preview, the upcoming invoice and the charge can
 * never differ (DESIGN §6.4, §6.11): a carried debit becomes a `carried` line; every line shows a
 * quantity and a unit price (a line of one amount: 1 × that amount); tax is one amount, the rate on
 * the tax base (the subtotal without `carried` lines, which were taxed where they arose), rounded once
 * half away from zero, so the printed tax is the printed base × the printed rate; a base of 0 or less
 * pays none (a credit is not taxed back). The customer's credit is applied up to the total; a due
 * amount under the minimum charge is carried forward.
 */
export function priceInvoice(input: { lines: DraftLine[]; tax: TaxDecision; balanceCents: number }): InvoiceAmounts {
  const rate = input.tax.ratePercent;
  const lines: PricedLine[] = input.lines.map((line) => ({
    ...line,
    quantity: line.quantity ?? "1",
    unitAmountCents: line.unitAmountCents ?? String(line.amountCents),
    taxRatePercent: line.kind === "carried" ? null : rate,
  }));
  if (input.balanceCents < 0) {
    const owed = -input.balanceCents;
    lines.push({ kind: "carried", description: "Unpaid balance carried from earlier invoices", amountCents: owed, quantity: "1", unitAmountCents: String(owed), taxRatePercent: null });
  }
  const taxBaseCents = lines.filter((line) => line.kind !== "carried").reduce((sum, line) => sum + line.amountCents, 0);
  const subtotalCents = lines.reduce((sum, line) => sum + line.amountCents, 0);
  const taxCents = taxBaseCents > 0 ? new Money(taxBaseCents).times(rate).dividedBy(100).toDecimalPlaces(0).toNumber() : 0;
  const totalCents = subtotalCents + taxCents;
  const creditAppliedCents = input.balanceCents > 0 ? Math.min(input.balanceCents, Math.max(totalCents, 0)) : 0;
  const amountDueCents = Math.max(totalCents - creditAppliedCents, 0);
  const carriedForwardCents = amountDueCents > 0 && amountDueCents < MINIMUM_CHARGE_CENTS ? amountDueCents : 0;
  return {
    lines,
    subtotalCents,
    taxBaseCents,
    taxRatePercent: rate,
    taxTreatment: input.tax.treatment,
    taxCents,
    totalCents,
    creditAppliedCents,
    amountDueCents,
    carriedForwardCents,
    chargeCents: amountDueCents - carriedForwardCents,
    creditedBackCents: totalCents < 0 ? -totalCents : 0,
  };
}

/**
 * An invoice priced for its customer under the customer's lock, in the transaction that writes it
 * (`priceUnderCustomerLock`): the only way to the amounts a draft is written with.
 */
export interface LockedPricing {
  /** the customer as it is under the lock: its balance is the one the amounts applied */
  customer: CustomerRow;
  amounts: InvoiceAmounts;
  /** the transaction that holds the lock: the invoice is written in it, or not at all */
  readonly tx: Db;
}

/**
 * Prices an invoice of `lines` for a customer with the balance read under the customer's lock
 * (docs/vault/cross-cutting/security.md, Billing: one credit applied once). The lock is held until
 * the transaction ends, and the draft is written and finalized in that same transaction, so two
 * invoices priced at once (a renewal and a usage close on two replicas, a tier change, an upgrade,
 * `generate`) take turns: the second sees what the first applied, and no credit is applied twice nor
 * a carried debit collected twice. The customer's current subscription is locked first, as every
 * change of a subscription locks it before the customer, so the two locks are always taken in one
 * order. `balance: "debit"` applies only a carried debit (`generate` invoices what is owed). The
 * preview and the upcoming invoice read without it: they write nothing.
 */
export async function priceUnderCustomerLock(tx: Db, engine: Pick<Engine, "tax">, customerId: string, lines: DraftLine[], options: { balance?: "all" | "debit" } = {}): Promise<LockedPricing> {
  rowsOf(await tx.execute(sql`select id from billing.subscriptions where customer_id = ${customerId} and current for update`));
  const customer = await lockCustomer(tx, customerId);
  const balanceCents = options.balance === "debit" ? Math.min(customer.balanceCents, 0) : customer.balanceCents;
  return { customer, amounts: priceInvoice({ lines, tax: taxOf(engine, customer), balanceCents }), tx };
}

export interface NewInvoice {
  /** its amounts and customer, priced under the customer's lock in the transaction that writes it */
  priced: LockedPricing;
  platformId: string;
  subscriptionId: string | null;
  reason: InvoiceRow["reason"];
  periodStart: Date;
  periodEnd: Date;
  /** the request's key: its retry finds this draft again */
  requestKey?: string | null;
}

/** Writes a draft: not numbered, not owed, invisible to the ledger until it is finalized. */
export async function createDraft(tx: Db, now: Date, input: NewInvoice): Promise<InvoiceRow> {
  // amounts priced in another transaction read a balance whose lock is gone: never written
  if (input.priced.tx !== tx) throw new Error("an invoice is written in the transaction that priced it under its customer's lock");
  const a = input.priced.amounts;
  const customer = input.priced.customer;
  const [row] = await tx
    .insert(invoices)
    .values({
      id: newId("in"),
      platformId: input.platformId,
      customerId: customer.id,
      subscriptionId: input.subscriptionId,
      reason: input.reason,
      status: "draft",
      currency: customer.currency,
      subtotalCents: a.subtotalCents,
      taxCents: a.taxCents,
      taxRatePercent: a.taxRatePercent,
      taxBaseCents: a.taxBaseCents,
      taxTreatment: a.taxTreatment,
      creditAppliedCents: a.creditAppliedCents,
      totalCents: a.totalCents,
      amountDueCents: a.amountDueCents,
      amountCarriedCents: a.carriedForwardCents,
      periodStart: input.periodStart,
      periodEnd: input.periodEnd,
      // a draft names its buyer as it is now; finalization names it again, as it is then
      customerSnapshot: snapshotOf(customer),
      requestKey: input.requestKey ?? null,
      createdAt: now,
    })
    .returning();
  if (a.lines.length > 0) {
    await tx.insert(invoiceLines).values(
      a.lines.map((line, position) => ({
        id: newId("il"),
        invoiceId: row!.id,
        position,
        kind: line.kind,
        description: line.description,
        meter: line.meter ?? null,
        quantity: line.quantity ?? null,
        unitAmountCents: line.unitAmountCents ?? null,
        amountCents: line.amountCents,
        taxRatePercent: line.taxRatePercent,
        periodStart: line.periodStart ?? null,
        periodEnd: line.periodEnd ?? null,
      })),
    );
  }
  return row!;
}

export interface Actor {
  actorType: string;
  actorId: string | null;
}

/** One movement of a customer's balance: the customer row and its immutable ledger line together. */
export async function moveBalance(
  tx: Db,
  now: Date,
  customerId: string,
  amountCents: number,
  entry: { kind: (typeof balanceLedger.$inferInsert)["kind"]; description: string; invoiceId?: string | null; currency: string } & Actor,
): Promise<number> {
  if (amountCents === 0) return (await lockCustomer(tx, customerId)).balanceCents;
  const [row] = await tx
    .update(customers)
    .set({ balanceCents: sql`${customers.balanceCents} + ${amountCents}`, updatedAt: now })
    .where(eq(customers.id, customerId))
    .returning({ balanceCents: customers.balanceCents });
  await tx.insert(balanceLedger).values({
    id: newId("cbt"),
    customerId,
    amountCents,
    currency: entry.currency,
    kind: entry.kind,
    description: entry.description,
    invoiceId: entry.invoiceId ?? null,
    balanceAfterCents: row!.balanceCents,
    actorType: entry.actorType,
    actorId: entry.actorId,
    createdAt: now,
  });
  return row!.balanceCents;
}

/** The customer row, locked for the rest of the transaction (its balance and next invoice number). */
export async function lockCustomer(tx: Db, customerId: string): Promise<CustomerRow> {
  rowsOf(await tx.execute(sql`select id from billing.customers where id = ${customerId} for update`));
  const [row] = await tx.select().from(customers).where(eq(customers.id, customerId));
  if (!row) throw resourceNotFound("customer");
  return row;
}

const SYSTEM: Actor = { actorType: "system", actorId: null };

/**
 * Finalizes a draft inside the caller's transaction (DESIGN §6.4): the customer's next number, gapless,
 * is taken here, so numbers follow finalization order. The seller and the buyer (name, address, tax
 * ids, exemption) are copied onto it here (DESIGN §6.11): later changes of either never alter it.
 * The balance moves as the draft priced it (credit applied, carried debit collected, a due amount
 * under the minimum carried forward): `open` is owed and collected next (DESIGN §6.9), `paid` had
 * nothing to charge.
 */
export async function finalizeDraft(tx: Db, now: Date, invoiceId: string, outcome: "open" | "paid", seller: Seller): Promise<InvoiceRow> {
  const [draft] = await tx.select().from(invoices).where(eq(invoices.id, invoiceId));
  if (!draft || draft.status !== "draft") throw conflict("INVOICE_NOT_DRAFT", `Invoice ${invoiceId} is not a draft`);
  const customer = await lockCustomer(tx, draft.customerId);
  await tx.update(customers).set({ nextInvoiceNumber: customer.nextInvoiceNumber + 1 }).where(eq(customers.id, customer.id));
  const number = `${customer.invoicePrefix}-${String(customer.nextInvoiceNumber).padStart(4, "0")}`;
  await applyToBalance(tx, now, draft, customer.currency);
  const paid = outcome === "paid";
  const [row] = await tx
    .update(invoices)
    .set({ number, status: outcome, finalizedAt: now, seller, customerSnapshot: snapshotOf(customer), paidAt: paid ? now : null, amountPaidCents: paid ? draft.amountDueCents - draft.amountCarriedCents : 0 })
    .where(eq(invoices.id, invoiceId))
    .returning();
  await emitInvoiceEvent(tx, "invoice.finalized", row!, now);
  if (paid) await emitInvoiceEvent(tx, "invoice.paid", row!, now);
  return row!;
}

/** An invoice event carries the invoice as GET /invoices/{id} answers it, lines included (DESIGN §6.8). */
export async function emitInvoiceEvent(tx: Db, type: Extract<EventType, `invoice.${string}`>, invoice: InvoiceRow, at: Date): Promise<void> {
  // with no endpoint taking it (the usual case), the lines are not even read
  if (!(await eventWanted(tx, type))) return;
  await emitEvent(tx, type, invoiceJson(invoice, await linesOf(tx, invoice.id)), at);
}

async function applyToBalance(tx: Db, now: Date, invoice: InvoiceRow, currency: string) {
  const on = (kind: (typeof balanceLedger.$inferInsert)["kind"], description: string) => ({ kind, description, invoiceId: invoice.id, currency, ...SYSTEM });
  const [carried] = await tx
    .select({ amountCents: invoiceLines.amountCents })
    .from(invoiceLines)
    .where(and(eq(invoiceLines.invoiceId, invoice.id), eq(invoiceLines.kind, "carried")));
  if (carried) await moveBalance(tx, now, invoice.customerId, carried.amountCents, on("collected", "Carried balance collected on this invoice"));
  if (invoice.creditAppliedCents > 0) await moveBalance(tx, now, invoice.customerId, -invoice.creditAppliedCents, on("applied", "Credit applied to this invoice"));
  if (invoice.amountCarriedCents > 0) {
    await moveBalance(tx, now, invoice.customerId, -invoice.amountCarriedCents, on("carried", `Below the minimum charge: carried to the next invoice`));
  }
  if (invoice.totalCents < 0) await moveBalance(tx, now, invoice.customerId, -invoice.totalCents, on("proration_credit", "Credit from this invoice"));
}

/**
 * Gives back the balance an invoice moved when it was finalized (the credit it applied, the debit it
 * collected, what it carried forward): its void undoes them, in the voiding transaction.
 */
export async function giveBackBalance(tx: Db, now: Date, invoice: InvoiceRow, actor: Actor): Promise<void> {
  const restore = (amount: number, description: string) =>
    moveBalance(tx, now, invoice.customerId, amount, { kind: "restored", description, invoiceId: invoice.id, currency: invoice.currency, ...actor });
  if (invoice.creditAppliedCents > 0) await restore(invoice.creditAppliedCents, "Credit given back: its invoice was voided");
  const [carried] = await tx
    .select({ amountCents: invoiceLines.amountCents })
    .from(invoiceLines)
    .where(and(eq(invoiceLines.invoiceId, invoice.id), eq(invoiceLines.kind, "carried")));
  if (carried) await restore(-carried.amountCents, "Carried balance owed again: its invoice was voided");
  if (invoice.amountCarriedCents > 0) await restore(invoice.amountCarriedCents, "Carried amount dropped: its invoice was voided");
}

export async function linesOf(db: Db, invoiceId: string): Promise<InvoiceLineRow[]> {
  return db.select().from(invoiceLines).where(eq(invoiceLines.invoiceId, invoiceId)).orderBy(asc(invoiceLines.position));
}

/** The lines of several invoices in one query (a page of invoices), by invoice id. */
export async function linesOfMany(db: Db, invoiceIds: string[]): Promise<Map<string, InvoiceLineRow[]>> {
  const byInvoice = new Map<string, InvoiceLineRow[]>(invoiceIds.map((id) => [id, []]));
  if (invoiceIds.length === 0) return byInvoice;
  const rows = await db.select().from(invoiceLines).where(inArray(invoiceLines.invoiceId, invoiceIds)).orderBy(asc(invoiceLines.invoiceId), asc(invoiceLines.position));
  for (const row of rows) byInvoice.get(row.invoiceId)!.push(row);
  return byInvoice;
}

const seconds = (d: Date | null) => (d ? unixSeconds(d) : null);

/** The intent an invoice was made with (DESIGN §6.9); invoices older than intents settle what is owed. */
export const intentOf = (invoice: Pick<InvoiceRow, "intent" | "reason">): Intent => invoice.intent ?? (invoice.reason === "manual" ? { kind: "manual" } : { kind: "renewal" });

/** An invoice's intent as every answer shows it. */
export interface IntentView {
  kind: Intent["kind"];
  tier?: Tier;
  planId?: string;
  quantity?: number;
}

/**
 * The intent in its answer's shape (DESIGN §6.9, like Stripe's `billing_reason`): what becomes true
 * once the invoice is paid (the kind, and the tier, plan and seats it sets or renews), never how it
 * is done (the card, the request's metadata, what is credited back).
 */
export function intentJson(intent: Intent): IntentView {
  const view: IntentView = { kind: intent.kind };
  if ("tier" in intent && intent.tier !== undefined) view.tier = intent.tier as Tier;
  if ("planId" in intent && intent.planId !== undefined) view.planId = intent.planId;
  if ("quantity" in intent && intent.quantity !== undefined) view.quantity = intent.quantity;
  return view;
}

/** The invoice of DESIGN §6.4 in its answer's shape. */
export function invoiceJson(row: InvoiceRow, lines: InvoiceLineRow[]) {
  return {
    id: row.id,
    number: row.number,
    platformId: row.platformId,
    customerId: row.customerId,
    status: row.status,
    currency: row.currency,
    subtotalCents: row.subtotalCents,
    taxCents: row.taxCents,
    creditAppliedCents: row.creditAppliedCents,
    totalCents: row.totalCents,
    amountDueCents: row.amountDueCents,
    amountPaidCents: row.amountPaidCents,
    // what credit notes gave back (DESIGN §6.10): to the card, to the balance; and a dispute at the provider
    amountRefundedCents: row.amountRefundedCents,
    amountCreditedCents: row.amountCreditedCents,
    disputed: row.disputed,
    periodStart: unixSeconds(row.periodStart),
    periodEnd: unixSeconds(row.periodEnd),
    createdAt: unixSeconds(row.createdAt),
    finalizedAt: seconds(row.finalizedAt),
    paidAt: seconds(row.paidAt),
    customerSnapshot: snapshotJson(row.customerSnapshot),
    seller: row.seller ?? null,
    taxRatePercent: decimalOrNull(row.taxRatePercent),
    taxBaseCents: row.taxBaseCents ?? null,
    taxTreatment: row.taxTreatment ?? null,
    attemptCount: row.attemptCount,
    nextPaymentAttempt: seconds(row.nextAttemptAt),
    collection: row.collectionState ? { state: row.collectionState, since: seconds(row.collectionSince), nextCheckAt: seconds(row.nextCheckAt) } : null,
    intent: intentJson(intentOf(row)),
    lines: lines.map((line) => lineJson(line, line.id)),
  };
}

const decimalOrNull = (value: string | null | undefined) => (value === null || value === undefined ? null : new Money(value).toFixed());

/** The buyer on an invoice, every field present (invoices finalized before buyer details have only email and name). */
export function snapshotJson(snapshot: CustomerSnapshot) {
  return { email: snapshot.email, name: snapshot.name ?? null, address: snapshot.address ?? null, taxIds: snapshot.taxIds ?? [], taxExempt: snapshot.taxExempt ?? "none" };
}

/** An invoice line in its answer's shape: a stored one with its id, an upcoming invoice's without. */
export function lineJson<Id extends string | null>(line: DraftLine & { taxRatePercent?: string | null }, id: Id) {
  const decimal = decimalOrNull;
  return {
    id,
    kind: line.kind,
    description: line.description,
    meter: line.meter ?? null,
    quantity: decimal(line.quantity),
    unitAmountCents: decimal(line.unitAmountCents),
    amountCents: line.amountCents,
    taxRatePercent: decimal(line.taxRatePercent),
    periodStart: seconds(line.periodStart ?? null),
    periodEnd: seconds(line.periodEnd ?? null),
  };
}
