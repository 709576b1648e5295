import { and, asc, eq, isNull } from "drizzle-orm";
import { randomBytes } from "node:crypto";
import { newId, unixSeconds, type Clock } from "@core/kit";
import { isUniqueViolation, type Db } from "@core/storage";
import { charges, paymentMethods, setupIntents, type PaymentMethodRow } from "../db/schema.js";
import { createPortalSession } from "../portal.js";
import { HARD_DECLINES, PaymentDeclined, unknownPaymentMethod, type ChargeOutcome, type ChargeRequest, type PaymentMethodView, type PaymentProvider, type SetupIntentView } from "./types.js";

interface TestCard {
  brand: string;
  last4: string;
  funding: "credit" | "debit";
  /** refused when attached, as Stripe verifies a card on attach */
  refused?: { code: string; declineCode: string | null };
  /** attaches, then every charge fails (failed renewals) */
  failsCharges?: boolean;
}

/** Stripe's test payment-method tokens, by their exact names (DESIGN §6.1). */
export const TEST_CARDS: Readonly<Record<string, TestCard>> = {
  pm_card_visa: { brand: "visa", last4: "4242", funding: "credit" },
  pm_card_visa_debit: { brand: "visa", last4: "5556", funding: "debit" },
  pm_card_mastercard: { brand: "mastercard", last4: "4444", funding: "credit" },
  pm_card_amex: { brand: "amex", last4: "8431", funding: "credit" },
  pm_card_visa_chargeDeclined: { brand: "visa", last4: "0002", funding: "credit", refused: { code: "card_declined", declineCode: "generic_decline" } },
  pm_card_visa_chargeDeclinedInsufficientFunds: { brand: "visa", last4: "9995", funding: "credit", refused: { code: "card_declined", declineCode: "insufficient_funds" } },
  pm_card_visa_chargeDeclinedLostCard: { brand: "visa", last4: "9987", funding: "credit", refused: { code: "card_declined", declineCode: "lost_card" } },
  pm_card_visa_chargeDeclinedStolenCard: { brand: "visa", last4: "9979", funding: "credit", refused: { code: "card_declined", declineCode: "stolen_card" } },
  pm_card_chargeDeclinedExpiredCard: { brand: "visa", last4: "0069", funding: "credit", refused: { code: "expired_card", declineCode: "expired_card" } },
  pm_card_chargeDeclinedProcessingError: { brand: "visa", last4: "0119", funding: "credit", refused: { code: "processing_error", declineCode: null } },
  pm_card_chargeCustomerFail: { brand: "visa", last4: "0341", funding: "credit", failsCharges: true },
};

/** Test cards expire in December, a few years out; a fixed year keeps the provider deterministic. */
const TEST_CARD_EXPIRY = { month: 12, year: 2034 };

const view = (row: PaymentMethodRow): PaymentMethodView => ({
  id: row.id,
  type: "card",
  customerId: row.detachedAt ? null : row.customerId,
  card: { brand: row.brand, last4: row.last4, expMonth: row.expMonth, expYear: row.expYear, funding: row.funding },
  createdAt: unixSeconds(row.createdAt),
});

/**
 * The embedded provider (DESIGN §6.1): deterministic, its state in the billing schema. It plays
 * Stripe's test mode: known test tokens attach (or are refused) as Stripe's do, and charges carry
 * idempotency keys that replay the first outcome.
 */
