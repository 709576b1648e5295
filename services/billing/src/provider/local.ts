import { and, asc, between, eq, isNull, sql } from "drizzle-orm";
import { randomBytes } from "node:crypto";
import { newId, unixSeconds, type Clock } from "@core/kit";
import { isUniqueViolation, rowsOf, type Db } from "@core/storage";
import { charges, paymentMethods, refunds, setupIntents, type PaymentMethodRow } from "../db/schema.js";
import { createPortalSession } from "../portal.js";
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

interface TestCard {
  brand: string;
  last4: string;
  funding: "credit" | "debit";
  /** refused when attached, as Stripe verifies a card on attach */
  refused?: { code: string; declineCode: string | null };
  /** attaches, then every charge fails (failed renewals) */
  failsCharges?: boolean;
  /** attaches; its first charge is made and its answer lost (a provider fault to try by hand, not Stripe's) */
  losesFirstAnswer?: boolean;
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
  // ours, not Stripe's (their prefix says so): a charge whose outcome is unknown until billing asks again
  pm_card_core_answerLost: { brand: "visa", last4: "4242", funding: "credit", losesFirstAnswer: true },
};

/**
 * Faults the local provider can play (DESIGN §6.9 proof): the tests' way to make it fail as a
 * payment provider fails. A hook that throws is a provider 500 or a lost connection; one that never
 * settles is a provider that hangs. `beforeCharge` fails before any money moves, `afterCharge` after
 * the charge is recorded (the answer is lost, the money moved).
 */
export interface LocalProviderFaults {
  /** before a card is attached: a provider that takes its time to verify it (Stripe's attach is a network round trip) */
  beforeAttach?(customerId: string, token: string): Promise<void>;
  beforeCharge?(request: ChargeRequest): Promise<void>;
  afterCharge?(request: ChargeRequest, outcome: ChargeOutcome): Promise<void>;
  /** before a refund is made (nothing moved), and after it is recorded (the refund made, its answer lost) */
  beforeRefund?(request: RefundRequest): Promise<void>;
  afterRefund?(request: RefundRequest, outcome: RefundOutcome): Promise<void>;
}

/** Test cards expire in December, a few years out; a fixed year keeps the provider deterministic. */
const TEST_CARD_EXPIRY = { month: 12, year: 2034 };

