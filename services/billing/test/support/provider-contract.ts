import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiError } from "@core/kit";
import { PaymentDeclined, type ChargeOutcome, type ChargeRequest, type PaymentMethodView, type PaymentProvider, type RefundRequest } from "../../src/provider/types.js";

/** What a provider's test file hands the contract: the provider, a way to make customers it accepts, and its teardown. */
export interface ContractSubject {
  provider: PaymentProvider;
  /** a new customer id this provider accepts (local: a row in billing.customers; stripe: a Stripe customer) */
  newCustomer(): Promise<string>;
  close(): Promise<void>;
}

/** Stripe's test tokens that attach, with the card each one stands for (DESIGN §6.1). */
const ATTACHING: [token: string, brand: string, last4: string, funding: string][] = [
  ["pm_card_visa", "visa", "4242", "credit"],
  ["pm_card_visa_debit", "visa", "5556", "debit"],
  ["pm_card_mastercard", "mastercard", "4444", "credit"],
  ["pm_card_amex", "amex", "8431", "credit"],
];

/** Stripe's test tokens refused already at attach, with Stripe's `code` / `declineCode` (DESIGN §6.1). */
const REFUSED: [token: string, code: string, declineCode: string | null][] = [
  ["pm_card_visa_chargeDeclined", "card_declined", "generic_decline"],
  ["pm_card_visa_chargeDeclinedInsufficientFunds", "card_declined", "insufficient_funds"],
  ["pm_card_visa_chargeDeclinedLostCard", "card_declined", "lost_card"],
  ["pm_card_visa_chargeDeclinedStolenCard", "card_declined", "stolen_card"],
  ["pm_card_chargeDeclinedExpiredCard", "expired_card", "expired_card"],
  ["pm_card_chargeDeclinedProcessingError", "processing_error", null],
];

/** The error `work` fails with, which must be an ApiError; the test fails when `work` succeeds. */
async function refusal(work: Promise<unknown>): Promise<ApiError> {
  const settled = await work.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
  if (settled.ok) expect.fail(`expected a refusal, got ${JSON.stringify(settled.value)}`);
  expect(settled.error).toBeInstanceOf(ApiError);
  return settled.error as ApiError;
}

const byId = (methods: PaymentMethodView[]) => methods.map((m) => m.id).sort();

/** A charge of $29.00 as the engine makes one: a new invoice id, its attempt 0, the key `<invoice>:0`. */
export const chargeOf = (customerId: string, paymentMethodId: string, overrides: Partial<ChargeRequest> = {}): ChargeRequest => {
  const invoiceId = overrides.invoiceId ?? `in_${randomUUID()}`;
  return { customerId, paymentMethodId, amountCents: 2900, currency: "usd", invoiceId, attempt: 0, idempotencyKey: `${invoiceId}:0`, ...overrides };
};

/** The payment id of an outcome that moved money (the test fails on any other). */
export const paid = (outcome: ChargeOutcome): string => {
  if (outcome.status !== "succeeded") expect.fail(`expected a payment, got ${JSON.stringify(outcome)}`);
  return outcome.paymentId;
};

/** Every time a provider's clock could show: the local provider keeps the engine's (a test's manual clock), Stripe its own. */
const recent = () => ({ from: new Date(0), to: new Date("2100-01-01T00:00:00Z") });

/**
 * The contract of DESIGN §6.1 that every PaymentProvider passes (`local` now, `stripe` later). It
 * speaks only through the interface and compares ids by shape, so a Stripe-backed provider can meet
 * it as the local one does. Portal sessions are not part of PaymentProvider (the engine serves the
 * local portal itself), so the contract has none.
 */
