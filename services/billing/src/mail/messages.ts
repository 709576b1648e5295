import { eq } from "drizzle-orm";
import type { Db } from "@core/storage";
import { intentOf } from "../invoicing.js";
import { customers, paymentMethods, type InvoiceRow, type SubscriptionRow } from "../db/schema.js";
import type { Engine } from "../engine.js";
import { formatMoney } from "../money.js";
import type { Tier } from "../plans.js";
import { declineMessage, HARD_DECLINES } from "../provider/types.js";
import { enqueueMail } from "./outbox.js";

/**
 * Billing's mails to a customer (DESIGN §6.11), each rendered and written to the mail outbox in the
 * transaction of the fact it tells, once (its dedupe key): a receipt when money paid an invoice, a
 * payment-failed notice for each refused attempt that nobody saw refused, a trial-ending notice three
 * days ahead. Mails go to the customer's billing email as it is when the fact happens. Dates are UTC,
 * amounts in the currency's minor units with separators (`formatMoney`, the one helper), and no mail
 * carries a secret: its links are the invoice PDF and the portal's entry, which ask the reader to
 * sign in.
 */

const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];

/** "31 January 2026" (UTC). */
export const formatDay = (at: Date) => `${at.getUTCDate()} ${MONTHS[at.getUTCMonth()]} ${at.getUTCFullYear()}`;
/** "31 January 2026, 10:00 UTC". */
export const formatDateTime = (at: Date) => `${formatDay(at)}, ${String(at.getUTCHours()).padStart(2, "0")}:${String(at.getUTCMinutes()).padStart(2, "0")} UTC`;

const BRANDS: Record<string, string> = { visa: "Visa", mastercard: "Mastercard", amex: "American Express", discover: "Discover", jcb: "JCB", diners: "Diners Club", unionpay: "UnionPay" };

/**
 * A card as a person knows it: "Visa ending in 4242". Only the cards billing keeps (the local
 * provider's) are known here; a Stripe card is "the card on file" (its details live at Stripe, and a
 * transaction does not call out).
 */
async function cardWords(tx: Db, paymentMethodId: string | null): Promise<string | null> {
  if (!paymentMethodId) return null;
  const [card] = await tx.select({ brand: paymentMethods.brand, last4: paymentMethods.last4 }).from(paymentMethods).where(eq(paymentMethods.id, paymentMethodId));
  return card ? `${BRANDS[card.brand] ?? card.brand.charAt(0).toUpperCase() + card.brand.slice(1)} ending in ${card.last4}` : "the card on file";
}

async function billingEmailOf(tx: Db, customerId: string): Promise<string | null> {
  const [row] = await tx.select({ email: customers.email }).from(customers).where(eq(customers.id, customerId));
  return row?.email ?? null;
}

const invoiceName = (invoice: InvoiceRow) => invoice.number ?? invoice.id;
const period = (invoice: InvoiceRow) => `${formatDay(invoice.periodStart)} to ${formatDay(invoice.periodEnd)} (UTC)`;
const signature = (invoice: InvoiceRow) => invoice.seller?.name ?? "Billing";

/** Where a customer reads an invoice (DESIGN §6.11, `GET /invoices/{id}/pdf`). */
export const invoicePdfUrl = (billingUrl: string, invoiceId: string) => `${billingUrl}/invoices/${encodeURIComponent(invoiceId)}/pdf`;
/** Where a customer opens the portal for a platform: it asks them to sign in, then opens a session. */
export const portalOpenUrl = (billingUrl: string, platformId: string) => `${billingUrl}/portal/open?platformId=${encodeURIComponent(platformId)}`;

/**
 * The receipt of an invoice money paid (amount paid > 0): its number, amount, period, card and PDF
 * link. An invoice that credit or the minimum-charge rule settled moved no money and has none.
 */
export async function mailReceipt(tx: Db, engine: Engine, invoice: InvoiceRow): Promise<void> {
  if (invoice.status !== "paid" || invoice.amountPaidCents <= 0) return;
  const to = await billingEmailOf(tx, invoice.customerId);
  if (!to) return;
  const amount = formatMoney(invoice.amountPaidCents, invoice.currency);
  const card = await cardWords(tx, invoice.chargePaymentMethodId);
  const lines = [
    `Thank you for your payment. This is your receipt.`,
    ``,
    `Invoice:     ${invoiceName(invoice)}`,
    `Amount paid: ${amount}`,
    `Period:      ${period(invoice)}`,
    `Paid on:     ${formatDateTime(invoice.paidAt ?? invoice.finalizedAt ?? invoice.createdAt)}`,
    ...(card ? [`Paid with:   ${card}`] : []),
    ``,
    `The invoice (PDF): ${invoicePdfUrl(engine.billingUrl, invoice.id)}`,
    `Your billing:      ${portalOpenUrl(engine.billingUrl, invoice.platformId)}`,
    ``,
    `— ${signature(invoice)}`,
  ];
  await enqueueMail(tx, { kind: "receipt", dedupeKey: `receipt:${invoice.id}`, to, subject: `Receipt for invoice ${invoiceName(invoice)}: ${amount} paid`, text: lines.join("\n") }, engine.time.wallNow());
}

/** Why a charge was refused, in plain words (Stripe's messages, DESIGN §6.1). */
export function reasonInWords(code: string | null, declineCode: string | null): string {
  if (code === "no_payment_method") return "There is no card on file to charge.";
  return declineMessage(code ?? "card_declined", declineCode);
}

