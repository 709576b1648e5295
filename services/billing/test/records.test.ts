import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "@core/storage";
import { startBilling, unique, type Billing } from "./support/billing.js";

const DAY = 86_400_000;

describe.each(testDatabases())("table B: customers, payment methods and subscriptions on $name", (database) => {
  let b: Billing;
  let op: Record<string, string>;
  beforeAll(async () => {
    b = await startBilling(database);
    op = b.as.operator();
  });
  afterAll(() => b?.close());

  /** A customer linked to a new free platform and a user, as an operator makes one. */
  async function linkedCustomer() {
    const platformId = await b.newPlatform();
    const userId = unique("user");
    const r = await b.call("POST", "/customers", { headers: op, body: { email: `${userId}@Example.com`, name: "Ada", metadata: { platformId, userId } } });
    expect(r.status).toBe(201);
    return { platformId, userId, customer: r.body };
  }

  const subscribe = (userId: string, overrides: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
    b.call("POST", "/subscriptions", { headers: { ...op, ...headers }, body: { userId, priceId: "price_starter_monthly", paymentMethodId: "pm_card_visa", ...overrides } });

  describe("customers", () => {
    it("creates a customer linked by metadata, lower-cases its email and reads it back", async () => {
      const { platformId, userId, customer } = await linkedCustomer();
      expect(customer).toMatchObject({ id: expect.stringMatching(/^cus_/), email: `${userId}@example.com`, name: "Ada", platformId, userId, balanceCents: 0, currency: "usd", defaultPaymentMethodId: null });
      const read = await b.call("GET", `/customers/${customer.id}`, { headers: op });
      expect(read.status).toBe(200);
      expect(read.body).toEqual(customer);
    });

    it("makes a customer without links, and refuses a second customer of one platform with 409 CUSTOMER_EXISTS", async () => {
      const bare = await b.call("POST", "/customers", { headers: op, body: { email: "someone@example.com" } });
      expect(bare.status).toBe(201);
      expect(bare.body).toMatchObject({ platformId: null, userId: null, name: null, metadata: {} });
      const { platformId } = await linkedCustomer();
      const again = await b.call("POST", "/customers", { headers: op, body: { email: "x@example.com", metadata: { platformId } } });
      expect(again.status).toBe(409);
      expect(again.body.error.code).toBe("CUSTOMER_EXISTS");
    });

    it("answers 404 for a platform the registry does not know", async () => {
      const r = await b.call("POST", "/customers", { headers: op, body: { email: "x@example.com", metadata: { platformId: "plt_nope" } } });
      expect(r.status).toBe(404);
    });

    it.each([
      ["an email that is not one", { email: "not-an-email" }],
      ["no email", { name: "Ada" }],
      ["a name of 201 characters", { email: "a@example.com", name: "n".repeat(201) }],
      ["51 metadata keys", { email: "a@example.com", metadata: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, "v"])) }],
      ["a metadata value of 501 characters", { email: "a@example.com", metadata: { note: "v".repeat(501) } }],
      ["a nested metadata value", { email: "a@example.com", metadata: { deep: { a: 1 } } }],
      ["a platformId that is not a string", { email: "a@example.com", metadata: { platformId: 7 } }],
      ["an unknown field", { email: "a@example.com", platformId: "plt_x" }],
    ])("refuses %s with 400", async (_, body) => {
      const r = await b.call("POST", "/customers", { headers: op, body });
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBeTypeOf("string");
    });

    it("takes the limits just inside: a 200-character name and 50 metadata keys", async () => {
      const r = await b.call("POST", "/customers", {
        headers: op,
        body: { email: "a@example.com", name: "n".repeat(200), metadata: Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, "v".repeat(500)])) },
      });
      expect(r.status).toBe(201);
    });

    it("merges metadata on update, removes a key set to null, and audits the change", async () => {
      const { customer } = await linkedCustomer();
      const r = await b.call("PATCH", `/customers/${customer.id}`, { headers: op, body: { email: "New@Example.com", name: null, metadata: { plan: "gold", platformId: null } } });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ email: "new@example.com", name: null, platformId: customer.platformId });
      expect(r.body.metadata).toEqual({ userId: customer.userId, plan: "gold" });
      const audit = await b.call("GET", "/operator/audit?limit=5", { headers: op });
      expect(audit.body.data[0]).toMatchObject({ action: "customer.update", targetId: customer.id, actorType: "user" });
      expect(audit.body.data[0].before.email).toBe(customer.email);
    });

    it("answers 404 for an unknown customer on every customer route", async () => {
      for (const [method, path] of [
        ["GET", "/customers/cus_nope"],
        ["GET", "/customers/cus_nope/subscriptions"],
        ["GET", "/customers/cus_nope/payment-methods"],
        ["GET", "/customers/cus_nope/payment-methods/default"],
      ] as const) {
        expect((await b.call(method, path, { headers: op })).status, path).toBe(404);
      }
      expect((await b.call("PATCH", "/customers/cus_nope", { headers: op, body: { name: "x" } })).status).toBe(404);
    });

    it("is for operators and services: a tenant owner gets 403, nobody 401, a service 201", async () => {
      const platformId = await b.newPlatform();
      expect((await b.call("POST", "/customers", { headers: b.as.owner(platformId), body: { email: "a@example.com" } })).status).toBe(403);
      expect((await b.call("POST", "/customers", { body: { email: "a@example.com" } })).status).toBe(401);
      expect((await b.call("POST", "/customers", { headers: await b.as.service(), body: { email: "a@example.com" } })).status).toBe(201);
    });
  });

  describe("payment methods", () => {
    it("attaches a test card as a new pm_… with its brand and last4, lists it, and makes it the default when asked", async () => {
      const { customer } = await linkedCustomer();
      const none = await b.call("GET", `/customers/${customer.id}/payment-methods/default`, { headers: op });
      expect(none.status).toBe(404);
      const r = await b.call("POST", "/payment-methods/pm_card_mastercard/attach", { headers: op, body: { customerId: customer.id, setAsDefault: true } });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ id: expect.stringMatching(/^pm_/), type: "card", customerId: customer.id, card: { brand: "mastercard", last4: "4444" }, isDefault: true });
      const plain = await b.call("POST", "/payment-methods/pm_card_amex/attach", { headers: op, body: { customerId: customer.id } });
      expect(plain.body).toMatchObject({ card: { brand: "amex" }, isDefault: false });
      const listed = await b.call("GET", `/customers/${customer.id}/payment-methods?type=card`, { headers: op });
      // both were made at the same instant of the test's clock: the order of a tie is by id
      expect(listed.body.data.map((pm: { id: string }) => pm.id).sort()).toEqual([r.body.id, plain.body.id].sort());
      expect((await b.call("GET", `/customers/${customer.id}/payment-methods?type=sepa_debit`, { headers: op })).body.data).toEqual([]);
      const def = await b.call("GET", `/customers/${customer.id}/payment-methods/default`, { headers: op });
      expect(def.body.id).toBe(r.body.id);
      expect((await b.call("GET", `/payment-methods/${plain.body.id}`, { headers: op })).body).toEqual(plain.body);
    });

    it("refuses a declining test card on attach with 402 and Stripe's codes in details", async () => {
      const { customer } = await linkedCustomer();
      const r = await b.call("POST", "/payment-methods/pm_card_visa_chargeDeclinedStolenCard/attach", { headers: op, body: { customerId: customer.id } });
      expect(r.status).toBe(402);
      expect(r.body.error).toMatchObject({ code: "PAYMENT_DECLINED", details: { code: "card_declined", declineCode: "stolen_card" } });
      expect((await b.call("GET", `/customers/${customer.id}/payment-methods`, { headers: op })).body.data).toEqual([]);
    });

    it("refuses a token that is neither a test card nor this customer's pm_… with 400, and another customer's pm_… too", async () => {
      const { customer } = await linkedCustomer();
      const other = await linkedCustomer();
      const theirs = await b.call("POST", "/payment-methods/pm_card_visa/attach", { headers: op, body: { customerId: other.customer.id } });
      expect((await b.call("POST", "/payment-methods/tok_visa/attach", { headers: op, body: { customerId: customer.id } })).status).toBe(400);
      expect((await b.call("POST", `/payment-methods/${theirs.body.id}/attach`, { headers: op, body: { customerId: customer.id } })).status).toBe(400);
      expect((await b.call("POST", `/payment-methods/${theirs.body.id}/set-default`, { headers: op, body: { customerId: customer.id } })).status).toBe(404);
      expect((await b.call("POST", "/payment-methods/pm_card_visa/attach", { headers: op, body: { customerId: "cus_nope" } })).status).toBe(404);
    });

    it("detaches a card: the default is cleared, the card reads with customerId null, and a second detach is 404", async () => {
      const { customer } = await linkedCustomer();
      const card = await b.call("POST", "/payment-methods/pm_card_visa/attach", { headers: op, body: { customerId: customer.id, setAsDefault: true } });
      const r = await b.call("POST", `/payment-methods/${card.body.id}/detach`, { headers: op });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ id: card.body.id, customerId: null, isDefault: false });
      expect((await b.call("GET", `/customers/${customer.id}`, { headers: op })).body.defaultPaymentMethodId).toBeNull();
      expect((await b.call("GET", `/payment-methods/${card.body.id}`, { headers: op })).body.customerId).toBeNull();
      expect((await b.call("POST", `/payment-methods/${card.body.id}/detach`, { headers: op })).status).toBe(404);
      expect((await b.call("GET", "/payment-methods/pm_nope", { headers: op })).status).toBe(404);
    });

    it("sets another attached card as the default and answers the customer", async () => {
      const { customer } = await linkedCustomer();
      await b.call("POST", "/payment-methods/pm_card_visa/attach", { headers: op, body: { customerId: customer.id, setAsDefault: true } });
      const second = await b.call("POST", "/payment-methods/pm_card_visa_debit/attach", { headers: op, body: { customerId: customer.id } });
      const r = await b.call("POST", `/payment-methods/${second.body.id}/set-default`, { headers: op, body: { customerId: customer.id } });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ id: customer.id, defaultPaymentMethodId: second.body.id });
    });
  });

  describe("subscriptions", () => {
    it("subscribes the user's customer with a quantity, charging price × quantity at once", async () => {
      const { platformId, userId, customer } = await linkedCustomer();
      const r = await subscribe(userId, { priceId: "price_growth_monthly", quantity: 3, metadata: { order: "42" } });
      expect(r.status).toBe(201);
      expect(r.body).toMatchObject({ id: expect.stringMatching(/^sub_/), platformId, customerId: customer.id, tier: "growth", quantity: 3, metadata: { order: "42" }, status: "active" });
      const invoices = await b.call("GET", `/invoices?platformId=${platformId}`, { headers: op });
      expect(invoices.body.data[0]).toMatchObject({ status: "paid", amountPaidCents: 29_700, lines: [expect.objectContaining({ description: "3 × Growth (monthly)", quantity: "3", unitAmountCents: "9900", amountCents: 29_700 })] });
      expect((await b.call("GET", `/subscriptions/${r.body.id}`, { headers: op })).body).toEqual(r.body);
      const listed = await b.call("GET", `/customers/${customer.id}/subscriptions`, { headers: op });
      expect(listed.body.data.map((s: { id: string }) => s.id)).toContain(r.body.id);
    });

    it.each([
      ["an unknown user", { userId: "user_nobody" }, 404],
      ["an unknown price", { priceId: "price_platinum_monthly" }, 400],
      ["the free price", { priceId: "price_free_monthly" }, 400],
      ["quantity 0", { quantity: 0 }, 400],
      ["quantity 10001", { quantity: 10_001 }, 400],
      ["a fractional quantity", { quantity: 1.5 }, 400],
    ])("refuses %s", async (_, overrides, status) => {
      const { userId } = await linkedCustomer();
      const r = await subscribe(userId, overrides);
      expect(r.status).toBe(status);
      expect(r.body.error).toBeDefined();
    });

    it("refuses a second subscription with 409 ALREADY_SUBSCRIBED, and a customer with no platform with 409 NO_PLATFORM", async () => {
      const { userId } = await linkedCustomer();
      expect((await subscribe(userId)).status).toBe(201);
      const again = await subscribe(userId);
      expect(again.status).toBe(409);
      expect(again.body.error.code).toBe("ALREADY_SUBSCRIBED");
      const loose = unique("user");
      await b.call("POST", "/customers", { headers: op, body: { email: "loose@example.com", metadata: { userId: loose } } });
      expect((await subscribe(loose)).body.error.code).toBe("NO_PLATFORM");
    });

    it("leaves the platform on free when the card declines (402)", async () => {
      const { userId, platformId } = await linkedCustomer();
      const r = await subscribe(userId, { paymentMethodId: "pm_card_chargeCustomerFail" });
      expect(r.status).toBe(402);
      expect(r.body.error.details).toEqual({ code: "card_declined", declineCode: "generic_decline" });
      expect((await b.call("GET", `/subscription?platformId=${platformId}`, { headers: op })).body.tier).toBe("free");
    });

    it("replays the same Idempotency-Key and charges once", async () => {
      const { userId, platformId } = await linkedCustomer();
      const key = { "idempotency-key": crypto.randomUUID() };
      const [first, second] = await Promise.all([subscribe(userId, {}, key), subscribe(userId, {}, key)]);
      const statuses = [first.status, second.status].sort();
      // one runs; the other either waits and replays it, or is told the key is in use
      expect(statuses[0]).toBe(201);
      expect([201, 409]).toContain(statuses[1]);
      const replay = await subscribe(userId, {}, key);
      expect(replay.status).toBe(201);
      expect(replay.headers.get("idempotent-replayed")).toBe("true");
      const paid = (await b.call("GET", `/invoices?platformId=${platformId}`, { headers: op })).body.data;
      expect(paid).toHaveLength(1);
      const other = await subscribe(userId, { quantity: 2 }, key);
      expect(other.status).toBe(422);
      expect(other.body.error.code).toBe("IDEMPOTENCY_KEY_REUSED");
    });

    it("prorates more seats now, and applies fewer at the period's end", async () => {
      const { userId, platformId } = await linkedCustomer();
      const sub = (await subscribe(userId, { quantity: 2 })).body;
      b.clock.advance(14 * DAY); // half of the 28-day period
      const more = await b.call("PATCH", `/subscriptions/${sub.id}`, { headers: op, body: { quantity: 4 } });
      expect(more.status).toBe(200);
      expect(more.body).toMatchObject({ quantity: 4, pendingQuantity: null });
      const proration = (await b.call("GET", `/invoices?platformId=${platformId}`, { headers: op })).body.data[0];
      expect(proration.lines.map((l: { amountCents: number }) => l.amountCents)).toEqual([-2900, 5800]);
      expect(proration.lines[1].description).toMatch(/^Remaining time on 4 × Starter/);
      const fewer = await b.call("PATCH", `/subscriptions/${sub.id}`, { headers: op, body: { quantity: 1 } });
      expect(fewer.body).toMatchObject({ quantity: 4, pendingQuantity: 1 });
      // the period ends on 28 February 10:00; the renewal charges one seat
      b.clock.advance(15 * DAY);
      await b.ctx.worker.pass();
      const renewed = await b.call("GET", `/subscriptions/${sub.id}`, { headers: op });
      expect(renewed.body).toMatchObject({ quantity: 1, pendingQuantity: null, status: "active" });
      const cycle = (await b.call("GET", `/invoices?platformId=${platformId}`, { headers: op })).body.data[0];
      expect(cycle).toMatchObject({ status: "paid", amountPaidCents: 2900 });
    });

    it("sets the default card, cancels at the period's end and resumes, with one PATCH each", async () => {
      const { userId, customer } = await linkedCustomer();
      const sub = (await subscribe(userId)).body;
      const card = await b.call("PATCH", `/subscriptions/${sub.id}`, { headers: op, body: { paymentMethodId: "pm_card_amex" } });
      expect(card.status).toBe(200);
      const def = await b.call("GET", `/customers/${customer.id}/payment-methods/default`, { headers: op });
      expect(def.body.card.brand).toBe("amex");
      expect((await b.call("PATCH", `/subscriptions/${sub.id}`, { headers: op, body: { cancelAtPeriodEnd: true } })).body.cancelAtPeriodEnd).toBe(true);
      expect((await b.call("PATCH", `/subscriptions/${sub.id}`, { headers: op, body: { cancelAtPeriodEnd: false } })).body.cancelAtPeriodEnd).toBe(false);
      const none = await b.call("PATCH", `/subscriptions/${sub.id}`, { headers: op, body: {} });
      expect(none.body).toMatchObject({ id: sub.id, cancelAtPeriodEnd: false });
    });

    it("cancels now with immediately=true: the row is canceled, the platform back on free, and a second DELETE answers the same", async () => {
      const { userId, platformId } = await linkedCustomer();
      const sub = (await subscribe(userId)).body;
      expect((await b.call("DELETE", `/subscriptions/${sub.id}?immediately=maybe`, { headers: op })).status).toBe(400);
      const r = await b.call("DELETE", `/subscriptions/${sub.id}?immediately=true`, { headers: op });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ id: sub.id, status: "canceled", canceledAt: expect.any(Number) });
      const current = await b.call("GET", `/subscription?platformId=${platformId}`, { headers: op });
      expect(current.body).toMatchObject({ tier: "free", status: "active" });
      expect(current.body.id).not.toBe(sub.id);
      expect((await b.call("DELETE", `/subscriptions/${sub.id}?immediately=true`, { headers: op })).body).toEqual(r.body);
      const ended = await b.call("PATCH", `/subscriptions/${sub.id}`, { headers: op, body: { quantity: 2 } });
      expect(ended.status).toBe(409);
      expect(ended.body.error.code).toBe("SUBSCRIPTION_ENDED");
      const free = await b.call("DELETE", `/subscriptions/${current.body.id}`, { headers: op });
      expect(free.status).toBe(409);
      expect(free.body.error.code).toBe("NOT_SUBSCRIBED");
      await b.ctx.tierSync.push(b.clock.now());
      expect((await b.platformOf(platformId)).tier).toBe("free");
    });

    it("cancels at the period's end without immediately, and the renewal ends it", async () => {
      const { userId, platformId } = await linkedCustomer();
      const sub = (await subscribe(userId)).body;
      const r = await b.call("DELETE", `/subscriptions/${sub.id}`, { headers: op });
      expect(r.body).toMatchObject({ status: "active", cancelAtPeriodEnd: true });
      b.clock.advance(32 * DAY);
      await b.ctx.worker.pass();
      expect((await b.call("GET", `/subscriptions/${sub.id}`, { headers: op })).body.status).toBe("canceled");
      expect((await b.call("GET", `/subscription?platformId=${platformId}`, { headers: op })).body.tier).toBe("free");
      // no renewal invoice for a canceled period
      expect((await b.call("GET", `/invoices?platformId=${platformId}`, { headers: op })).body.data).toHaveLength(1);
    });

    it("answers 404 for an unknown subscription", async () => {
      expect((await b.call("GET", "/subscriptions/sub_nope", { headers: op })).status).toBe(404);
      expect((await b.call("PATCH", "/subscriptions/sub_nope", { headers: op, body: {} })).status).toBe(404);
      expect((await b.call("DELETE", "/subscriptions/sub_nope", { headers: op })).status).toBe(404);
    });
  });
});
