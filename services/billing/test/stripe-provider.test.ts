import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { manualClock } from "@core/kit";
import { applyMigrations, testDatabases, type DatabaseHandle } from "@core/storage";
import { createCustomer } from "../src/customers.js";
import { customers } from "../src/db/schema.js";
import { migrationsFolder, SERVICE_ID } from "../src/index.js";
import { StripeProvider, stripeClient } from "../src/provider/stripe.js";
import { freePort } from "../../iam/test/support/harness.js";
import { startFakeStripe, type FakeStripe } from "./support/fake-stripe.js";
import { chargeOf, paid } from "./support/provider-contract.js";

/**
 * What the contract cannot show: the real SDK's retries against Stripe's idempotency, when Stripe
 * does not answer, answers 500, declines, or is not there at all; and one Stripe customer per
 * engine customer however many requests make it at once.
 */
for (const database of testDatabases()) {
  describe(`stripe provider, failures and retries (${database.name})`, () => {
    let handle: DatabaseHandle;
    let stripe: FakeStripe;
    let provider: StripeProvider;
    const clock = manualClock(new Date("2026-01-31T10:00:00.000Z"));
    beforeAll(async () => {
      [handle, stripe] = await Promise.all([database.open(), startFakeStripe()]);
      await applyMigrations(handle.db, SERVICE_ID, migrationsFolder);
      // a short timeout, so a request Stripe never answers is retried soon, yet slow answers of a busy machine are not taken for none
      provider = new StripeProvider(handle.db, stripeClient({ secretKey: stripe.secretKey, apiBase: stripe.url, timeoutMs: 1_000, maxNetworkRetries: 2 }));
    });
    afterAll(async () => {
      await stripe?.close();
      await handle?.close();
    });

    const newCustomer = async (email = "ada@example.com") => (await createCustomer(handle.db, clock.now(), { email, currency: "usd" })).id;
    async function withCard(token = "pm_card_visa") {
      const customerId = await newCustomer();
      return { customerId, card: await provider.attach(customerId, token) };
    }
    const chargesWithKey = (key: string) => stripe.succeededCharges().filter((c) => c.idempotencyKey === key);
    const attemptsWithKey = (key: string) => stripe.requests.filter((r) => r.idempotencyKey === key);

    it("Stripe does the charge but the answer never comes: the SDK retries with our key, Stripe replays, one charge", async () => {
      const { customerId, card } = await withCard();
      const request = chargeOf(customerId, card.id);
      stripe.fault(/^\/v1\/payment_intents$/, "silent");
      const outcome = await provider.charge(request);
      expect(outcome).toEqual({ status: "succeeded", paymentId: expect.stringMatching(/^pi_/) });
      expect(chargesWithKey(request.idempotencyKey)).toEqual([expect.objectContaining({ id: paid(outcome), amount: 2900 })]);
      expect(attemptsWithKey(request.idempotencyKey).map((r) => ({ status: r.status, replayed: r.replayed }))).toEqual([
        { status: 0, replayed: false },
        { status: 200, replayed: true },
      ]);
      // and the engine's own retry later gets the same answer
      expect(await provider.charge(request)).toEqual(outcome);
      expect(chargesWithKey(request.idempotencyKey)).toHaveLength(1);
    });

    it("Stripe answers 500 before doing anything: the SDK retries and the charge happens once", async () => {
      const { customerId, card } = await withCard();
      const request = chargeOf(customerId, card.id);
      stripe.fault(/^\/v1\/payment_intents$/, "error500");
      const outcome = await provider.charge(request);
      expect(outcome.status).toBe("succeeded");
      expect(attemptsWithKey(request.idempotencyKey).map((r) => r.status)).toEqual([500, 200]);
      expect(chargesWithKey(request.idempotencyKey)).toHaveLength(1);
    });

    it("Stripe charges, then answers 500 (saved for the key, as Stripe saves it): unknown, and findCharge finds the one charge", async () => {
      const { customerId, card } = await withCard();
      const request = chargeOf(customerId, card.id);
      stripe.fault(/^\/v1\/payment_intents$/, "error500After");
      const outcome = await provider.charge(request);
      expect(outcome).toMatchObject({ status: "unknown" });
      // the SDK's retries heard the saved 500 again, and charged nothing more
      expect(attemptsWithKey(request.idempotencyKey).map((r) => [r.status, r.replayed])).toEqual([[500, false], [500, true], [500, true]]);
      const found = await provider.findCharge({ ...request, since: new Date(Date.now() - 60_000) });
      expect(found).toEqual({ status: "succeeded", paymentId: chargesWithKey(request.idempotencyKey)[0]!.id });
      expect(chargesWithKey(request.idempotencyKey)).toHaveLength(1);
    });

    it("Stripe charges, then the connection is reset: the SDK's retry hears the replay, one charge", async () => {
      const { customerId, card } = await withCard();
      const request = chargeOf(customerId, card.id);
      stripe.fault(/^\/v1\/payment_intents$/, "drop");
      const outcome = await provider.charge(request);
      expect(outcome).toEqual({ status: "succeeded", paymentId: chargesWithKey(request.idempotencyKey)[0]!.id });
      expect(chargesWithKey(request.idempotencyKey)).toHaveLength(1);
    });

    it("Stripe never answers any try: unknown, nothing charged, and findCharge says none", async () => {
      const { customerId, card } = await withCard();
      const request = chargeOf(customerId, card.id);
      stripe.fault(/^\/v1\/payment_intents$/, "hang", { times: 3 });
      expect(await provider.charge(request)).toMatchObject({ status: "unknown" });
      expect(chargesWithKey(request.idempotencyKey)).toEqual([]);
      expect(await provider.findCharge({ ...request, since: new Date(Date.now() - 60_000) })).toEqual({ status: "none" });
    });

    it("a decline is an outcome, not an error, and the same key answers the same decline without charging", async () => {
      const { customerId, card } = await withCard();
      const request = chargeOf(customerId, card.id);
      stripe.fault(/^\/v1\/payment_intents$/, "decline");
      const declined = await provider.charge(request);
      expect(declined).toEqual({ status: "declined", paymentId: expect.stringMatching(/^pi_/), code: "card_declined", declineCode: "generic_decline", hard: false });
      expect(await provider.charge(request)).toEqual(declined);
      expect(attemptsWithKey(request.idempotencyKey).map((r) => r.replayed)).toEqual([false, true]);
      expect(chargesWithKey(request.idempotencyKey)).toEqual([]);
    });

    it("Stripe not there at all: an unknown outcome (its reason names no secret), nothing charged", async () => {
      const { customerId, card } = await withCard();
      const gone = new StripeProvider(handle.db, stripeClient({ secretKey: stripe.secretKey, apiBase: `http://127.0.0.1:${await freePort()}`, timeoutMs: 1_000, maxNetworkRetries: 1 }));
      const request = chargeOf(customerId, card.id);
      const outcome = await gone.charge(request);
      expect(outcome).toMatchObject({ status: "unknown" });
      expect(JSON.stringify(outcome)).not.toContain(stripe.secretKey);
      expect(await gone.findCharge({ ...request, since: new Date() })).toMatchObject({ status: "unknown" });
      expect(chargesWithKey(request.idempotencyKey)).toEqual([]);
    });

    it("a wrong secret key is 503 naming STRIPE_SECRET_KEY, never the key", async () => {
      const wrong = new StripeProvider(handle.db, stripeClient({ secretKey: "sk_test_wrong_key_0123456789", apiBase: stripe.url, maxNetworkRetries: 0 }));
      const err = await wrong.attach(await newCustomer(), "pm_card_visa").catch((e: unknown) => e);
      expect(err).toMatchObject({ status: 503, code: "UPSTREAM_UNAVAILABLE" });
      expect((err as Error).message).toContain("STRIPE_SECRET_KEY");
      expect((err as Error).message).not.toContain("sk_test_wrong");
    });

    it("one Stripe customer per engine customer, however many first requests race to make it", async () => {
      const customerId = await newCustomer("race@example.com");
      const before = stripe.requests.filter((r) => r.path === "/v1/customers").length;
      const cards = await Promise.all(Array.from({ length: 6 }, () => provider.attach(customerId, "pm_card_visa")));
      const made = stripe.requests.filter((r) => r.path === "/v1/customers").slice(0);
      expect(made.length - before).toBeGreaterThanOrEqual(1);
      // every create carried the same key, so Stripe made one customer and replayed it to the rest
      expect(new Set(made.slice(before).map((r) => r.idempotencyKey))).toEqual(new Set([`core-customer-${customerId}`]));
      expect(made.slice(before).filter((r) => r.status === 200 && !r.replayed)).toHaveLength(1);
      const [row] = await handle.db.select().from(customers).where(eq(customers.id, customerId));
      expect(row!.providerCustomerId).toMatch(/^cus_/);
      expect((await provider.list(customerId)).map((c) => c.id).sort()).toEqual(cards.map((c) => c.id).sort());
    });

    it("upsertCustomer brings Stripe's copy of the email and name up to date", async () => {
      const customerId = await newCustomer("old@example.com");
      await provider.upsertCustomer({ id: customerId, email: "old@example.com", name: null });
      const [row] = await handle.db.select().from(customers).where(eq(customers.id, customerId));
      expect(stripe.customer(row!.providerCustomerId!)).toMatchObject({ email: "old@example.com", name: null, metadata: { core_customer_id: customerId } });
      await provider.upsertCustomer({ id: customerId, email: "new@example.com", name: "Ada" });
      expect(stripe.customer(row!.providerCustomerId!)).toMatchObject({ email: "new@example.com", name: "Ada" });
    });

    it("the default card is set at Stripe too, and only to a card of this customer", async () => {
      const { customerId, card } = await withCard();
      await provider.setDefaultPaymentMethod(customerId, card.id);
      const [row] = await handle.db.select().from(customers).where(eq(customers.id, customerId));
      expect(stripe.customer(row!.providerCustomerId!)!.defaultPaymentMethod).toBe(card.id);
    });
  });
}