/**
 * A refused attempt of an invoice (`attempt`, counted from 0): the amount, the reason in plain
 * words, the next try's date or that none will follow (a hard decline, the retries spent, a trial's
 * first charge), and the portal, where a new default card is charged at once. Declines a person saw
 * as they happened (an upgrade, a tier change, more seats: the request answered 402 and changed
 * nothing) are not mailed.
 */
export async function mailPaymentFailed(tx: Db, engine: Engine, invoice: InvoiceRow, attempt: number): Promise<void> {
  const kind = intentOf(invoice).kind;
  if (kind === "upgrade" || kind === "change_tier" || kind === "seats") return;
  const to = await billingEmailOf(tx, invoice.customerId);
  if (!to) return;
  const amount = formatMoney(invoice.amountDueCents - invoice.amountCarriedCents, invoice.currency);
  const code = invoice.lastDeclineCode ?? invoice.lastFailureCode;
  const card = await cardWords(tx, invoice.chargePaymentMethodId);
  const portal = portalOpenUrl(engine.billingUrl, invoice.platformId);
  let next: string[];
  if (invoice.status === "open" && invoice.nextAttemptAt) {
    next = [`Next attempt: ${formatDateTime(invoice.nextAttemptAt)}. To pay sooner, add a card in your billing portal and make it the default: it is charged at once.`];
  } else if (kind === "trial_end") {
    next = [`No retry will follow: your trial has ended and your platform is back on the free plan. Upgrade again from your billing portal whenever you like.`];
  } else {
    const why = HARD_DECLINES.has(code ?? "") ? "this card cannot be charged again" : `all ${attempt} retries have been used`;
    const after = kind === "renewal" ? " Your platform is back on the free plan; you can still pay this invoice and upgrade again from your billing portal." : " You can still pay it from your billing portal.";
    next = [`No retry will follow: ${why}, so the invoice is marked uncollectible.${after}`];
  }
  const lines = [
    `We could not collect the payment of invoice ${invoiceName(invoice)}.`,
    ``,
    `Invoice: ${invoiceName(invoice)}`,
    `Amount:  ${amount}`,
    `Period:  ${period(invoice)}`,
    ...(card ? [`Card:    ${card}`] : []),
    `Reason:  ${reasonInWords(invoice.lastFailureCode, invoice.lastDeclineCode)}`,
    ``,
    ...next,
    ``,
    `Your billing portal: ${portal}`,
    ``,
    `— ${signature(invoice)}`,
  ];
  await enqueueMail(
    tx,
    { kind: "payment_failed", dedupeKey: `payment_failed:${invoice.id}:${attempt}`, to, subject: `Payment failed for invoice ${invoiceName(invoice)} (${amount})`, text: lines.join("\n") },
    engine.time.wallNow(),
  );
}

/** What a trial's end will charge, from the upcoming invoice (the one definition of "next charge", DESIGN §6.9). */
export interface TrialCharge {
  amountDueCents: number;
  currency: string;
}

/**
 * "Your trial ends in 3 days" (DESIGN §6.3, with `subscription.trial_will_end`): the date, the plan,
 * and what will be charged then, to which card — or that, without a card, the platform returns to
 * free. Once per (subscription, trial end): a trial moved to another end is told again.
 */
export async function mailTrialEnding(tx: Db, engine: Engine, subscription: SubscriptionRow, charge: TrialCharge | null): Promise<void> {
  if (!subscription.customerId || !subscription.trialEnd) return;
  const [customer] = await tx.select().from(customers).where(eq(customers.id, subscription.customerId));
  if (!customer) return;
  const plan = engine.catalogue.plan((subscription.pendingTier ?? subscription.tier) as Tier);
  const ends = formatDateTime(subscription.trialEnd);
  const card = await cardWords(tx, customer.defaultPaymentMethodId);
  let then: string;
  if (subscription.cancelAtPeriodEnd) then = `Your subscription is set to end with the trial: nothing will be charged and your platform returns to the free plan.`;
  else if (!charge) then = `Your platform's plan starts then.`;
  else if (charge.amountDueCents <= 0) then = `Your credit covers the first period: nothing will be charged.`;
  else if (!card) then = `${formatMoney(charge.amountDueCents, charge.currency)} will be due, and there is no card on file: add one in your billing portal, or your platform returns to the free plan.`;
  else {
    const credit = charge.amountDueCents < plan.priceCents * subscription.quantity ? " (your account's credit pays the rest)" : "";
    then = `${formatMoney(charge.amountDueCents, charge.currency)} will be charged to ${card} for the first month of ${plan.name}${credit}.`;
  }
  const lines = [
    `Your trial of the ${plan.name} plan ends on ${ends}.`,
    ``,
    `Plan:     ${plan.name} (${formatMoney(plan.priceCents * subscription.quantity, plan.currency)} a month${subscription.quantity > 1 ? `, ${subscription.quantity} seats` : ""})`,
    `Ends on:  ${ends}`,
    ``,
    then,
    ``,
    `Change plan, cards or cancel in your billing portal: ${portalOpenUrl(engine.billingUrl, subscription.platformId)}`,
  ];
  await enqueueMail(
    tx,
    {
      kind: "trial_ending",
      dedupeKey: `trial_ending:${subscription.id}:${Math.floor(subscription.trialEnd.getTime() / 1000)}`,
      to: customer.email,
      subject: `Your ${plan.name} trial ends on ${formatDay(subscription.trialEnd)}`,
      text: lines.join("\n"),
    },
    engine.time.wallNow(),
  );
}
