import { eq, and, isNull } from "drizzle-orm";
import Stripe from "stripe";
import { ApiError, badRequest, upstreamUnavailable } from "@core/kit";
import type { Db } from "@core/storage";
import { customers } from "../db/schema.js";
import {
  HARD_DECLINES,
  PaymentDeclined,
  unknownPaymentMethod,
  type ChargeOutcome,
  type ChargeRequest,
  type PaymentMethodView,
  type PaymentProvider,
  type ProviderPayment,
  type RefundOutcome,
  type RefundRequest,
  type SetupIntentView,
} from "./types.js";

/** How the provider reaches Stripe: the real API, or (tests) a fake of ours at another address. */
export interface StripeSettings {
  secretKey: string;
  /** `https://api.stripe.com` unless told otherwise (tests: the fake's http://127.0.0.1:<port>) */
  apiBase?: string;
  /** per request; the SDK retries a timed-out request with the same idempotency key */
  timeoutMs?: number;
  maxNetworkRetries?: number;
}

/** Stripe's client settings unless told otherwise: each request may take 20 s, and is tried 3 times. */
export const STRIPE_TIMEOUT_MS = 20_000;
export const STRIPE_NETWORK_RETRIES = 2;

/** The Stripe client our provider uses: the official SDK, pointed at `apiBase`. */
export function stripeClient(settings: StripeSettings): Stripe {
  const base = new URL(settings.apiBase ?? "https://api.stripe.com");
  return new Stripe(settings.secretKey, {
    host: base.hostname,
    port: base.port || (base.protocol === "https:" ? 443 : 80),
    protocol: base.protocol === "http:" ? "http" : "https",
    timeout: settings.timeoutMs ?? STRIPE_TIMEOUT_MS,
    maxNetworkRetries: settings.maxNetworkRetries ?? STRIPE_NETWORK_RETRIES,
    telemetry: false,
    appInfo: { name: "core-billing" },
  });
}

/**
 * The `stripe` provider (DESIGN §6.1): customers, cards, SetupIntents, PaymentIntents and Billing
 * Portal sessions at Stripe, through the official SDK. The engine keeps plans, invoices and
 * balances; Stripe only holds cards and moves money. Each engine customer gets one Stripe customer,
 * made on first need with an idempotency key of its own and remembered in
 * `customers.provider_customer_id`.
 */
export class StripeProvider implements PaymentProvider {
  readonly name = "stripe" as const;

  constructor(
    private readonly db: Db,
    private readonly stripe: Stripe,
  ) {}

  async upsertCustomer(customer: { id: string; email: string; name: string | null }): Promise<void> {
    const { stripeId, made } = await this.stripeCustomer(customer.id);
    if (!made) await call(() => this.stripe.customers.update(stripeId, { email: customer.email, name: customer.name ?? "" }));
  }

  async setDefaultPaymentMethod(customerId: string, paymentMethodId: string): Promise<void> {
    const { stripeId } = await this.stripeCustomer(customerId);
    const method = await this.retrieve(paymentMethodId);
    if (!method || method.customer !== stripeId) throw unknownPaymentMethod(paymentMethodId);
    await call(() => this.stripe.customers.update(stripeId, { invoice_settings: { default_payment_method: paymentMethodId } }));
  }

  async attach(customerId: string, token: string, options: { idempotencyKey?: string } = {}): Promise<PaymentMethodView> {
    const { stripeId } = await this.stripeCustomer(customerId);
    if (/^pm_/.test(token) && !token.startsWith("pm_card_")) {
      // a card of ours already: Stripe would refuse to attach it again, so answer it as it is
      const method = await this.retrieve(token);
      if (!method || method.customer !== stripeId) throw unknownPaymentMethod(token);
      return viewOf(method, customerId);
    }
    try {
      const attached = await this.stripe.paymentMethods.attach(token, { customer: stripeId }, options.idempotencyKey ? { idempotencyKey: options.idempotencyKey } : {});
      // a replayed attach answers the card as it was then: it may have been detached since
      const method = options.idempotencyKey ? await this.retrieve(attached.id) : attached;
      if (!method || method.customer !== stripeId) throw unknownPaymentMethod(token);
      return viewOf(method, customerId);
    } catch (err) {
      if (err instanceof Stripe.errors.StripeCardError) throw new PaymentDeclined(err.code || "card_declined", err.decline_code || null);
      if (err instanceof Stripe.errors.StripeInvalidRequestError) throw unknownPaymentMethod(token);
      throw unavailable(err);
    }
  }

