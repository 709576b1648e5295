import { eq, and, isNull } from "drizzle-orm";
import Stripe from "stripe";
import { ApiError, badRequest, upstreamUnavailable } from "@core/kit";
import type { Db } from "@core/storage";
import { customers } from "../db/schema.js";
import { HARD_DECLINES, PaymentDeclined, unknownPaymentMethod, type ChargeOutcome, type ChargeRequest, type PaymentMethodView, type PaymentProvider, type SetupIntentView } from "./types.js";

/** How the provider reaches Stripe: the real API, or (tests) a fake of ours at another address. */
export interface StripeSettings {
  secretKey: string;
  /** `https://api.stripe.com` unless told otherwise (tests: the fake's http://127.0.0.1:<port>) */
  apiBase?: string;
  /** per request; the SDK retries a timed-out request with the same idempotency key */
  timeoutMs?: number;
  maxNetworkRetries?: number;
}

/** The Stripe client our provider uses: the official SDK, pointed at `apiBase`. */
export function stripeClient(settings: StripeSettings): Stripe {
  const base = new URL(settings.apiBase ?? "https://api.stripe.com");
  return new Stripe(settings.secretKey, {
    host: base.hostname,
    port: base.port || (base.protocol === "https:" ? 443 : 80),
    protocol: base.protocol === "http:" ? "http" : "https",
    timeout: settings.timeoutMs ?? 20_000,
    maxNetworkRetries: settings.maxNetworkRetries ?? 2,
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
    const { stripeId } = await this.stripeCustomer(request.customerId);
    try {
      const intent = await this.stripe.paymentIntents.create(
        {
          amount: request.amountCents,
          currency: request.currency,
          customer: stripeId,
          payment_method: request.paymentMethodId,
          off_session: true,
          confirm: true,
          metadata: { core_invoice_id: request.invoiceId, core_customer_id: request.customerId },
        },
        // the engine's key: a retry, ours or the SDK's, is answered with the first outcome (DESIGN §6.6)
        { idempotencyKey: request.idempotencyKey },
      );
      if (intent.status === "succeeded") return { status: "succeeded", chargeId: chargeIdOf(intent) };
      // off-session and confirmed: anything else (3-D Secure asked for, say) is a charge that did not happen
      return { status: "failed", chargeId: chargeIdOf(intent), code: "authentication_required", declineCode: null, hard: false };
    } catch (err) {
      if (err instanceof Stripe.errors.StripeCardError) {
        const code = err.code || "card_declined";
        const declineCode = err.decline_code || null;
        const intent = err.payment_intent;
        return { status: "failed", chargeId: intent ? chargeIdOf(intent) : (err.requestId ?? "unknown"), code, declineCode, hard: HARD_DECLINES.has(declineCode ?? code) };
      }
      if (err instanceof Stripe.errors.StripeIdempotencyError) {
        throw new ApiError(422, "IDEMPOTENCY_KEY_REUSED", "This charge's idempotency key was used at Stripe with other parameters: nothing was charged");
      }
      if (err instanceof Stripe.errors.StripeInvalidRequestError) throw unknownPaymentMethod(request.paymentMethodId);
      if (err instanceof Stripe.errors.StripeError && err.statusCode === 409) {
        throw new ApiError(409, "IDEMPOTENCY_KEY_IN_USE", "A charge with this idempotency key is still running at Stripe; try again shortly");
      }
      throw unavailable(err);
    }
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

function chargeIdOf(intent: Stripe.PaymentIntent): string {
  const charge = intent.latest_charge;
  if (typeof charge === "string") return charge;
  return charge?.id ?? intent.id;
}

function setupStatus(status: string): SetupIntentView["status"] {
  return status === "succeeded" || status === "canceled" ? status : "requires_payment_method";
}
