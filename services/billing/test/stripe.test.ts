import { randomUUID } from "node:crypto";
import { eq } from "drizzle-orm";
import Stripe from "stripe";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "@core/storage";
import { invoices, providerEvents } from "../src/db/schema.js";
import { RETRY_DAYS } from "../src/renewals.js";
import { startFakeStripe, type FakeStripe } from "./support/fake-stripe.js";
import { startBilling, type Billing } from "./support/billing.js";

const WEBHOOK_SECRET = "whsec_testsecret0123456789abcdef";
const signer = new Stripe("sk_test_signing_only_0000");

/**
 * Billing on the stripe provider (DESIGN §6.1), end to end: the real engine and routes, the real
 * SDK, our fake Stripe. The README's billing walk-through gives the same results as on the local
 * provider, and Stripe's events come in at POST /webhooks/stripe, each handled once.
 */
describe.each(testDatabases())("billing on Stripe ($name)", (database) => {
  let b: Billing;
  let stripe: FakeStripe;
  let op: Record<string, string>;
  beforeAll(async () => {
    stripe = await startFakeStripe();
    b = await startBilling(database, { testClock: true, stripe: { secretKey: stripe.secretKey, webhookSecret: WEBHOOK_SECRET, apiBase: stripe.url, timeoutMs: 1_000 } });
    op = b.as.operator();
  });
  afterAll(async () => {
    await b?.close();
    await stripe?.close();
  });

  const subscriptionOf = async (platformId: string) => (await b.call("GET", `/subscription?platformId=${platformId}`, { headers: op })).body;
  const invoicesOf = async (platformId: string) => (await b.call("GET", `/invoices?platformId=${platformId}&limit=100`, { headers: op })).body.data as any[];
  const advance = (seconds: number) => b.call("POST", "/operator/test-clock/advance", { headers: op, body: { seconds } });
  const toPeriodEnd = async (platformId: string) => {
    const end = (await subscriptionOf(platformId)).currentPeriodEnd;
    const now = (await b.call("GET", "/operator/test-clock", { headers: op })).body.now;
    return advance(end - now + 60);
  };

  /** POST /webhooks/stripe as Stripe sends it: the event, signed with the endpoint's secret at `timestamp`. */
  function deliver(event: object, options: { secret?: string; timestamp?: number; signature?: string | null } = {}) {
    const payload = JSON.stringify(event);
    const timestamp = options.timestamp ?? Math.floor(b.clock.now().getTime() / 1000);
    const signature = options.signature === undefined ? signer.webhooks.generateTestHeaderString({ payload, secret: options.secret ?? WEBHOOK_SECRET, timestamp }) : options.signature;
    return b.call("POST", "/webhooks/stripe", { headers: { "content-type": "application/json", ...(signature !== null && { "stripe-signature": signature }) }, body: payload });
  }
  const paymentSucceeded = (invoiceId: string | null, id = `evt_${randomUUID().replaceAll("-", "")}`, intentId = `pi_${randomUUID().replaceAll("-", "")}`, attempt?: string) => ({
    id,
    object: "event",
    type: "payment_intent.succeeded",
    created: Math.floor(b.clock.now().getTime() / 1000),
    data: { object: { id: intentId, object: "payment_intent", status: "succeeded", metadata: invoiceId ? { core_invoice_id: invoiceId, ...(attempt !== undefined && { core_attempt: attempt }) } : {} } },
  });

  describe("the walk-through, on Stripe", () => {
    it("upgrade charges the first period through a PaymentIntent with the engine's key, on a Stripe customer made for the platform", async () => {
      const before = stripe.succeededCharges().length;
      const { platformId, invoice } = await b.upgraded("plan_starter", "pm_card_visa");
      expect(invoice).toMatchObject({ status: "paid", amountPaidCents: 2900 });
      const charged = stripe.succeededCharges().slice(before);
      expect(charged).toEqual([expect.objectContaining({ amount: 2900, customer: expect.stringMatching(/^cus_/), idempotencyKey: expect.any(String) })]);
      expect((await subscriptionOf(platformId)).tier).toBe("starter");
      const cards = (await b.call("GET", `/customers/${(await subscriptionOf(platformId)).customerId}/payment-methods`, { headers: op })).body;
      expect(JSON.stringify(cards)).toContain("4242");
    });

    it("a declined card at upgrade changes nothing: 402 PAYMENT_DECLINED with Stripe's codes in the message", async () => {
      const platformId = await b.newPlatform();
      const r = await b.call("POST", "/api/billing/upgrade", {
        headers: b.as.owner(platformId),
        body: { planId: "plan_starter", paymentMethodId: "pm_card_visa_chargeDeclinedInsufficientFunds", billingEmail: "b@example.com", idempotencyKey: randomUUID() },
      });
      expect(r.status).toBe(402);
      expect(r.body.error.message).toContain("insufficient_funds");
      expect((await subscriptionOf(platformId)).tier).toBe("free");
    });

    it("a tier change charges exactly the preview; a renewal charges the new period; a failing card goes past_due, is retried, then back to free", async () => {
      const { platformId, owner } = await b.upgraded("plan_starter");
      await advance(7 * 86_400);
      const preview = (await b.call("GET", `/subscription/proration-preview?platformId=${platformId}&tier=growth`, { headers: owner })).body;
      const before = stripe.succeededCharges().length;
      const changed = await b.call("POST", "/subscription/change-tier", { headers: owner, body: { tier: "growth", prorationDate: preview.prorationDate, expectedAmountDueCents: preview.amountDueCents } });
      expect(changed.status).toBe(200);
      expect(stripe.succeededCharges().slice(before).map((c) => c.amount)).toEqual([preview.amountDueCents]);

      await toPeriodEnd(platformId);
      expect((await invoicesOf(platformId))[0]).toMatchObject({ status: "paid", amountPaidCents: 9900 });

      const customerId = (await subscriptionOf(platformId)).customerId;
      expect((await b.call("POST", "/payment-methods/pm_card_chargeCustomerFail/attach", { headers: op, body: { customerId, setAsDefault: true } })).status).toBe(200);
      await toPeriodEnd(platformId);
      expect((await subscriptionOf(platformId)).status).toBe("past_due");
      for (const day of RETRY_DAYS) await advance(day * 86_400);
      expect((await subscriptionOf(platformId)).tier).toBe("free");
      expect((await invoicesOf(platformId))[0].status).toBe("uncollectible");
    });

    it("an upgrade whose charge Stripe makes but never answers: the SDK's retry gets Stripe's replay, and the platform is charged once", async () => {
      const platformId = await b.newPlatform();
      const before = stripe.succeededCharges().length;
      stripe.fault(/^\/v1\/payment_intents$/, "silent");
      const r = await b.call("POST", "/api/billing/upgrade", {
        headers: b.as.owner(platformId),
        body: { planId: "plan_starter", paymentMethodId: "pm_card_visa", billingEmail: "b@example.com", idempotencyKey: randomUUID() },
      });
      expect(r.status).toBe(200);
      expect(stripe.succeededCharges().length - before).toBe(1);
      expect(stripe.requests.filter((q) => q.path === "/v1/payment_intents").slice(-2).map((q) => q.replayed)).toEqual([false, true]);
    });

    it("when every try times out, the upgrade is 503 PAYMENT_PENDING naming its invoice; a retry learns the outcome, found at Stripe, and nothing is charged twice", async () => {
      const platformId = await b.newPlatform();
      const owner = b.as.owner(platformId);
      const body = { planId: "plan_starter", paymentMethodId: "pm_card_visa", billingEmail: "b@example.com", idempotencyKey: randomUUID() };
      const before = stripe.succeededCharges().length;
      // the first try and the SDK's two retries (of the charge, after the card was attached) hear nothing
      stripe.fault(/^\/v1\/payment_intents$/, "silent", { times: 3 });
      const first = await b.call("POST", "/api/billing/upgrade", { headers: owner, body });
      expect(first.status).toBe(503);
      expect(first.headers.get("retry-after")).toBe("60");
      expect(first.body.error).toEqual({ code: "PAYMENT_PENDING", message: expect.stringMatching(/invoice in_\w+/), requestId: expect.any(String) });
      const invoiceId = /invoice (in_\w+)/.exec(first.body.error.message)![1]!;
      expect((await subscriptionOf(platformId)).tier).toBe("free");
      expect((await b.call("GET", `/invoices/${invoiceId}?platformId=${platformId}`, { headers: op })).body).toMatchObject({ status: "open", collection: { state: "pending" } });
      // Stripe did the first one: money moved, and the engine does not know it yet
      expect(stripe.succeededCharges().length - before).toBe(1);
      const soon = await b.call("POST", "/api/billing/upgrade", { headers: owner, body });
      expect(soon.status).toBe(503);
      expect(soon.body.error.code).toBe("PAYMENT_PENDING");
      // a minute on, the retry asks Stripe about the charge, finds it, and the upgrade is done
      b.clock.advance(61_000);
      const again = await b.call("POST", "/api/billing/upgrade", { headers: owner, body });
      expect(again.status).toBe(200);
      expect(again.body.invoice).toMatchObject({ id: invoiceId, status: "paid", amountPaidCents: 2900 });
      expect((await subscriptionOf(platformId)).tier).toBe("starter");
      expect(stripe.succeededCharges().length - before).toBe(1);
      expect((await b.call("POST", "/api/billing/upgrade", { headers: owner, body })).headers.get("idempotent-replayed")).toBe("true");
    });

    it("Stripe's event comes before the engine's own answer: it pays the invoice and applies the upgrade; the retry answers it, one charge", async () => {
      const platformId = await b.newPlatform();
      const owner = b.as.owner(platformId);
      const body = { planId: "plan_growth", paymentMethodId: "pm_card_visa", billingEmail: "b@example.com", idempotencyKey: randomUUID() };
      const before = stripe.succeededCharges().length;
      stripe.fault(/^\/v1\/payment_intents$/, "silent", { times: 3 });
      expect((await b.call("POST", "/api/billing/upgrade", { headers: owner, body })).status).toBe(503);
      const made = stripe.succeededCharges().slice(before);
      expect(made).toHaveLength(1);
      const event = paymentSucceeded(made[0]!.invoiceId, undefined, made[0]!.id, "0");
      expect(await deliver(event)).toMatchObject({ status: 200, body: { duplicate: false } });
      expect(await subscriptionOf(platformId)).toMatchObject({ tier: "growth", status: "active" });
      const again = await b.call("POST", "/api/billing/upgrade", { headers: owner, body });
      expect(again.status).toBe(200);
      expect(again.body.invoice).toMatchObject({ id: made[0]!.invoiceId, status: "paid", amountPaidCents: 9900 });
      expect(stripe.succeededCharges().length - before).toBe(1);
    });

    it("POST /portal answers Stripe's Billing Portal session for the customer", async () => {
      const { platformId, owner } = await b.upgraded("plan_starter");
      const r = await b.call("POST", "/portal", { headers: owner, body: { returnUrl: "https://console.example.com/billing" } });
      expect(r.status).toBe(201);
      expect(r.body).toEqual({ id: expect.stringMatching(/^bps_/), url: expect.stringMatching(new RegExp(`^${stripe.url}/p/session/bps_`)) });
    });
  });

  describe("POST /webhooks/stripe", () => {
    /** A platform whose renewal was declined: its open invoice, past_due. */
    async function pastDue() {
      const { platformId } = await b.upgraded("plan_starter");
      const customerId = (await subscriptionOf(platformId)).customerId;
      await b.call("POST", "/payment-methods/pm_card_chargeCustomerFail/attach", { headers: op, body: { customerId, setAsDefault: true } });
      await toPeriodEnd(platformId);
      const open = (await invoicesOf(platformId))[0];
      expect(open.status).toBe("open");
      expect((await subscriptionOf(platformId)).status).toBe("past_due");
      return { platformId, invoiceId: open.id as string };
    }

    it("a payment the engine did not see succeed pays the open invoice and makes the subscription active; the engine's next retry then charges nothing", async () => {
      const { platformId, invoiceId } = await pastDue();
      const r = await deliver(paymentSucceeded(invoiceId));
      expect(r).toMatchObject({ status: 200, body: { received: true, duplicate: false } });
      expect((await invoicesOf(platformId))[0]).toMatchObject({ id: invoiceId, status: "paid", amountPaidCents: 2900 });
      expect((await subscriptionOf(platformId)).status).toBe("active");
      const before = stripe.requests.filter((r) => r.path === "/v1/payment_intents").length;
      await advance(RETRY_DAYS[0]! * 86_400 + 60);
      expect(stripe.requests.filter((r) => r.path === "/v1/payment_intents").length).toBe(before);
    });

    it("a redelivered event is answered duplicate and changes nothing; five deliveries at once are handled once", async () => {
      const { invoiceId } = await pastDue();
      const event = paymentSucceeded(invoiceId);
      const answers = await Promise.all(Array.from({ length: 5 }, () => deliver(event)));
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
      expect(answers.filter((a) => a.body.duplicate === false)).toHaveLength(1);
      expect((await deliver(event)).body).toEqual({ received: true, duplicate: true });
      const recorded = await b.db.select().from(providerEvents).where(eq(providerEvents.id, event.id));
      expect(recorded).toEqual([expect.objectContaining({ type: "payment_intent.succeeded", outcome: expect.stringContaining(`paid: invoice ${invoiceId}`) })]);
    });

    it("events for unknown objects, without our metadata or of types billing does not use are recorded and answered 200", async () => {
      for (const event of [paymentSucceeded("in_nowhere"), paymentSucceeded(null), { ...paymentSucceeded(null), type: "customer.created" }]) {
        expect(await deliver(event)).toMatchObject({ status: 200, body: { received: true, duplicate: false } });
        const [row] = await b.db.select().from(providerEvents).where(eq(providerEvents.id, event.id));
        expect(row!.outcome).toMatch(/^ignored: /);
      }
    });

    it("a payment for an invoice paid by another payment changes nothing: it is recorded, and reconcile names it", async () => {
      const { invoice } = await b.upgraded("plan_starter");
      const event = paymentSucceeded(invoice.id);
      expect((await deliver(event)).status).toBe(200);
      const [row] = await b.db.select().from(providerEvents).where(eq(providerEvents.id, event.id));
      expect(row!.outcome).toMatch(new RegExp(`^nothing to do: invoice ${invoice.id} is paid \\(paid by pi_`));
      const [still] = await b.db.select().from(invoices).where(eq(invoices.id, invoice.id));
      expect(still!.paymentId).not.toBe(event.data.object.id);
    });

    it("refuses what Stripe did not sign: no signature, another secret, a signature older than 300 s; nothing is recorded", async () => {
      const { invoiceId } = await pastDue();
      const now = Math.floor(b.clock.now().getTime() / 1000);
      const cases = [
        deliver(paymentSucceeded(invoiceId), { signature: null }),
        deliver(paymentSucceeded(invoiceId), { secret: "whsec_someoneelse0123456789" }),
        deliver(paymentSucceeded(invoiceId), { timestamp: now - 301 }),
        deliver(paymentSucceeded(invoiceId), { signature: "t=1,v1=deadbeef" }),
      ];
      for (const r of await Promise.all(cases)) {
        expect(r.status).toBe(400);
        expect(r.body.error.code).toBe("WEBHOOK_SIGNATURE_INVALID");
        expect(JSON.stringify(r.body)).not.toContain(WEBHOOK_SECRET);
      }
      // a signature 299 s old is still good
      expect((await deliver(paymentSucceeded(invoiceId), { timestamp: now - 299 })).status).toBe(200);
    });
  });
});

describe.each(testDatabases())("billing on the local provider ($name)", (database) => {
  let b: Billing;
  beforeAll(async () => {
    b = await startBilling(database);
  });
  afterAll(() => b?.close());

  it("has no Stripe events to receive: POST /webhooks/stripe is 404 and says how to turn Stripe on", async () => {
    const r = await b.call("POST", "/webhooks/stripe", { headers: { "stripe-signature": "t=1,v1=00" }, body: { id: "evt_1", type: "payment_intent.succeeded" } });
    expect(r.status).toBe(404);
    expect(r.body.error.message).toContain("STRIPE_SECRET_KEY");
  });
});