  async detach(customerId: string, paymentMethodId: string): Promise<PaymentMethodView> {
    const { stripeId } = await this.stripeCustomer(customerId);
    const method = await this.retrieve(paymentMethodId);
    if (!method || method.customer !== stripeId) throw unknownPaymentMethod(paymentMethodId);
    return viewOf(await call(() => this.stripe.paymentMethods.detach(paymentMethodId)), null);
  }

  async list(customerId: string): Promise<PaymentMethodView[]> {
    const { stripeId } = await this.stripeCustomer(customerId);
    const methods = await call(() => this.stripe.customers.listPaymentMethods(stripeId, { type: "card", limit: 100 }).autoPagingToArray({ limit: 1000 }));
    return methods.map((m) => viewOf(m, customerId));
  }

  async find(paymentMethodId: string): Promise<PaymentMethodView | null> {
    const method = await this.retrieve(paymentMethodId);
    if (!method) return null;
    const owner = typeof method.customer === "string" ? await this.engineCustomerOf(method.customer) : null;
    return viewOf(method, owner);
  }

  async createSetupIntent(customerId: string): Promise<SetupIntentView> {
    const { stripeId } = await this.stripeCustomer(customerId);
    const intent = await call(() => this.stripe.setupIntents.create({ customer: stripeId, usage: "off_session", allowed_payment_method_types: ["card"] }));
    return { id: intent.id, clientSecret: intent.client_secret ?? "", status: setupStatus(intent.status), customerId };
  }

  async createPortalSession(input: { customerId: string; platformId: string; returnUrl: string }): Promise<{ id: string; url: string }> {
    const { stripeId } = await this.stripeCustomer(input.customerId);
    const session = await call(() => this.stripe.billingPortal.sessions.create({ customer: stripeId, return_url: input.returnUrl }));
    return { id: session.id, url: session.url };
  }

  async charge(request: ChargeRequest): Promise<ChargeOutcome> {
    let stripeId: string;
    try {
      ({ stripeId } = await this.stripeCustomer(request.customerId));
    } catch (err) {
      return { status: "unknown", reason: (err as Error).message };
    }
    try {
      const intent = await this.stripe.paymentIntents.create(
        {
          amount: request.amountCents,
          currency: request.currency,
          customer: stripeId,
          payment_method: request.paymentMethodId,
          off_session: true,
          confirm: true,
          metadata: { core_invoice_id: request.invoiceId, core_attempt: String(request.attempt), core_customer_id: request.customerId },
        },
        // `<invoice>:<attempt>`: a retry, ours or the SDK's, is answered with the first outcome (DESIGN §6.9)
        { idempotencyKey: request.idempotencyKey },
      );
      return outcomeOf(intent);
    } catch (err) {
      if (err instanceof Stripe.errors.StripeCardError) {
        const code = err.code || "card_declined";
        const declineCode = err.decline_code || null;
        return { status: "declined", paymentId: err.payment_intent?.id ?? null, code, declineCode, hard: HARD_DECLINES.has(declineCode ?? code) };
      }
      // a request Stripe refused as malformed charged nothing (a card detached meanwhile, say); a
      // refusal of the key itself (another body under it) says nothing of the first request's fate
      if (err instanceof Stripe.errors.StripeInvalidRequestError && err.type !== "idempotency_error" && err.statusCode !== 409) {
        return { status: "declined", paymentId: null, code: err.code || "invalid_request", declineCode: null, hard: false };
      }
      // a timeout, a lost connection, a 5xx, a 409 (the key in use) or a 429: nobody knows yet
      return { status: "unknown", reason: err instanceof Error ? err.message.split("\n")[0]! : "no answer" };
    }
  }

