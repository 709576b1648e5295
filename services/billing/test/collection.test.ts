import { randomUUID } from "node:crypto";
import { asc, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen } from "@core/kit";
import { testDatabases } from "@core/storage";
import { settle } from "../src/collection.js";
import { charges, invoices, webhookEvents } from "../src/db/schema.js";
import { moveBalance } from "../src/invoicing.js";
import { startBilling, type Billing, type Headers } from "./support/billing.js";

/**
 * The routes of DESIGN §6.9 and the rules they keep: the upcoming invoice is the next charge, tax
 * and usage included; an operator collects an open invoice now; payments reconcile against invoices;
 * a seat change keeps what waits; a key reused after 24 hours is a new request; a stale writer never
 * reopens a paid invoice; another tenant's invoice is not found, naming nothing of its owner; a
 * ten-year jump of the test clock leaves the service answering.
 */
describe.each(testDatabases())("collection's routes ($name)", (database) => {
  let b: Billing;
  let op: Headers;
  beforeAll(async () => {
    b = await startBilling(database, { taxPercent: "8.875", testClock: true });
    op = b.as.operator();
  });
  afterAll(() => b?.close());

  const subscriptionOf = async (platformId: string) => (await b.call("GET", `/subscription?platformId=${platformId}`, { headers: op })).body;
  const invoicesOf = async (platformId: string) => (await b.call("GET", `/invoices?platformId=${platformId}&limit=100`, { headers: op })).body.data as any[];
  const upcomingOf = (platformId: string, headers = op) => b.call("GET", `/invoices/upcoming?platformId=${platformId}`, { headers });

  describe("GET /invoices/upcoming", () => {
    it("is the next period at the waiting tier and seats, this period's overage so far, tax and credit: what the renewal then charges", async () => {
      const { platformId, owner, subscription } = await b.upgraded("plan_growth");
      // seats: 3 × Growth; then a downgrade to starter waits for the period's end, seats kept
      expect((await b.call("PATCH", `/subscriptions/${subscription.id}`, { headers: op, body: { quantity: 3 } })).status).toBe(200);
      expect((await b.call("POST", "/subscription/change-tier", { headers: owner, body: { tier: "starter" } })).body.subscription).toMatchObject({ pendingTier: "starter", quantity: 3 });
      // 1,200,000 api requests on growth: 200,000 beyond at 0.003 cents = $6.00
      const at = Math.floor(b.clock.now().getTime() / 1000);
      expect((await b.call("POST", "/usage/events", { headers: op, body: { events: [{ id: randomUUID(), platformId, meter: "api_requests", quantity: 1_200_000, timestamp: at }] } })).status).toBe(200);
      await b.call("POST", "/operator/credits", { headers: op, body: { customerId: subscription.customerId, amount: "10.00", description: "Goodwill" } });

      const upcoming = await upcomingOf(platformId, owner);
      expect(upcoming.status).toBe(200);
      const base = 3 * 2900;
      const usage = 600;
      const tax = (cents: number) => Math.round((cents * 8.875) / 100);
      expect(upcoming.body).toMatchObject({
        id: null,
        number: null,
        status: "upcoming",
        nextChargeAt: subscription.currentPeriodEnd,
        periodStart: subscription.currentPeriodEnd,
        subtotalCents: base + usage,
        taxCents: tax(base) + tax(usage),
        creditAppliedCents: 1000,
        amountDueCents: base + tax(base) - 1000 + usage + tax(usage),
        lines: [
          expect.objectContaining({ id: null, kind: "subscription", description: "3 × Starter (monthly)", amountCents: base }),
          expect.objectContaining({ id: null, kind: "usage", meter: "api_requests", quantity: "200000", amountCents: usage }),
        ],
      });
      // the renewal and the period's close then charge exactly that
      b.clock.set(new Date((subscription.currentPeriodEnd + 3600 + 60) * 1000));
      await b.ctx.worker.pass();
      const charged = (await invoicesOf(platformId)).filter((i) => i.periodStart >= subscription.currentPeriodStart && i.status === "paid" && i.createdAt >= subscription.currentPeriodEnd);
      expect(charged.reduce((sum, i) => sum + i.amountPaidCents, 0)).toBe(upcoming.body.amountDueCents);
      expect(await subscriptionOf(platformId)).toMatchObject({ tier: "starter", quantity: 3, pendingTier: null });
    });

    it("answers under both prefixes; nothing is coming on free or while a cancellation waits (404 NO_UPCOMING_INVOICE); another tenant's platform is not found", async () => {
      const { platformId, owner } = await b.upgraded("plan_starter");
      expect((await b.call("GET", "/api/billing/invoices/upcoming", { headers: owner })).body).toMatchObject({ status: "upcoming", amountDueCents: 2900 + 257 });
      await b.call("POST", "/subscription/cancel", { headers: owner });
      expect((await upcomingOf(platformId, owner)).body.error).toMatchObject({ code: "NO_UPCOMING_INVOICE" });
      const free = await b.newPlatform();
      expect((await upcomingOf(free)).status).toBe(404);
      const other = await b.upgraded("plan_starter");
      const r = await upcomingOf(other.platformId, owner);
      expect(r.status).toBe(404);
      expect(JSON.stringify(r.body)).not.toContain(other.subscription.customerId);
    });
  });

  describe("POST /operator/invoices/{id}/pay", () => {
    async function pastDue() {
      const up = await b.upgraded("plan_starter");
      const card = await b.call("POST", "/payment-methods/pm_card_chargeCustomerFail/attach", { headers: op, body: { customerId: up.subscription.customerId, setAsDefault: true } });
      b.clock.set(new Date((up.subscription.currentPeriodEnd + 60) * 1000));
      await b.ctx.worker.pass();
      const [open] = await invoicesOf(up.platformId);
      expect(open).toMatchObject({ status: "open", attemptCount: 1 });
      return { ...up, open, failingCard: card.body.id as string };
    }

    it("collects an open invoice with the card given: paid, the subscription active again; its retry answers the same, charging once", async () => {
      const { platformId, open, subscription } = await pastDue();
      const card = await b.call("POST", "/payment-methods/pm_card_mastercard/attach", { headers: op, body: { customerId: subscription.customerId } });
      const headers = { ...op, "idempotency-key": randomUUID() };
      const paid = await b.call("POST", `/operator/invoices/${open.id}/pay`, { headers, body: { paymentMethodId: card.body.id } });
      expect(paid.status).toBe(200);
      expect(paid.body).toMatchObject({ id: open.id, status: "paid", amountPaidCents: open.amountDueCents });
      expect((await subscriptionOf(platformId)).status).toBe("active");
      const again = await b.call("POST", `/operator/invoices/${open.id}/pay`, { headers, body: { paymentMethodId: card.body.id } });
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      expect(await b.db.select().from(charges).where(eq(charges.invoiceId, open.id))).toHaveLength(2);
      expect((await b.db.select().from(charges).where(eq(charges.invoiceId, open.id))).filter((c) => c.status === "succeeded")).toHaveLength(1);
      // a paid invoice is paid: 409, nothing charged
      const twice = await b.call("POST", `/operator/invoices/${open.id}/pay`, { headers: op, body: {} });
      expect(twice).toMatchObject({ status: 409, body: { error: { code: "INVOICE_NOT_OPEN" } } });
    });

    it("a refused card is 402 and counts a dunning attempt; another customer's card, an unknown invoice and a tenant are refused", async () => {
      const { open, failingCard } = await pastDue();
      const refused = await b.call("POST", `/operator/invoices/${open.id}/pay`, { headers: op, body: {} });
      expect(refused).toMatchObject({ status: 402, body: { error: { code: "PAYMENT_DECLINED", details: { code: "card_declined", declineCode: "generic_decline" } } } });
      const [after] = await b.db.select().from(invoices).where(eq(invoices.id, open.id));
      expect(after).toMatchObject({ status: "open", attemptCount: 2 });
      const other = await b.upgraded("plan_starter");
      const theirs = (await b.call("GET", `/customers/${other.subscription.customerId}`, { headers: op })).body.defaultPaymentMethodId;
      expect((await b.call("POST", `/operator/invoices/${open.id}/pay`, { headers: op, body: { paymentMethodId: theirs } })).status).toBe(404);
      expect((await b.call("POST", "/operator/invoices/in_nowhere/pay", { headers: op, body: {} })).status).toBe(404);
      expect((await b.call("POST", `/operator/invoices/${open.id}/pay`, { headers: other.owner, body: {} })).status).toBe(403);
      expect((await b.call("POST", `/operator/invoices/${open.id}/pay`, { headers: op, body: { paymentMethodId: failingCard, extra: 1 } })).status).toBe(400);
    });
  });

  describe("GET /operator/payments/reconcile", () => {
    // the window around the test's clock: what was charged since this billing started
    const wide = () => {
      const now = Math.floor(b.clock.now().getTime() / 1000);
      return `from=${now - 390 * 86_400}&to=${now + 86_400}`;
    };
    const reconcile = (query = wide()) => b.call("GET", `/operator/payments/reconcile?${query}`, { headers: op });

    it("agrees with billing's own charges, and names a charge of an unpaid invoice, a paid invoice without a charge and a second charge", async () => {
      await b.upgraded("plan_starter");
      const clean = await reconcile();
      expect(clean.body).toMatchObject({ consistent: true, unmatchedPayments: [], paidWithoutPayment: [], duplicatePayments: [] });
      expect(clean.body.payments).toBeGreaterThan(0);
      expect(clean.body.paidInvoices).toBe(clean.body.payments);

      // money taken behind billing's back: twice for one paid invoice, once for an invoice that is not paid
      const { invoice, subscription } = await b.upgraded("plan_growth");
      const [card] = await b.engine.provider.list(subscription.customerId);
      const second = await b.engine.provider.charge({ customerId: subscription.customerId, paymentMethodId: card!.id, amountCents: invoice.amountPaidCents, currency: "usd", invoiceId: invoice.id, attempt: 7, idempotencyKey: `${invoice.id}:7` });
      const stray = await b.engine.provider.charge({ customerId: subscription.customerId, paymentMethodId: card!.id, amountCents: 1234, currency: "usd", invoiceId: "in_never", attempt: 0, idempotencyKey: "in_never:0" });
      // and an invoice marked paid that no charge paid
      const { invoice: lonely } = await b.upgraded("plan_scale");
      await b.db.delete(charges).where(eq(charges.invoiceId, lonely.id));
      const found = (await reconcile()).body;
      expect(found.consistent).toBe(false);
      expect(found.duplicatePayments).toEqual([{ invoiceId: invoice.id, providerPaymentIds: expect.arrayContaining([(second as { paymentId: string }).paymentId]) }]);
      expect(found.unmatchedPayments).toEqual(expect.arrayContaining([{ providerPaymentId: (stray as { paymentId: string }).paymentId, invoiceId: "in_never", amountCents: 1234 }]));
      expect(found.paidWithoutPayment).toEqual([{ invoiceId: lonely.id }]);
      // put right, for the tests after this one
      await b.db.delete(charges).where(eq(charges.invoiceId, "in_never"));
      await b.db.delete(charges).where(eq(charges.idempotencyKey, `${invoice.id}:7`));
      await b.db.update(invoices).set({ amountPaidCents: 0 }).where(eq(invoices.id, lonely.id));
      expect((await reconcile()).body.consistent).toBe(true);
    });

    it("counts a payment and its invoice alike when both fall in the window's last second", async () => {
      b.clock.advance(1_500);
      const { invoice } = await b.upgraded("plan_starter");
      const second = Math.floor(b.clock.now().getTime() / 1000);
      const r = (await reconcile(`from=${second}&to=${second}`)).body;
      expect(r).toMatchObject({ consistent: true, payments: 1, paidInvoices: 1 });
      expect(invoice.status).toBe("paid");
    });

    it("refuses a window that ends before it starts, or is longer than 400 days, and tenants", async () => {
      expect((await reconcile("from=200&to=100")).status).toBe(400);
      expect((await reconcile(`from=0&to=${401 * 86_400}`)).status).toBe(400);
      expect((await reconcile("from=abc")).status).toBe(400);
      // the default window is the last 35 days
      expect((await reconcile("")).status).toBe(200);
      const { owner } = await b.upgraded("plan_starter");
      expect((await b.call("GET", "/operator/payments/reconcile", { headers: owner })).status).toBe(403);
    });
  });

  it("a seat change keeps a waiting downgrade and the cancellation (DESIGN §6.9), and the renewal charges the downgraded tier × seats", async () => {
    const { platformId, owner, subscription } = await b.upgraded("plan_scale");
    await b.call("POST", "/subscription/change-tier", { headers: owner, body: { tier: "growth" } });
    const more = await b.call("PATCH", `/subscriptions/${subscription.id}`, { headers: op, body: { quantity: 2 } });
    expect(more.body).toMatchObject({ tier: "scale", quantity: 2, pendingTier: "growth" });
    b.clock.set(new Date((subscription.currentPeriodEnd + 60) * 1000));
    await b.ctx.worker.pass();
    expect(await subscriptionOf(platformId)).toMatchObject({ tier: "growth", quantity: 2, pendingTier: null });
    expect((await invoicesOf(platformId))[0]).toMatchObject({ status: "paid", subtotalCents: 2 * 9900 });
  });

  it("PATCH /subscriptions/{id} is one change: a refused charge leaves the default card, the seats and the cancellation as they were", async () => {
    const { subscription } = await b.upgraded("plan_starter");
    const before = (await b.call("GET", `/customers/${subscription.customerId}`, { headers: op })).body.defaultPaymentMethodId;
    const r = await b.call("PATCH", `/subscriptions/${subscription.id}`, { headers: op, body: { paymentMethodId: "pm_card_chargeCustomerFail", quantity: 4, cancelAtPeriodEnd: true } });
    expect(r.status).toBe(402);
    expect(r.body.error.code).toBe("PAYMENT_DECLINED");
    expect((await b.call("GET", `/customers/${subscription.customerId}`, { headers: op })).body.defaultPaymentMethodId).toBe(before);
    expect((await b.call("GET", `/subscriptions/${subscription.id}`, { headers: op })).body).toMatchObject({ quantity: 1, cancelAtPeriodEnd: false });
    // paid, all of it applies: the card it was paid with is the default
    const ok = await b.call("PATCH", `/subscriptions/${subscription.id}`, { headers: op, body: { paymentMethodId: "pm_card_mastercard", quantity: 4, cancelAtPeriodEnd: true } });
    expect(ok.body).toMatchObject({ quantity: 4, cancelAtPeriodEnd: true });
    const card = (await b.call("GET", `/customers/${subscription.customerId}/payment-methods/default`, { headers: op })).body;
    expect(card.card).toMatchObject({ brand: "mastercard" });
  });

  it("a key reused after 24 hours is a new request: it makes and charges its own invoice, and the first is not charged again", async () => {
    const { subscription } = await b.upgraded("plan_starter");
    const owe = () => b.db.transaction((tx) => moveBalance(tx, b.clock.now(), subscription.customerId, -600, { kind: "restored", description: "Owed", currency: "usd", actorType: "system", actorId: null }));
    const headers = { ...op, "idempotency-key": "settle-up" };
    await owe();
    const first = await b.call("POST", "/operator/invoices/generate", { headers, body: { customerId: subscription.customerId } });
    expect(first.body).toMatchObject({ status: "paid", amountPaidCents: 600 });
    b.clock.advance(23 * 3_600_000);
    expect((await b.call("POST", "/operator/invoices/generate", { headers, body: { customerId: subscription.customerId } })).headers.get("idempotent-replayed")).toBe("true");
    b.clock.advance(2 * 3_600_000);
    await owe();
    const second = await b.call("POST", "/operator/invoices/generate", { headers, body: { customerId: subscription.customerId } });
    expect(second.status).toBe(201);
    expect(second.headers.get("idempotent-replayed")).toBeNull();
    expect(second.body.id).not.toBe(first.body.id);
    expect(await b.db.select().from(charges).where(eq(charges.invoiceId, first.body.id))).toHaveLength(1);
  });

  it("a stale writer never reopens a paid invoice: a late decline or an unknown outcome of its attempt changes nothing", async () => {
    const { invoice } = await b.upgraded("plan_starter");
    for (const outcome of [
      { status: "declined" as const, paymentId: null, code: "card_declined", declineCode: "generic_decline", hard: false },
      { status: "unknown" as const, reason: "late" },
      { status: "succeeded" as const, paymentId: "pi_other" },
    ]) {
      const after = await settle(b.engine, invoice.id, 0, outcome, null);
      expect(after).toMatchObject({ status: "paid", collectionState: null, paymentId: invoice.paymentId ?? expect.any(String) });
    }
    const [row] = await b.db.select().from(invoices).where(eq(invoices.id, invoice.id));
    expect(row).toMatchObject({ status: "paid", amountPaidCents: invoice.amountPaidCents, attemptCount: 0 });
  });

  it("sends invoice.payment_pending when a payment's outcome becomes unknown, and invoice.marked_uncollectible when dunning gives up", async () => {
    const endpoint = await b.call("POST", "/operator/webhook-endpoints", { headers: op, body: { url: "http://127.0.0.1:9/hooks", events: ["invoice.payment_pending", "invoice.marked_uncollectible", "invoice.paid"] } });
    expect(endpoint.status).toBe(201);
    const eventsOf = async (invoiceId: string) =>
      (await b.db.select().from(webhookEvents).orderBy(asc(webhookEvents.createdAt))).filter((e) => (e.data as { id?: string }).id === invoiceId).map((e) => [e.type, (e.data as { status: string }).status]);
    // an answer lost: pending, then paid once the check finds the charge
    const { platformId, subscription } = await b.upgraded("plan_starter");
    await b.call("POST", "/payment-methods/pm_card_core_answerLost/attach", { headers: op, body: { customerId: subscription.customerId, setAsDefault: true } });
    b.clock.set(new Date((subscription.currentPeriodEnd + 60) * 1000));
    await b.ctx.worker.pass();
    const [renewal] = await invoicesOf(platformId);
    expect(renewal.collection).toMatchObject({ state: "pending" });
    expect(await eventsOf(renewal.id)).toEqual([["invoice.payment_pending", "open"]]);
    b.clock.advance(61_000);
    await b.ctx.worker.pass();
    expect(await eventsOf(renewal.id)).toEqual([
      ["invoice.payment_pending", "open"],
      ["invoice.paid", "paid"],
    ]);
    // a card that always fails: after the last retry the invoice is uncollectible, once
    await b.call("POST", "/payment-methods/pm_card_chargeCustomerFail/attach", { headers: op, body: { customerId: subscription.customerId, setAsDefault: true } });
    b.clock.set(new Date(((await subscriptionOf(platformId)).currentPeriodEnd + 60) * 1000));
    await b.ctx.worker.pass();
    for (const days of [1, 3, 5]) {
      b.clock.advance(days * 86_400_000);
      await b.ctx.worker.pass();
    }
    const [refused] = await invoicesOf(platformId);
    expect(refused.status).toBe("uncollectible");
    expect(await eventsOf(refused.id)).toEqual([["invoice.marked_uncollectible", "uncollectible"]]);
    expect((await subscriptionOf(platformId)).tier).toBe("free");
    await b.call("DELETE", `/operator/webhook-endpoints/${endpoint.body.id}`, { headers: op });
  });

  it("while a payment of a subscription is in flight, every other change of it answers 409 PAYMENT_PENDING and changes nothing", async () => {
    const { platformId, owner, subscription } = await b.upgraded("plan_starter");
    // a new default card retries nothing here (nothing is refused); the seat change's charge loses its answer
    const lost = (await b.call("POST", "/payment-methods/pm_card_core_answerLost/attach", { headers: op, body: { customerId: subscription.customerId } })).body;
    const pending = await b.call("PATCH", `/subscriptions/${subscription.id}`, { headers: op, body: { quantity: 2, paymentMethodId: lost.id } });
    expect(pending).toMatchObject({ status: 503, body: { error: { code: "PAYMENT_PENDING", details: { invoiceId: expect.stringMatching(/^in_/) } } } });
    const invoiceId = pending.body.error.details.invoiceId;
    const refusals = [
      await b.call("POST", "/subscription/change-tier", { headers: owner, body: { tier: "growth" } }),
      await b.call("POST", "/subscription/cancel", { headers: owner }),
      await b.call("PATCH", `/subscriptions/${subscription.id}`, { headers: op, body: { cancelAtPeriodEnd: true } }),
      await b.call("POST", `/operator/subscriptions/${subscription.id}/trial`, { headers: op, body: { trialDays: 7 } }),
      await b.call("POST", `/operator/invoices/${invoiceId}/void`, { headers: op }),
      await b.call("POST", `/operator/invoices/${invoiceId}/pay`, { headers: op, body: {} }),
    ];
    for (const r of refusals) expect(r, JSON.stringify(r.body)).toMatchObject({ status: 409, body: { error: { code: "PAYMENT_PENDING", details: { invoiceId } } } });
    expect(await subscriptionOf(platformId)).toMatchObject({ tier: "starter", quantity: 1, cancelAtPeriodEnd: false, status: "active" });
    // settled, the seats apply, and changes are taken again
    b.clock.advance(61_000);
    await b.ctx.worker.pass();
    expect(await subscriptionOf(platformId)).toMatchObject({ quantity: 2 });
    expect((await b.call("POST", "/subscription/cancel", { headers: owner })).status).toBe(200);
  });

  it("another tenant's invoice is not found, and the answer names nothing of its owner", async () => {
    const mine = await b.upgraded("plan_starter");
    const theirs = await b.upgraded("plan_starter");
    for (const path of [`/invoices/${theirs.invoice.id}`, `/api/billing/invoices/${theirs.invoice.id}`, `/invoices/${theirs.invoice.id}/html`, `/invoices/${theirs.invoice.id}?platformId=${mine.platformId}`]) {
      const r = await b.call("GET", path, { headers: mine.owner });
      expect(r.status, path).toBe(404);
      expect(JSON.stringify(r.body), path).not.toContain(theirs.platformId);
      expect(JSON.stringify(r.body), path).not.toContain(theirs.subscription.customerId);
    }
  });

});