const refundOutcomeOf = (row: typeof refunds.$inferSelect): RefundOutcome =>
  row.status === "succeeded" ? { status: "succeeded", refundId: row.id } : { status: "failed", refundId: row.id, code: row.failureCode ?? "refund_failed" };

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
    /** the tests' faults; none in production */
    readonly faults: LocalProviderFaults = {},
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
    await this.faults.beforeAttach?.(customerId, token);
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
        losesFirstAnswer: card.losesFirstAnswer ?? false,
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
    try {
      await this.faults.beforeCharge?.(request);
    } catch (err) {
      return { status: "unknown", reason: (err as Error).message };
    }
    let outcome = await this.chargeByKey(request.idempotencyKey);
    let firstAnswer = false;
    if (!outcome) {
      const [card] = await this.db
        .select()
        .from(paymentMethods)
        .where(and(eq(paymentMethods.id, request.paymentMethodId), eq(paymentMethods.customerId, request.customerId), isNull(paymentMethods.detachedAt)));
      // a card detached or never ours: nothing is charged, as Stripe refuses it
      if (!card) return { status: "declined", paymentId: null, code: "payment_method_unavailable", declineCode: null, hard: false };
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
        firstAnswer = card.losesFirstAnswer && !(await this.chargedBefore(card.id, request.idempotencyKey));
      } catch (err) {
        // the same key arrived twice at once: the first write is the charge, as at Stripe
        if (!isUniqueViolation(err, "charges_idempotency_key")) throw err;
      }
      outcome = (await this.chargeByKey(request.idempotencyKey))!;
    }
    try {
      await this.faults.afterCharge?.(request, outcome);
    } catch (err) {
      return { status: "unknown", reason: (err as Error).message };
    }
    return firstAnswer ? { status: "unknown", reason: "the answer was lost (pm_card_core_answerLost)" } : outcome;
  }

  async findCharge(request: ChargeRequest): Promise<ChargeOutcome | { status: "none" }> {
    return (await this.chargeByKey(request.idempotencyKey)) ?? { status: "none" };
  }

  /**
   * A refund of a charge of this provider (DESIGN §6.10), recorded in `billing.refunds` against it:
   * one per key (the same key answers the first refund again), and never more in all than the charge
   * (the charge row is locked while the sum is checked, so refunds racing with other keys cannot pass it).
   */
  async refund(request: RefundRequest): Promise<RefundOutcome> {
    try {
      await this.faults.beforeRefund?.(request);
    } catch (err) {
      return { status: "unknown", reason: (err as Error).message };
    }
    let outcome = await this.refundByKey(request.idempotencyKey);
    if (!outcome) {
      try {
        outcome = await this.db.transaction(async (tx) => {
          const [charge] = rowsOf<{ id: string; customer_id: string; amount_cents: string | number; currency: string; status: string }>(
            await tx.execute(sql`select id, customer_id, amount_cents, currency, status from billing.charges where id = ${request.paymentId} for update`),
          );
          const again = await this.refundByKey(request.idempotencyKey, tx);
          if (again) return again;
          let failure: string | null = null;
          if (!charge || charge.status !== "succeeded" || charge.customer_id !== request.customerId) failure = "charge_not_found";
          else if (charge.currency !== request.currency) failure = "currency_mismatch";
          else {
            const [{ refunded }] = rowsOf<{ refunded: string | number }>(
              await tx.execute(sql`select coalesce(sum(amount_cents), 0) as refunded from billing.refunds where charge_id = ${charge.id} and status = 'succeeded'`),
            ) as [{ refunded: string | number }];
            if (Number(refunded) + request.amountCents > Number(charge.amount_cents)) failure = "amount_too_large";
          }
          // a refusal is kept under its key too, as Stripe keeps every answer of a request it began
          if (failure && !charge) return { status: "failed", refundId: null, code: failure } as RefundOutcome;
          const [row] = await tx
            .insert(refunds)
            .values({
              id: newId("re"),
              idempotencyKey: request.idempotencyKey,
              chargeId: charge!.id,
              amountCents: request.amountCents,
              currency: request.currency,
              status: failure ? "failed" : "succeeded",
              failureCode: failure,
              createdAt: this.clock.now(),
            })
            .returning();
          return refundOutcomeOf(row!);
        });
      } catch (err) {
        // the same key arrived twice at once: the first write is the refund
        if (!isUniqueViolation(err, "refunds_idempotency_key")) throw err;
        outcome = (await this.refundByKey(request.idempotencyKey))!;
      }
    }
    try {
      await this.faults.afterRefund?.(request, outcome);
    } catch (err) {
      return { status: "unknown", reason: (err as Error).message };
    }
    return outcome;
  }

  private async refundByKey(key: string, db: Db = this.db): Promise<RefundOutcome | null> {
    const [row] = await db.select().from(refunds).where(eq(refunds.idempotencyKey, key));
    return row ? refundOutcomeOf(row) : null;
  }

  async payments(range: { from: Date; to: Date }): Promise<ProviderPayment[]> {
    const rows = await this.db
      .select()
      .from(charges)
      .where(and(eq(charges.status, "succeeded"), between(charges.createdAt, range.from, range.to)))
      .orderBy(asc(charges.createdAt), asc(charges.id));
    return rows.map((row) => ({ id: row.id, invoiceId: row.invoiceId, amountCents: row.amountCents, currency: row.currency, createdAt: unixSeconds(row.createdAt) }));
  }

  /** Whether the card was charged before, under another key (its first answer is the one lost). */
  private async chargedBefore(paymentMethodId: string, key: string): Promise<boolean> {
    const rows = await this.db.select({ key: charges.idempotencyKey }).from(charges).where(eq(charges.paymentMethodId, paymentMethodId)).limit(2);
    return rows.some((row) => row.key !== key);
  }

  private async chargeByKey(key: string): Promise<ChargeOutcome | null> {
    const [row] = await this.db.select().from(charges).where(eq(charges.idempotencyKey, key));
    if (!row) return null;
    if (row.status === "succeeded") return { status: "succeeded", paymentId: row.id };
    return { status: "declined", paymentId: row.id, code: row.code!, declineCode: row.declineCode, hard: HARD_DECLINES.has(row.declineCode ?? row.code!) };
  }
}