  async findCharge(request: ChargeRequest & { since: Date }): Promise<ChargeOutcome | { status: "none" }> {
    try {
      const { stripeId } = await this.stripeCustomer(request.customerId);
      // a customer's list is read from the source (search may lag by a minute), from a little before the attempt
      const created = { gte: Math.floor(request.since.getTime() / 1000) - 300 };
      const mine: Stripe.PaymentIntent[] = [];
      for await (const i of this.stripe.paymentIntents.list({ customer: stripeId, created, limit: 100 })) {
        if (i.metadata?.core_invoice_id === request.invoiceId && i.metadata?.core_attempt === String(request.attempt)) mine.push(i);
      }
      const settled = mine.find((i) => i.status === "succeeded") ?? mine[0];
      if (!settled) return { status: "none" };
      return outcomeOf(settled);
    } catch (err) {
      return { status: "unknown", reason: err instanceof Error ? err.message.split("\n")[0]! : "no answer" };
    }
  }

  /**
   * A Refund of the invoice's PaymentIntent (DESIGN §6.10), with the credit note's key and
   * `metadata.core_credit_note_id`. The PaymentIntent's refunds are read first: a refund already made
   * for this note (asked again after Stripe forgot the key, a day on) is answered, never made twice.
   */
  async refund(request: RefundRequest): Promise<RefundOutcome> {
    try {
      for await (const made of this.stripe.refunds.list({ payment_intent: request.paymentId, limit: 100 })) {
        if (made.metadata?.core_credit_note_id === request.creditNoteId) return refundOutcomeOf(made);
      }
      const made = await this.stripe.refunds.create(
        {
          payment_intent: request.paymentId,
          amount: request.amountCents,
          metadata: { core_credit_note_id: request.creditNoteId, core_invoice_id: request.invoiceId, core_customer_id: request.customerId },
        },
        { idempotencyKey: request.idempotencyKey },
      );
      return refundOutcomeOf(made);
    } catch (err) {
      // refused as malformed (more than is left to refund, an unknown payment): nothing moved
      if (err instanceof Stripe.errors.StripeInvalidRequestError && err.type !== "idempotency_error" && err.statusCode !== 409) {
        return { status: "failed", refundId: null, code: err.code || "invalid_request" };
      }
      return { status: "unknown", reason: err instanceof Error ? err.message.split("\n")[0]! : "no answer" };
    }
  }

  /** The refunds of a charge, as Stripe holds them now (its `charge.refunded` event need not carry them). */
  async refundsOfCharge(chargeId: string): Promise<Stripe.Refund[]> {
    return call(() => this.stripe.refunds.list({ charge: chargeId, limit: 100 }).autoPagingToArray({ limit: 10_000 }));
  }

  async payments(range: { from: Date; to: Date }): Promise<ProviderPayment[]> {
    const created = { gte: Math.floor(range.from.getTime() / 1000), lte: Math.floor(range.to.getTime() / 1000) };
    return call(async () => {
      const found: ProviderPayment[] = [];
      // every page, however many: the SDK's array helper stops at 10,000
      for await (const i of this.stripe.paymentIntents.list({ created, limit: 100 })) {
        if (i.status === "succeeded" && typeof i.metadata?.core_invoice_id === "string") {
          found.push({ id: i.id, invoiceId: i.metadata.core_invoice_id, amountCents: i.amount_received || i.amount, currency: i.currency, createdAt: i.created });
        }
      }
      return found;
    });
  }

