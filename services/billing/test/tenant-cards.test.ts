import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "@core/storage";
import { startBilling, type Billing, type Headers } from "./support/billing.js";

/**
 * The tenant's own card and resume routes (table A's additions for `core billing cards` and
 * `core billing resume`): `POST /payment-methods`, `DELETE /payment-methods/{id}`,
 * `POST /payment-methods/{id}/default` and `POST /subscription/resume`, under both prefixes, with
 * `billing:manage`; another customer's card is as unknown as a made-up id.
 */
describe.each(testDatabases())("the tenant's card and resume routes on $name", (database) => {
  let b: Billing;
  beforeAll(async () => {
    b = await startBilling(database);
  });
  afterAll(() => b?.close());

  const cards = async (owner: Headers) => (await b.call("GET", "/payment-methods", { headers: owner })).body.data as { id: string; isDefault: boolean; customerId: string | null }[];
  const attach = (owner: Headers, body: unknown, headers: Headers = {}, path = "/payment-methods") => b.call("POST", path, { headers: { ...owner, ...headers }, body });

  describe("POST /payment-methods", () => {
    it("attaches a test card to a platform without a customer yet: the customer is made, and the first card becomes the default", async () => {
      const platformId = await b.newPlatform();
      const owner = b.as.owner(platformId);
      const r = await attach(owner, { paymentMethodId: "pm_card_mastercard" }, {}, "/api/billing/payment-methods");
      expect(r.status).toBe(201);
      expect(r.body).toMatchObject({ id: expect.stringMatching(/^pm_/), type: "card", customerId: expect.stringMatching(/^cus_/), card: { brand: "mastercard", last4: "4444" }, isDefault: true });
      const second = await attach(owner, { paymentMethodId: "pm_card_visa" });
      expect(second.status).toBe(201);
      expect(second.body).toMatchObject({ customerId: r.body.customerId, isDefault: false, card: { brand: "visa", last4: "4242" } });
      const listed = await cards(owner);
      expect(listed.map((c) => [c.id, c.isDefault]).sort()).toEqual([[r.body.id, true], [second.body.id, false]].sort());
    });

    it("setAsDefault makes the new card the default", async () => {
      const { owner, subscription } = await b.upgraded("plan_starter");
      const r = await attach(owner, { paymentMethodId: "pm_card_amex", setAsDefault: true });
      expect(r.status).toBe(201);
      expect(r.body.isDefault).toBe(true);
      const customer = await b.call("GET", `/customers/${subscription.customerId}`, { headers: b.as.operator() });
      expect(customer.body.defaultPaymentMethodId).toBe(r.body.id);
      expect((await cards(owner)).filter((c) => c.isDefault).map((c) => c.id)).toEqual([r.body.id]);
    });

    it("a declining test card is refused with 402 naming the decline; a token that is no card, or another customer's card, is 400; the body is strict", async () => {
      const { owner } = await b.upgraded("plan_starter");
      const before = await cards(owner);
      const declined = await attach(owner, { paymentMethodId: "pm_card_visa_chargeDeclinedInsufficientFunds" });
      expect(declined.status).toBe(402);
      expect(declined.body.error).toMatchObject({ code: "PAYMENT_DECLINED", details: { code: "card_declined", declineCode: "insufficient_funds" } });
      const theirs = await b.upgraded("plan_starter");
      const theirCard = (await cards(theirs.owner))[0]!.id;
      for (const paymentMethodId of ["tok_nonsense", theirCard]) {
        const r = await attach(owner, { paymentMethodId });
        expect(r.status, paymentMethodId).toBe(400);
        expect(JSON.stringify(r.body)).not.toContain(theirs.subscription.customerId);
      }
      for (const body of [{}, { paymentMethodId: "" }, { paymentMethodId: "x".repeat(256) }, { paymentMethodId: "pm_card_visa", extra: 1 }, { paymentMethodId: "pm_card_visa", setAsDefault: "yes" }]) {
        expect((await attach(owner, body)).status, JSON.stringify(body)).toBe(400);
      }
      // 255 characters is inside the limit: a well-formed but unknown id, refused by the provider
      expect((await attach(owner, { paymentMethodId: `pm_${"x".repeat(252)}` })).body.error.code).not.toBe("VALIDATION_ERROR");
      expect(await cards(owner)).toEqual(before);
    });

    it("a retry with the same Idempotency-Key attaches once, also when both arrive at once; another body with that key is 422", async () => {
      const { owner } = await b.upgraded("plan_starter");
      const key = crypto.randomUUID();
      const [first, second] = await Promise.all([attach(owner, { paymentMethodId: "pm_card_visa_debit" }, { "idempotency-key": key }), attach(owner, { paymentMethodId: "pm_card_visa_debit" }, { "idempotency-key": key })]);
      const answers = [first, second].filter((r) => r.status === 201);
      // both arrive at once: one runs, the other is told the key is in use; never two cards
      expect(answers.length).toBeGreaterThanOrEqual(1);
      for (const r of [first, second]) if (r.status !== 201) expect(r.body.error.code).toBe("IDEMPOTENCY_KEY_IN_USE");
      const replay = await attach(owner, { paymentMethodId: "pm_card_visa_debit" }, { "idempotency-key": key });
      expect(replay.status).toBe(201);
      expect(replay.headers.get("idempotent-replayed")).toBe("true");
      expect(replay.body.id).toBe(answers[0]!.body.id);
      expect((await cards(owner)).filter((c) => c.id !== answers[0]!.body.id)).toHaveLength(1);
      expect((await attach(owner, { paymentMethodId: "pm_card_amex" }, { "idempotency-key": key })).status).toBe(422);
    });

    it("needs billing:manage: a billing:read member is refused; another tenant's platform is 404; no credential is 401", async () => {
      const { platformId, owner } = await b.upgraded("plan_starter");
      const before = await cards(owner);
      expect((await attach(b.as.member(platformId), { paymentMethodId: "pm_card_visa" })).status).toBe(403);
      const other = await b.newPlatform();
      expect((await attach(owner, { paymentMethodId: "pm_card_visa" }, {}, `/payment-methods?platformId=${other}`)).status).toBe(404);
      expect((await b.call("POST", "/payment-methods", { body: { paymentMethodId: "pm_card_visa" } })).status).toBe(401);
      expect(await cards(owner)).toEqual(before);
      // an operator names the platform; it cannot make a customer of its own email
      const op = b.as.operator();
      expect((await attach(op, { paymentMethodId: "pm_card_visa" }, {}, `/payment-methods?platformId=${platformId}`)).status).toBe(201);
      expect((await attach(op, { paymentMethodId: "pm_card_visa" }, {}, `/payment-methods?platformId=${other}`)).body.error.code).toBe("NO_CUSTOMER");
    });
  });

  describe("POST /payment-methods/{id}/default", () => {
    it("makes an attached card the default (both prefixes); unknown, detached and another customer's cards are 404 naming nothing of theirs", async () => {
      const { owner, subscription } = await b.upgraded("plan_starter");
      const added = (await attach(owner, { paymentMethodId: "pm_card_mastercard" })).body;
      const r = await b.call("POST", `/payment-methods/${added.id}/default`, { headers: owner });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ id: added.id, isDefault: true, customerId: subscription.customerId });
      expect((await b.call("POST", `/api/billing/payment-methods/${added.id}/default`, { headers: owner })).body.isDefault).toBe(true);

      const theirs = await b.upgraded("plan_starter");
      const theirCard = (await cards(theirs.owner))[0]!.id;
      const refused = await b.call("POST", `/payment-methods/${theirCard}/default`, { headers: owner });
      expect(refused.status).toBe(404);
      expect(refused.body.error.message).toBe("No such payment method");
      expect(JSON.stringify(refused.body)).not.toContain(theirs.subscription.customerId);
      expect(JSON.stringify(refused.body)).not.toContain(theirs.platformId);
      expect((await cards(theirs.owner))[0]).toMatchObject({ id: theirCard, isDefault: true });
      expect((await b.call("POST", "/payment-methods/pm_nothing/default", { headers: owner })).status).toBe(404);
      // a free platform without a customer: 404 as well
      expect((await b.call("POST", `/payment-methods/${added.id}/default`, { headers: b.as.owner(await b.newPlatform()) })).status).toBe(404);
      expect((await b.call("POST", `/payment-methods/${added.id}/default`, { headers: b.as.member(subscription.platformId) })).status).toBe(403);
    });

    it("retries a refused renewal with the new default at once: the invoice is paid and the subscription active again", async () => {
      const { owner, platformId } = await b.upgraded("plan_starter");
      const good = (await cards(owner))[0]!.id;
      // the failing card becomes the default, and the renewal is refused with it
      const failing = await attach(owner, { paymentMethodId: "pm_card_chargeCustomerFail", setAsDefault: true });
      expect(failing.body.isDefault).toBe(true);
      b.clock.advance(32 * 86_400_000);
      await b.ctx.worker.pass();
      const pastDue = await b.call("GET", `/subscription?platformId=${platformId}`, { headers: owner });
      expect(pastDue.body.status).toBe("past_due");
      const r = await b.call("POST", `/payment-methods/${good}/default`, { headers: { ...owner, "idempotency-key": crypto.randomUUID() } });
      expect(r.status).toBe(200);
      expect((await b.call("GET", `/subscription?platformId=${platformId}`, { headers: owner })).body.status).toBe("active");
      const invoices = (await b.call("GET", `/invoices?platformId=${platformId}`, { headers: owner })).body.data;
      expect(invoices[0]).toMatchObject({ status: "paid", amountPaidCents: 2900 });
    });
  });

  describe("DELETE /payment-methods/{id}", () => {
    it("detaches a card; removing the default leaves none, also with a paid plan (Stripe's rule), and the plan stays", async () => {
      const { owner, platformId, subscription } = await b.upgraded("plan_starter");
      const [visa] = await cards(owner);
      const other = (await attach(owner, { paymentMethodId: "pm_card_mastercard" })).body;
      const r = await b.call("DELETE", `/payment-methods/${other.id}`, { headers: owner });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ id: other.id, customerId: null, isDefault: false });
      const removed = await b.call("DELETE", `/api/billing/payment-methods/${visa!.id}`, { headers: owner });
      expect(removed.status).toBe(200);
      expect(removed.body).toMatchObject({ id: visa!.id, customerId: null, isDefault: false });
      expect(await cards(owner)).toEqual([]);
      expect((await b.call("GET", `/customers/${subscription.customerId}`, { headers: b.as.operator() })).body.defaultPaymentMethodId).toBeNull();
      expect((await b.call("GET", `/subscription?platformId=${platformId}`, { headers: owner })).body).toMatchObject({ tier: "starter", status: "active" });
      // removed already: 404
      expect((await b.call("DELETE", `/payment-methods/${visa!.id}`, { headers: owner })).status).toBe(404);
    });

    it("another customer's card is 404 and stays attached; a billing:read member is refused", async () => {
      const { owner, platformId } = await b.upgraded("plan_starter");
      const theirs = await b.upgraded("plan_starter");
      const theirCard = (await cards(theirs.owner))[0]!.id;
      const r = await b.call("DELETE", `/payment-methods/${theirCard}`, { headers: owner });
      expect(r.status).toBe(404);
      expect(r.body.error.message).toBe("No such payment method");
      expect(JSON.stringify(r.body)).not.toContain(theirs.subscription.customerId);
      expect((await cards(theirs.owner)).map((c) => c.id)).toEqual([theirCard]);
      const mine = (await cards(owner))[0]!.id;
      expect((await b.call("DELETE", `/payment-methods/${mine}`, { headers: b.as.member(platformId) })).status).toBe(403);
      expect((await cards(owner)).map((c) => c.id)).toEqual([mine]);
    });
  });

  describe("POST /subscription/resume", () => {
    it("calls off a cancellation (both prefixes, twice the same), and the plan renews at the period's end", async () => {
      const { owner, platformId, subscription } = await b.upgraded("plan_starter");
      expect((await b.call("POST", "/subscription/cancel", { headers: owner })).body.cancelAtPeriodEnd).toBe(true);
      expect((await b.call("POST", "/subscription/resume", { headers: b.as.member(platformId) })).status).toBe(403);
      const r = await b.call("POST", "/subscription/resume", { headers: owner });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ id: subscription.id, tier: "starter", status: "active", cancelAtPeriodEnd: false });
      expect((await b.call("POST", "/api/billing/subscription/resume", { headers: owner })).body).toEqual(r.body);
      b.clock.advance(32 * 86_400_000);
      await b.ctx.worker.pass();
      expect((await b.call("GET", `/subscription?platformId=${platformId}`, { headers: owner })).body).toMatchObject({ id: subscription.id, tier: "starter", status: "active" });
    });

    it("a free platform has nothing to resume (409 NOT_SUBSCRIBED); another tenant's platform is 404; an operator names it", async () => {
      const platformId = await b.newPlatform();
      const r = await b.call("POST", "/subscription/resume", { headers: b.as.owner(platformId) });
      expect(r.status).toBe(409);
      expect(r.body.error).toMatchObject({ code: "NOT_SUBSCRIBED", message: expect.stringContaining("no paid subscription to resume") });
      const { platformId: paid } = await b.upgraded("plan_starter");
      expect((await b.call("POST", `/subscription/resume?platformId=${paid}`, { headers: b.as.owner(platformId) })).status).toBe(404);
      expect((await b.call("POST", `/subscription/resume?platformId=${paid}`, { headers: b.as.operator() })).body.cancelAtPeriodEnd).toBe(false);
      expect((await b.call("POST", "/subscription/resume")).status).toBe(401);
    });
  });
});
