import { and, eq, gt, inArray, sql } from "drizzle-orm";
import { invoices } from "./db/schema.js";
import type { Engine } from "./engine.js";
import type { ProviderPayment } from "./provider/types.js";

/** The window `GET /operator/payments/reconcile` looks at by default: the last 35 days (DESIGN §6.9). */
export const DEFAULT_RECONCILE_DAYS = 35;
/** The widest window one call reads (each call lists the provider's payments of it). */
export const MAX_RECONCILE_DAYS = 400;
/** Payments a day either side of the window are read too, so an invoice paid at its edge finds its payment. */
const EDGE_MS = 86_400_000;

export interface PaymentReconciliation {
  consistent: boolean;
  /** succeeded provider payments for billing's invoices made in the window */
  payments: number;
  /** invoices paid with money (not by credit alone) whose payment began in the window */
  paidInvoices: number;
  /** money the provider took for an invoice that is not paid (open, void, uncollectible, unknown) or for another amount */
  unmatchedPayments: { providerPaymentId: string; invoiceId: string; amountCents: number }[];
  /** a paid invoice with no payment at the provider */
  paidWithoutPayment: { invoiceId: string }[];
  /** an invoice paid more than once */
  duplicatePayments: { invoiceId: string; providerPaymentIds: string[] }[];
}

/**
 * `GET /operator/payments/reconcile` (DESIGN §6.9): the provider's payments for billing against the
 * invoices. The window is wall-clock time, the provider's own (a payment's creation; the start of an
 * invoice's paying attempt). Consistent means every payment paid one invoice, by its amount, and
 * every invoice paid with money has exactly one payment.
 */
export async function reconcilePayments(engine: Engine, window: { from: Date; to: Date }): Promise<PaymentReconciliation> {
  const fetched = await engine.provider.payments({ from: new Date(window.from.getTime() - EDGE_MS), to: new Date(window.to.getTime() + EDGE_MS) });
  const inWindow = (p: ProviderPayment) => p.createdAt * 1000 >= window.from.getTime() && p.createdAt * 1000 <= window.to.getTime();
  const byInvoice = new Map<string, ProviderPayment[]>();
  for (const payment of fetched) byInvoice.set(payment.invoiceId, [...(byInvoice.get(payment.invoiceId) ?? []), payment]);

  // the invoices the window's payments name, and the invoices paid in the window
  const named = [...new Set(fetched.filter(inWindow).map((p) => p.invoiceId))];
  const namedRows = named.length > 0 ? await engine.db.select().from(invoices).where(inArray(invoices.id, named)) : [];
  const paidRows = await engine.db
    .select()
    .from(invoices)
    .where(
      and(
        eq(invoices.status, "paid"),
        gt(invoices.amountPaidCents, 0),
        // whole seconds, as the provider's payments count them: the window's last second is in it
        sql`coalesce(${invoices.collectionSince}, ${invoices.paidAt}) >= ${window.from.toISOString()}::timestamptz`,
        sql`coalesce(${invoices.collectionSince}, ${invoices.paidAt}) < ${new Date(window.to.getTime() + 1000).toISOString()}::timestamptz`,
      ),
    );
  const invoiceOf = new Map([...namedRows, ...paidRows].map((row) => [row.id, row]));

  const unmatchedPayments = fetched
    .filter(inWindow)
    .filter((p) => {
      const invoice = invoiceOf.get(p.invoiceId);
      return !invoice || invoice.status !== "paid" || invoice.amountPaidCents !== p.amountCents;
    })
    .map((p) => ({ providerPaymentId: p.id, invoiceId: p.invoiceId, amountCents: p.amountCents }));
  const paidWithoutPayment = paidRows.filter((row) => !byInvoice.has(row.id)).map((row) => ({ invoiceId: row.id }));
  const duplicatePayments = [...byInvoice.entries()]
    .filter(([, payments]) => payments.length > 1 && payments.some(inWindow))
    .map(([invoiceId, payments]) => ({ invoiceId, providerPaymentIds: payments.map((p) => p.id).sort() }));
  return {
    consistent: unmatchedPayments.length === 0 && paidWithoutPayment.length === 0 && duplicatePayments.length === 0,
    payments: fetched.filter(inWindow).length,
    paidInvoices: paidRows.length,
    unmatchedPayments,
    paidWithoutPayment,
    duplicatePayments,
  };
}