export function providerContract(name: string, setup: () => Promise<ContractSubject>): void {
  describe(`PaymentProvider contract: ${name}`, () => {
    let subject: ContractSubject;
    let provider: PaymentProvider;
    beforeAll(async () => {
      subject = await setup();
      provider = subject.provider;
    });
    afterAll(() => subject?.close());

    /** a new customer with one card of `token` */
    async function customerWithCard(token = "pm_card_visa") {
      const customerId = await subject.newCustomer();
      return { customerId, card: await provider.attach(customerId, token) };
    }

    describe("attach", () => {
      it.each(ATTACHING)("attaches %s as a new pm_… card: %s ending %s, %s", async (token, brand, last4, funding) => {
        const customerId = await subject.newCustomer();
        const card = await provider.attach(customerId, token);
        expect(card).toEqual({
          id: expect.stringMatching(/^pm_\w+$/),
          type: "card",
          customerId,
          card: { brand, last4, funding, expMonth: expect.any(Number), expYear: expect.any(Number) },
          createdAt: expect.any(Number),
        });
        // a new id, as Stripe's pm_1Nx…, never the token itself
        expect(card.id).not.toMatch(/^pm_card_/);
        expect(card.card.expMonth).toBeGreaterThanOrEqual(1);
        expect(card.card.expMonth).toBeLessThanOrEqual(12);
        expect(Number.isInteger(card.createdAt)).toBe(true);
        expect(await provider.list(customerId)).toEqual([card]);
      });

      it("makes a second, different card when one token is attached twice", async () => {
        const { customerId, card: first } = await customerWithCard("pm_card_visa");
        const second = await provider.attach(customerId, "pm_card_visa");
        expect(second.id).toMatch(/^pm_/);
        expect(second.id).not.toBe(first.id);
        expect(byId(await provider.list(customerId))).toEqual([first.id, second.id].sort());
      });

      it("answers a pm_… of this customer, attached again, unchanged", async () => {
        const { customerId, card } = await customerWithCard("pm_card_mastercard");
        expect(await provider.attach(customerId, card.id)).toEqual(card);
        expect(await provider.list(customerId)).toEqual([card]);
      });

      it.each(REFUSED)("refuses %s at attach with 402 PAYMENT_DECLINED, %s / %s, and keeps no card", async (token, code, declineCode) => {
        const customerId = await subject.newCustomer();
        const err = await refusal(provider.attach(customerId, token));
        expect(err).toBeInstanceOf(PaymentDeclined);
        expect(err.status).toBe(402);
        expect(err.code).toBe("PAYMENT_DECLINED");
        expect(err.details).toEqual({ code, declineCode });
        expect(await provider.list(customerId)).toEqual([]);
      });

      it.each(["pm_card_gold", "PM_CARD_VISA", "pm_1NoSuchCardAnywhere", "tok_visa", "constructor"])(
        "refuses %s, neither a test token nor a card of the customer, with 400",
        async (token) => {
          const customerId = await subject.newCustomer();
          expect((await refusal(provider.attach(customerId, token))).status).toBe(400);
          expect(await provider.list(customerId)).toEqual([]);
        },
      );

      it("refuses another customer's pm_… with 400 and leaves it with its owner", async () => {
        const { customerId: owner, card } = await customerWithCard();
        const other = await subject.newCustomer();
        expect((await refusal(provider.attach(other, card.id))).status).toBe(400);
        expect(await provider.list(other)).toEqual([]);
        expect((await provider.find(card.id))?.customerId).toBe(owner);
      });

      it("refuses a detached pm_… with 400: a detached card is never attached again", async () => {
        const { customerId, card } = await customerWithCard();
        await provider.detach(customerId, card.id);
        expect((await refusal(provider.attach(customerId, card.id))).status).toBe(400);
        expect(await provider.list(customerId)).toEqual([]);
      });
    });

    describe("list, find and detach", () => {
      it("lists the attached cards of this customer only, without detached ones", async () => {
        const { customerId, card: visa } = await customerWithCard("pm_card_visa");
        const mastercard = await provider.attach(customerId, "pm_card_mastercard");
        const amex = await provider.attach(customerId, "pm_card_amex");
        const { customerId: other, card: othersCard } = await customerWithCard("pm_card_visa");
        await provider.detach(customerId, mastercard.id);
        // the interface promises no order (Stripe lists newest first): compare as sets
        expect(byId(await provider.list(customerId))).toEqual([visa.id, amex.id].sort());
        expect(await provider.list(other)).toEqual([othersCard]);
        expect(await provider.list(await subject.newCustomer())).toEqual([]);
      });

      it("finds a card by id whoever it belongs to, and answers null for an unknown id", async () => {
        const { card } = await customerWithCard("pm_card_amex");
        expect(await provider.find(card.id)).toEqual(card);
        expect(await provider.find("pm_1NoSuchCardAnywhere")).toBeNull();
      });

      it("detaches a card: the answer and find show it unchanged but for customerId null", async () => {
        const { customerId, card } = await customerWithCard("pm_card_visa_debit");
        const detached = await provider.detach(customerId, card.id);
        expect(detached).toEqual({ ...card, customerId: null });
        expect(await provider.find(card.id)).toEqual(detached);
        expect(await provider.list(customerId)).toEqual([]);
      });

      it("refuses to detach an unknown pm_… with 400", async () => {
        const customerId = await subject.newCustomer();
        expect((await refusal(provider.detach(customerId, "pm_1NoSuchCardAnywhere"))).status).toBe(400);
      });

      it("refuses to detach a card twice with 400", async () => {
        const { customerId, card } = await customerWithCard();
        await provider.detach(customerId, card.id);
        expect((await refusal(provider.detach(customerId, card.id))).status).toBe(400);
      });

      it("refuses to detach another customer's card with 400 and leaves it attached", async () => {
        const { customerId: owner, card } = await customerWithCard();
        const other = await subject.newCustomer();
        expect((await refusal(provider.detach(other, card.id))).status).toBe(400);
        expect(await provider.list(owner)).toEqual([card]);
      });
    });

    describe("setup intents", () => {
      it("creates a seti_… awaiting a payment method, its client secret <id>_secret_…", async () => {
        const customerId = await subject.newCustomer();
        const intent = await provider.createSetupIntent(customerId);
        expect(intent).toEqual({ id: expect.stringMatching(/^seti_\w+$/), clientSecret: expect.any(String), status: "requires_payment_method", customerId });
        expect(intent.clientSecret).toMatch(new RegExp(`^${intent.id}_secret_[A-Za-z0-9]+$`));
        const another = await provider.createSetupIntent(customerId);
        expect(another.id).not.toBe(intent.id);
        expect(another.clientSecret).not.toBe(intent.clientSecret);
      });
    });

    describe("charge", () => {
      it("charges an attached card: succeeded, with the provider's payment id", async () => {
        const { customerId, card } = await customerWithCard();
        const outcome = await provider.charge(chargeOf(customerId, card.id));
        expect(outcome).toEqual({ status: "succeeded", paymentId: expect.any(String) });
        expect(paid(outcome)).not.toBe("");
      });

      it("charges again for another key: two keys, two charges", async () => {
        const { customerId, card } = await customerWithCard();
        const invoiceId = `in_${randomUUID()}`;
        const first = await provider.charge(chargeOf(customerId, card.id, { invoiceId, attempt: 0, idempotencyKey: `${invoiceId}:0` }));
        const second = await provider.charge(chargeOf(customerId, card.id, { invoiceId, attempt: 1, idempotencyKey: `${invoiceId}:1` }));
        expect(second.status).toBe("succeeded");
        expect(paid(second)).not.toBe(paid(first));
      });

      it("answers the same key with the first outcome again and charges once (DESIGN §6.9)", async () => {
        const { customerId, card } = await customerWithCard();
        const request = chargeOf(customerId, card.id);
        const first = await provider.charge(request);
        expect(await provider.charge(request)).toEqual(first);
        expect(await provider.charge({ ...request })).toEqual(first);
      });

      it("never charges twice for a key reused with another amount: the first outcome again, or an unknown one", async () => {
        const { customerId, card } = await customerWithCard();
        const request = chargeOf(customerId, card.id);
        const first = await provider.charge(request);
        // local replays the first outcome; Stripe refuses a key reused with other parameters, which says nothing of the first
        const again = await provider.charge({ ...request, amountCents: 4900 });
        expect([JSON.stringify(first), "unknown"]).toContain(again.status === "unknown" ? "unknown" : JSON.stringify(again));
        expect(await provider.charge(request)).toEqual(first);
        expect((await provider.payments(recent())).filter((p) => p.invoiceId === request.invoiceId)).toHaveLength(1);
      });

      it("charges once for ten concurrent requests with one key", async () => {
        const { customerId, card } = await customerWithCard();
        const request = chargeOf(customerId, card.id);
        const answers = await Promise.all(Array.from({ length: 10 }, () => provider.charge({ ...request })));
        // Stripe answers 409 while the first request with the key is still running: an outcome nobody knows yet
        const known = answers.filter((a) => a.status !== "unknown");
        expect(known.length).toBeGreaterThanOrEqual(1);
        expect(new Set(known.map(paid)).size).toBe(1);
        expect(known.every((a) => a.status === "succeeded")).toBe(true);
        expect(paid(await provider.charge(request))).toBe(paid(known[0]!));
        expect((await provider.payments(recent())).filter((p) => p.invoiceId === request.invoiceId)).toHaveLength(1);
      });

      it("declines every charge of pm_card_chargeCustomerFail: card_declined / generic_decline, a soft decline", async () => {
        const { customerId, card } = await customerWithCard("pm_card_chargeCustomerFail");
        const declined = { status: "declined", paymentId: expect.any(String), code: "card_declined", declineCode: "generic_decline", hard: false };
        const first = await provider.charge(chargeOf(customerId, card.id));
        const second = await provider.charge(chargeOf(customerId, card.id));
        expect(first).toEqual(declined);
        expect(second).toEqual(declined);
        expect((second as { paymentId: string }).paymentId).not.toBe((first as { paymentId: string }).paymentId);
      });

      it("answers a declined key with the same decline again", async () => {
        const { customerId, card } = await customerWithCard("pm_card_chargeCustomerFail");
        const request = chargeOf(customerId, card.id);
        const first = await provider.charge(request);
        expect(first.status).toBe("declined");
        expect(await provider.charge(request)).toEqual(first);
      });

      it("declines, charging nothing, another customer's card, a detached one and an unknown pm_…", async () => {
        const { customerId, card } = await customerWithCard();
        const other = await subject.newCustomer();
        const refusals = [await provider.charge(chargeOf(other, card.id))];
        await provider.detach(customerId, card.id);
        refusals.push(await provider.charge(chargeOf(customerId, card.id)), await provider.charge(chargeOf(customerId, "pm_1NoSuchCardAnywhere")));
        for (const outcome of refusals) expect(outcome).toMatchObject({ status: "declined", code: expect.any(String), hard: false });
      });
    });

    describe("findCharge and payments", () => {
      it("finds a charge by its request: the outcome it had; none for a request never sent", async () => {
        const { customerId, card } = await customerWithCard();
        const request = chargeOf(customerId, card.id);
        const since = new Date(Date.now() - 60_000);
        expect(await provider.findCharge({ ...request, since })).toEqual({ status: "none" });
        const outcome = await provider.charge(request);
        expect(await provider.findCharge({ ...request, since })).toEqual(outcome);
        // another attempt of the same invoice is another charge request
        expect(await provider.findCharge({ ...request, attempt: 1, idempotencyKey: `${request.invoiceId}:1`, since })).toEqual({ status: "none" });
      });

      it("finds a declined charge as the decline it was", async () => {
        const { customerId, card } = await customerWithCard("pm_card_chargeCustomerFail");
        const request = chargeOf(customerId, card.id);
        const outcome = await provider.charge(request);
        expect(await provider.findCharge({ ...request, since: new Date(Date.now() - 60_000) })).toMatchObject({ status: "declined", code: "card_declined", declineCode: "generic_decline" });
        expect(outcome.status).toBe("declined");
      });

      it("lists the succeeded payments made for invoices in a time range, declines left out", async () => {
        const { customerId, card } = await customerWithCard();
        const paidRequest = chargeOf(customerId, card.id, { amountCents: 4321 });
        const outcome = await provider.charge(paidRequest);
        const failing = await customerWithCard("pm_card_chargeCustomerFail");
        const declined = chargeOf(failing.customerId, failing.card.id);
        await provider.charge(declined);
        const payments = await provider.payments(recent());
        expect(payments.filter((p) => p.invoiceId === paidRequest.invoiceId)).toEqual([{ id: paid(outcome), invoiceId: paidRequest.invoiceId, amountCents: 4321, currency: "usd", createdAt: expect.any(Number) }]);
        expect(payments.filter((p) => p.invoiceId === declined.invoiceId)).toEqual([]);
        const made = payments.find((p) => p.invoiceId === paidRequest.invoiceId)!.createdAt * 1000;
        const before = await provider.payments({ from: new Date(made - 7_200_000), to: new Date(made - 3_600_000) });
        expect(before.filter((p) => p.invoiceId === paidRequest.invoiceId)).toEqual([]);
        const around = await provider.payments({ from: new Date(made - 1_000), to: new Date(made + 1_000) });
        expect(around.filter((p) => p.invoiceId === paidRequest.invoiceId)).toHaveLength(1);
      });
    });

    describe("refund (DESIGN §6.10)", () => {
      /** a paid charge of `amountCents` and a maker of refund requests against it, each a credit note of its own */
      async function paidCharge(amountCents = 2900) {
        const { customerId, card } = await customerWithCard();
        const request = chargeOf(customerId, card.id, { amountCents });
        const paymentId = paid(await provider.charge(request));
        const refundOf = (cents: number, creditNoteId = `cn_${randomUUID().replaceAll("-", "")}`): RefundRequest => ({
          creditNoteId,
          invoiceId: request.invoiceId,
          customerId,
          paymentId,
          amountCents: cents,
          currency: "usd",
          idempotencyKey: `refund:${creditNoteId}`,
        });
        return { refundOf };
      }
      const refunded = (outcome: Awaited<ReturnType<PaymentProvider["refund"]>>): string => {
        if (outcome.status !== "succeeded") expect.fail(`expected a refund, got ${JSON.stringify(outcome)}`);
        return outcome.refundId;
      };

      it("refunds part of a payment, then more of it under another key, up to what was paid and not a cent beyond", async () => {
        const { refundOf } = await paidCharge(2900);
        const first = refunded(await provider.refund(refundOf(1000)));
        expect(first).toMatch(/^re_\w+$/);
        const second = refunded(await provider.refund(refundOf(1500)));
        expect(second).not.toBe(first);
        // 400 is left: 401 is refused, nothing moves, and 400 still goes through
        expect(await provider.refund(refundOf(401))).toMatchObject({ status: "failed", code: "amount_too_large" });
        refunded(await provider.refund(refundOf(400)));
        expect(await provider.refund(refundOf(1))).toMatchObject({ status: "failed" });
      });

      it("answers the same key with the first refund again and refunds once", async () => {
        const { refundOf } = await paidCharge(2900);
        const request = refundOf(2000);
        const first = await provider.refund(request);
        expect(await provider.refund(request)).toEqual(first);
        expect(await provider.refund({ ...request })).toEqual(first);
        // refunded once: the 900 left can still be refunded, which 2 × 2000 would not have left
        refunded(await provider.refund(refundOf(900)));
      });

      it("refunds once when one key is sent many times at once", async () => {
        const { refundOf } = await paidCharge(2900);
        const request = refundOf(2000);
        const outcomes = await Promise.all(Array.from({ length: 6 }, () => provider.refund(request)));
        // each answer is the one refund, or (Stripe, while the first runs) unknown: never a second refund
        const ids = new Set(outcomes.filter((o) => o.status === "succeeded").map(refunded));
        expect(outcomes.every((o) => o.status === "succeeded" || o.status === "unknown")).toBe(true);
        expect(ids.size).toBeLessThanOrEqual(1);
        const settled = refunded(await provider.refund(request));
        if (ids.size === 1) expect([...ids]).toEqual([settled]);
        refunded(await provider.refund(refundOf(900)));
        expect(await provider.refund(refundOf(1))).toMatchObject({ status: "failed" });
      });

      it("refuses, moving nothing, a refund of a payment it never made", async () => {
        const { refundOf } = await paidCharge(2900);
        expect(await provider.refund({ ...refundOf(100), paymentId: "pi_1NoSuchPaymentAnywhere" })).toMatchObject({ status: "failed", refundId: null });
        refunded(await provider.refund(refundOf(2900)));
      });
    });

  describe("customers and default cards", () => {
    it("takes the engine's customer, again and again, and cards attach to it", async () => {
      const customerId = await subject.newCustomer();
      await subject.provider.upsertCustomer({ id: customerId, email: "first@example.com", name: null });
      await subject.provider.upsertCustomer({ id: customerId, email: "second@example.com", name: "Ada" });
      expect((await subject.provider.attach(customerId, "pm_card_visa")).customerId).toBe(customerId);
    });

    it("sets an attached card as the default, and refuses another customer's, a detached or an unknown one with 400", async () => {
      const customerId = await subject.newCustomer();
      const other = await subject.newCustomer();
      const card = await subject.provider.attach(customerId, "pm_card_visa");
      await subject.provider.setDefaultPaymentMethod(customerId, card.id);
      const theirs = await subject.provider.attach(other, "pm_card_visa");
      expect((await refusal(subject.provider.setDefaultPaymentMethod(customerId, theirs.id))).status).toBe(400);
      expect((await refusal(subject.provider.setDefaultPaymentMethod(customerId, "pm_1NoSuchCardAnywhere"))).status).toBe(400);
      await subject.provider.detach(customerId, card.id);
      expect((await refusal(subject.provider.setDefaultPaymentMethod(customerId, card.id))).status).toBe(400);
    });
  });

  describe("portal sessions", () => {
    it("answers an http(s) page of the customer's portal, a new one each time", async () => {
      const customerId = await subject.newCustomer();
      const first = await subject.provider.createPortalSession({ customerId, platformId: "plt_contract", returnUrl: "https://console.example.com/billing" });
      const second = await subject.provider.createPortalSession({ customerId, platformId: "plt_contract", returnUrl: "https://console.example.com/billing" });
      expect(first.id).toEqual(expect.any(String));
      expect(new URL(first.url).protocol).toMatch(/^https?:$/);
      expect(second.id).not.toBe(first.id);
      expect(second.url).not.toBe(first.url);
    });
  });
  });
}