export class LocalProvider implements PaymentProvider {
  readonly name = "local" as const;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    /** billing's public address: the portal page lives under it (DESIGN §6.1) */
    private readonly billingUrl = "http://localhost:4200",
  ) {}

  async upsertCustomer(): Promise<void> {
    // the engine's customers table is this provider's customer record
  }

  async setDefaultPaymentMethod(customerId: string, paymentMethodId: string): Promise<void> {
    const [row] = await this.db
      .select({ id: paymentMethods.id })
      .from(paymentMethods)
      .where(and(eq(paymentMethods.id, paymentMethodId), eq(paymentMethods.customerId, customerId), isNull(paymentMethods.detachedAt)));
    if (!row) throw unknownPaymentMethod(paymentMethodId);
  }

  async attach(customerId: string, token: string): Promise<PaymentMethodView> {
    const card = Object.hasOwn(TEST_CARDS, token) ? TEST_CARDS[token]! : undefined;
    if (!card) {
      const [row] = await this.db.select().from(paymentMethods).where(eq(paymentMethods.id, token));
      // a pm_… of this customer is attached already: attaching it again changes nothing
      if (!row || row.customerId !== customerId || row.detachedAt) throw unknownPaymentMethod(token);
      return view(row);
    }
    if (card.refused) throw new PaymentDeclined(card.refused.code, card.refused.declineCode);
    const [row] = await this.db
      .insert(paymentMethods)
      .values({
        id: newId("pm"),
        customerId,
        brand: card.brand,
        last4: card.last4,
        expMonth: TEST_CARD_EXPIRY.month,
        expYear: TEST_CARD_EXPIRY.year,
        funding: card.funding,
        failsCharges: card.failsCharges ?? false,
        createdAt: this.clock.now(),
      })
      .returning();
    return view(row!);
  }

  async detach(customerId: string, paymentMethodId: string): Promise<PaymentMethodView> {
    const [row] = await this.db
      .update(paymentMethods)
      .set({ detachedAt: this.clock.now() })
      .where(and(eq(paymentMethods.id, paymentMethodId), eq(paymentMethods.customerId, customerId), isNull(paymentMethods.detachedAt)))
      .returning();
    if (!row) throw unknownPaymentMethod(paymentMethodId);
    return view(row);
  }

  async list(customerId: string): Promise<PaymentMethodView[]> {
    const rows = await this.db
      .select()
      .from(paymentMethods)
      .where(and(eq(paymentMethods.customerId, customerId), isNull(paymentMethods.detachedAt)))
      .orderBy(asc(paymentMethods.createdAt), asc(paymentMethods.id));
    return rows.map(view);
  }

  async find(paymentMethodId: string): Promise<PaymentMethodView | null> {
    const [row] = await this.db.select().from(paymentMethods).where(eq(paymentMethods.id, paymentMethodId));
    return row ? view(row) : null;
  }

  async createSetupIntent(customerId: string): Promise<SetupIntentView> {
    const id = newId("seti");
    // letters and digits only, like the provider it stands in for (base64url could begin with "-")
    const clientSecret = `${id}_secret_${randomBytes(16).toString("hex")}`;
    await this.db.insert(setupIntents).values({ id, customerId, clientSecret, status: "requires_payment_method", createdAt: this.clock.now() });
    return { id, clientSecret, status: "requires_payment_method", customerId };
  }

  async createPortalSession(input: { customerId: string; platformId: string; returnUrl: string }): Promise<{ id: string; url: string }> {
    const session = await createPortalSession(this.db, this.clock.now(), input);
    return { id: session.id, url: `${this.billingUrl}/portal/${session.id}` };
  }

  async charge(request: ChargeRequest): Promise<ChargeOutcome> {
    const replay = await this.chargeByKey(request.idempotencyKey);
    if (replay) return replay;
    const [card] = await this.db
      .select()
      .from(paymentMethods)
      .where(and(eq(paymentMethods.id, request.paymentMethodId), eq(paymentMethods.customerId, request.customerId), isNull(paymentMethods.detachedAt)));
    if (!card) throw unknownPaymentMethod(request.paymentMethodId);
    const failed = card.failsCharges ? { code: "card_declined", declineCode: "generic_decline" } : null;
    try {
      await this.db.insert(charges).values({
        id: newId("ch"),
        idempotencyKey: request.idempotencyKey,
        customerId: request.customerId,
        invoiceId: request.invoiceId,
        paymentMethodId: card.id,
        amountCents: request.amountCents,
        currency: request.currency,
        status: failed ? "failed" : "succeeded",
        code: failed?.code ?? null,
        declineCode: failed?.declineCode ?? null,
        createdAt: this.clock.now(),
      });
    } catch (err) {
      // the same key arrived twice at once: the first write is the charge, as at Stripe
      if (!isUniqueViolation(err, "charges_idempotency_key")) throw err;
    }
    return (await this.chargeByKey(request.idempotencyKey))!;
  }

  private async chargeByKey(key: string): Promise<ChargeOutcome | null> {
    const [row] = await this.db.select().from(charges).where(eq(charges.idempotencyKey, key));
    if (!row) return null;
    if (row.status === "succeeded") return { status: "succeeded", chargeId: row.id };
    return { status: "failed", chargeId: row.id, code: row.code!, declineCode: row.declineCode, hard: HARD_DECLINES.has(row.declineCode ?? row.code!) };
  }
}
