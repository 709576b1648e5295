import { ApiError, badRequest } from "@core/kit";

/** A card as the engine and its answers show it (Stripe's PaymentMethod, reduced). */
export interface PaymentMethodView {
  id: string;
  type: "card";
  customerId: string | null;
  card: { brand: string; last4: string; expMonth: number; expYear: number; funding: string };
  createdAt: number;
}

export interface SetupIntentView {
  id: string;
  clientSecret: string;
  status: "requires_payment_method" | "succeeded" | "canceled";
  customerId: string;
}

/**
 * What a charge came to (DESIGN §6.9): money moved; the card was refused (nothing moved, a dunning
 * attempt); or nobody can say yet — a timeout, a lost connection, a provider 5xx, 409 or 429 —
 * which is asked about again later and never charged anew meanwhile.
 */
export type ChargeOutcome =
  | { status: "succeeded"; paymentId: string }
  | { status: "declined"; paymentId: string | null; code: string; declineCode: string | null; hard: boolean }
  | { status: "unknown"; reason: string };

export interface ChargeRequest {
  customerId: string;
  paymentMethodId: string;
  amountCents: number;
  currency: string;
  invoiceId: string;
  /** which attempt of the invoice this is: 0, then one more after each decline */
  attempt: number;
  /** `<invoiceId>:<attempt>` (DESIGN §6.9): the same key answers the first outcome again and never charges twice */
  idempotencyKey: string;
}

/**
 * A refund of (part of) the payment that paid an invoice (DESIGN §6.10), asked for by a credit note.
 * Its key is `refund:<creditNoteId>`: asked again with it (an unknown outcome, a crash), the provider
 * answers the first refund and never refunds twice.
 */
export interface RefundRequest {
  creditNoteId: string;
  invoiceId: string;
  customerId: string;
  /** the provider's payment that paid the invoice (`invoices.payment_id`: a PaymentIntent at Stripe, a charge on local) */
  paymentId: string;
  amountCents: number;
  currency: string;
  idempotencyKey: string;
}

/**
 * What a refund came to: made (with the provider's refund id); refused, nothing moved (the payment
 * cannot be refunded by that much, or is unknown); or unknown, asked again later with the same key.
 */
export type RefundOutcome =
  | { status: "succeeded"; refundId: string }
  | { status: "failed"; refundId: string | null; code: string }
  | { status: "unknown"; reason: string };

/** A payment the provider made for one of billing's invoices (what `payments/reconcile` compares). */
export interface ProviderPayment {
  id: string;
  invoiceId: string;
  amountCents: number;
  currency: string;
  /** when the provider made it, Unix seconds (the provider's clock: wall-clock time) */
  createdAt: number;
}

/**
 * What moves money (DESIGN §6.1): the engine owns plans, subscriptions, invoices and balances;
 * a provider holds cards and charges them. `local` (the embedded default) and `stripe` pass one
 * contract test suite.
 */
export interface PaymentProvider {
  readonly name: "local" | "stripe";
  /** the engine's customer, mirrored at the provider (Stripe keeps a customer of its own; local has nothing to keep) */
  upsertCustomer(customer: { id: string; email: string; name: string | null }): Promise<void>;
  /** the card renewals charge; 400 when it is not an attached card of this customer */
  setDefaultPaymentMethod(customerId: string, paymentMethodId: string): Promise<void>;
  /**
   * Attaches a test token (`pm_card_visa`) or a `pm_…` of this customer; refuses a declined card as
   * Stripe does on attach. With `idempotencyKey` (a request that goes on to charge), a retry of the
   * request gets the same card again, so its charge has the same parameters as the first try's.
   */
  attach(customerId: string, token: string, options?: { idempotencyKey?: string }): Promise<PaymentMethodView>;
  detach(customerId: string, paymentMethodId: string): Promise<PaymentMethodView>;
  list(customerId: string): Promise<PaymentMethodView[]>;
  /** a payment method by id, whoever it belongs to; null when unknown */
  find(paymentMethodId: string): Promise<PaymentMethodView | null>;
  createSetupIntent(customerId: string): Promise<SetupIntentView>;
  /** a customer portal session of an hour for one customer and platform: local answers our own page, Stripe its Billing Portal */
  createPortalSession(input: { customerId: string; platformId: string; returnUrl: string }): Promise<{ id: string; url: string }>;
  /** Charges a card; a provider fault is the outcome `unknown`, never a throw of its own making. */
  charge(request: ChargeRequest): Promise<ChargeOutcome>;
  /**
   * What became of a charge request made at or after `since` (DESIGN §6.9): its outcome, `none` when
   * the provider holds no charge for it (it never arrived, so sending it again with its key is safe),
   * or `unknown` when the provider cannot be asked now.
   */
  findCharge(request: ChargeRequest & { since: Date }): Promise<ChargeOutcome | { status: "none" }>;
  /**
   * Refunds part or all of a payment under the request's key (DESIGN §6.10): the same key answers the
   * first refund again. A provider fault is the outcome `unknown`, never a throw of its own making.
   */
  refund(request: RefundRequest): Promise<RefundOutcome>;
  /** The succeeded payments for billing's invoices that the provider made between `from` and `to`. */
  payments(range: { from: Date; to: Date }): Promise<ProviderPayment[]>;
}

/** 400 for a payment method that is neither a test token nor an attached card of this customer (both providers). */
export const unknownPaymentMethod = (token: string) =>
  badRequest(`No such payment method: "${token.slice(0, 64)}". Use a pm_… id of this customer or a test token such as pm_card_visa`, { path: "paymentMethodId" });

/** Declines that retrying cannot fix: the card is gone (DESIGN §6.3 dunning). */
export const HARD_DECLINES = new Set(["lost_card", "stolen_card", "expired_card"]);

/**
 * 402 PAYMENT_DECLINED with Stripe's `code` and `declineCode` in `details` (DESIGN §6.1); the message
 * names both too, for the upgrade route, whose errors carry no details (spec §2.3).
 */
export class PaymentDeclined extends ApiError {
  constructor(
    readonly cardCode: string,
    readonly declineCode: string | null,
  ) {
    super(402, "PAYMENT_DECLINED", `${declineMessage(cardCode, declineCode)} (code: ${cardCode}, decline code: ${declineCode ?? "none"})`, {
      code: cardCode,
      declineCode,
    });
    this.name = "PaymentDeclined";
  }
}

/** Stripe's messages for its decline codes, used in both providers' refusals. */
export function declineMessage(code: string, declineCode: string | null): string {
  switch (declineCode ?? code) {
    case "insufficient_funds":
      return "Your card has insufficient funds.";
    case "lost_card":
      return "Your card has been declined: it was reported lost.";
    case "stolen_card":
      return "Your card has been declined: it was reported stolen.";
    case "expired_card":
      return "Your card has expired.";
    case "processing_error":
      return "An error occurred while processing your card. Try again in a little bit.";
    default:
      return "Your card was declined.";
  }
}