  /** The Stripe customer of an engine customer, made (once, whoever asks first) when there is none yet. */
  private async stripeCustomer(customerId: string): Promise<{ stripeId: string; made: boolean }> {
    const [row] = await this.db.select().from(customers).where(eq(customers.id, customerId));
    if (!row) throw badRequest(`No such customer: "${customerId.slice(0, 64)}"`, { path: "customerId" });
    if (row.providerCustomerId) return { stripeId: row.providerCustomerId, made: false };
    // two requests making it at once send one key, so Stripe makes one customer and answers both
    const made = await call(() =>
      this.stripe.customers.create(
        { email: row.email, name: row.name ?? undefined, metadata: { core_customer_id: row.id } },
        { idempotencyKey: `core-customer-${row.id}` },
      ),
    );
    await this.db
      .update(customers)
      .set({ providerCustomerId: made.id })
      .where(and(eq(customers.id, row.id), isNull(customers.providerCustomerId)));
    return { stripeId: made.id, made: true };
  }

  private async engineCustomerOf(stripeId: string): Promise<string | null> {
    const [row] = await this.db.select({ id: customers.id }).from(customers).where(eq(customers.providerCustomerId, stripeId));
    return row?.id ?? null;
  }

  /** A PaymentMethod by id, or null when Stripe has none of that id. */
  private async retrieve(id: string): Promise<Stripe.PaymentMethod | null> {
    try {
      return await this.stripe.paymentMethods.retrieve(id);
    } catch (err) {
      if (err instanceof Stripe.errors.StripeInvalidRequestError) return null;
      throw unavailable(err);
    }
  }
}

/** A call whose refusals are not the caller's fault: Stripe down, slow or misconfigured is a 503. */
async function call<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof Stripe.errors.StripeInvalidRequestError) throw badRequest(`Stripe refused the request: ${err.message}`);
    throw unavailable(err);
  }
}

/** Stripe unreachable, failing or refusing our key: the request changed nothing we know of, and may be retried. */
function unavailable(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof Stripe.errors.StripeAuthenticationError || err instanceof Stripe.errors.StripePermissionError) {
    return upstreamUnavailable("The payment provider refused billing's credentials (STRIPE_SECRET_KEY)");
  }
  return upstreamUnavailable("The payment provider did not answer; nothing was charged twice, and the request may be retried");
}

function viewOf(method: Stripe.PaymentMethod, customerId: string | null): PaymentMethodView {
  const card = method.card;
  return {
    id: method.id,
    type: "card",
    customerId: method.customer ? customerId : null,
    card: {
      brand: card?.brand ?? "unknown",
      last4: card?.last4 ?? "",
      expMonth: card?.exp_month ?? 0,
      expYear: card?.exp_year ?? 0,
      funding: card?.funding ?? "unknown",
    },
    createdAt: method.created,
  };
}

/** A PaymentIntent of an off-session charge as an outcome: anything but succeeded or processing is a charge that did not happen. */
function outcomeOf(intent: Stripe.PaymentIntent): ChargeOutcome {
  if (intent.status === "succeeded") return { status: "succeeded", paymentId: intent.id };
  if (intent.status === "processing") return { status: "unknown", reason: "the payment is still processing at Stripe" };
  const error = intent.last_payment_error;
  const code = error?.code || (intent.status === "requires_action" ? "authentication_required" : "card_declined");
  const declineCode = error?.decline_code || null;
  return { status: "declined", paymentId: intent.id, code, declineCode, hard: HARD_DECLINES.has(declineCode ?? code) };
}

/** A Refund as an outcome: `pending` (Stripe has not finished it) is asked about again. */
function refundOutcomeOf(refund: Stripe.Refund): RefundOutcome {
  if (refund.status === "succeeded") return { status: "succeeded", refundId: refund.id };
  if (refund.status === "failed" || refund.status === "canceled") return { status: "failed", refundId: refund.id, code: refund.failure_reason || "refund_failed" };
  return { status: "unknown", reason: `the refund ${refund.id} is ${refund.status ?? "pending"} at Stripe` };
}

function setupStatus(status: string): SetupIntentView["status"] {
  return status === "succeeded" || status === "canceled" ? status : "requires_payment_method";
}