// the embedded database only: it is the one a busy worker could hold (one connection, in this process)
describe.each(testDatabases().slice(0, 1))("a ten-year jump of the test clock ($name)", (database) => {
  let b: Billing;
  let op: Headers;
  beforeAll(async () => {
    b = await startBilling(database, { testClock: true });
    op = b.as.operator();
  });
  afterAll(() => b?.close());

  it("keeps answering while a test-clock jump of ten years runs every renewal in it", async () => {
    await b.upgraded("plan_starter");
    const server = await listen(b.app, 0, "127.0.0.1");
    try {
      let done = false;
      const advance = fetch(`${server.url}/operator/test-clock/advance`, { method: "POST", headers: { ...op, "content-type": "application/json" }, body: JSON.stringify({ seconds: 10 * 366 * 86_400 }) }).then(async (r) => {
        done = true;
        return r.status;
      });
      // a client asking meanwhile: answered every time, and answered before the jump is over
      const answers: { status: number; during: boolean }[] = [];
      while (!done) {
        const r = await fetch(`${server.url}/operator/test-clock`, { headers: op });
        await r.text();
        answers.push({ status: r.status, during: !done });
      }
      expect(await advance).toBe(200);
      expect(answers.every((a) => a.status === 200)).toBe(true);
      expect(answers.filter((a) => a.during).length).toBeGreaterThan(1);
    } finally {
      await server.close();
    }
  }, 120_000);
});
