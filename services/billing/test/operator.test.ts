import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { and, count, eq, inArray } from "drizzle-orm";
import { ServiceTokenClient } from "@core/service-auth";
import { testDatabases } from "@core/storage";
import { PlatformDirectory } from "../src/access.js";
import { balanceLedger, operatorAudit, subscriptions } from "../src/db/schema.js";
import { moveBalance } from "../src/invoicing.js";
import { startBilling, unique, type Billing } from "./support/billing.js";

const DAY = 86_400_000;
const secondsOf = (d: Date) => Math.floor(d.getTime() / 1000);

/** The money and record routes every describe below needs, on one running billing. */
function operatorKit(get: () => Billing) {
  const op = () => get().as.operator();
  const kit = {
    balanceOf: async (customerId: string): Promise<number> => (await get().call("GET", `/customers/${customerId}`, { headers: op() })).body.balanceCents,
    invoicesOf: async (platformId: string): Promise<any[]> => (await get().call("GET", `/invoices?platformId=${platformId}&limit=100`, { headers: op() })).body.data,
    subscriptionOf: async (platformId: string) => (await get().call("GET", `/subscription?platformId=${platformId}`, { headers: op() })).body,
    credit: (customerId: string, amount: unknown, extra: Record<string, unknown> = {}, headers: Record<string, string> = op()) =>
      get().call("POST", "/operator/credits", { headers, body: { customerId, amount, description: "Goodwill credit", ...extra } }),
    /** A customer with no platform: enough to hold a balance. */
    bareCustomer: async (): Promise<string> => (await get().call("POST", "/customers", { headers: op(), body: { email: `${unique("c")}@example.com` } })).body.id,
    /** Moves the clock a minute past the platform's period end and runs the renewal worker once. */
    pastPeriodEnd: async (platformId: string) => {
      const b = get();
      const sub = await kit.subscriptionOf(platformId);
      b.clock.advance(Math.max(sub.currentPeriodEnd * 1000 - b.clock.now().getTime(), 0) + 60_000);
      await b.ctx.worker.pass();
    },
    /** A customer of a new platform subscribed to `priceId` × quantity through table B (POST /customers, POST /subscriptions). */
    subscribedSeats: async (priceId: string, quantity: number) => {
      const b = get();
      const platformId = await b.newPlatform();
      const userId = unique("user");
      const customer = await b.call("POST", "/customers", { headers: op(), body: { email: `${userId}@example.com`, metadata: { platformId, userId } } });
      const sub = await b.call("POST", "/subscriptions", { headers: op(), body: { userId, priceId, paymentMethodId: "pm_card_visa", quantity } });
      if (sub.status !== 201) throw new Error(`subscription refused: ${sub.status} ${JSON.stringify(sub.body)}`);
      return { platformId, customerId: customer.body.id as string, subscription: sub.body };
    },
    ledgerOf: (customerId: string) => get().db.select().from(balanceLedger).where(eq(balanceLedger.customerId, customerId)),
  };
  return kit;
}

describe.each(testDatabases())("operator routes on $name", (database) => {
  let b: Billing;
  let op: Record<string, string>;
  beforeAll(async () => {
    b = await startBilling(database);
    op = b.as.operator();
  });
  afterAll(() => b?.close());
  const { balanceOf, invoicesOf, subscriptionOf, credit, bareCustomer, pastPeriodEnd, ledgerOf } = operatorKit(() => b);

  /** A starter customer whose renewal came to 20 cents: paid, nothing charged, 20 cents owed (DESIGN §6.3 minimum charge). */
  async function carriedDebit(card = "pm_card_visa") {
    const up = await b.upgraded("plan_starter", card);
    const customerId: string = up.subscription.customerId;
    expect((await credit(customerId, "28.80")).status).toBe(201);
    await pastPeriodEnd(up.platformId);
    return { ...up, customerId };
  }

  describe("POST /operator/credits", () => {
    it("credits 12.5 as 1250 cents and raises the balance by it, in the immutable ledger", async () => {
      const customerId = await bareCustomer();
      const r = await credit(customerId, 12.5);
      expect(r.status).toBe(201);
      expect(r.body).toEqual({ customerId, amountCents: 1250, currency: "usd", description: "Goodwill credit", balanceCents: 1250 });
      expect(await balanceOf(customerId)).toBe(1250);
      const ledger = await ledgerOf(customerId);
      expect(ledger.map((l) => [l.kind, l.amountCents, l.balanceAfterCents, l.currency])).toEqual([["credit", 1250, 1250, "usd"]]);
    });

    it('parses 4.35 as a decimal: the string "4.35" and the number 4.35 are both 435 cents, never 434', async () => {
      const customerId = await bareCustomer();
      expect((await credit(customerId, "4.35")).body.amountCents).toBe(435);
      expect((await credit(customerId, 4.35)).body.amountCents).toBe(435);
      expect((await credit(customerId, 0.29)).body.amountCents).toBe(29);
      expect((await credit(customerId, "12.50")).body.amountCents).toBe(1250);
      expect(await balanceOf(customerId)).toBe(435 + 435 + 29 + 1250);
    });

    it("takes the largest amount that is a safe integer of cents, and refuses one cent more", async () => {
      const customerId = await bareCustomer();
      const largest = await credit(customerId, "90071992547409.91");
      expect(largest.status).toBe(201);
      expect(largest.body.amountCents).toBe(Number.MAX_SAFE_INTEGER);
      const other = await bareCustomer();
      expect((await credit(other, "90071992547409.92")).status).toBe(400);
      expect(await balanceOf(other)).toBe(0);
    });

    it.each([
      ["0.001 USD (three decimals)", 0.001],
      ['"0.001"', "0.001"],
      ['"4.355"', "4.355"],
      ["0", 0],
      ['"0"', "0"],
      ["-1", -1],
      ['"-1"', "-1"],
      ["a huge number (1e300)", 1e300],
      ["a number in exponent form as a string", "1e3"],
      ["text", "ten"],
      ["an empty string", ""],
      ["a string of 41 digits", "1".repeat(41)],
      ["null", null],
    ])("refuses the amount %s with 400 and moves nothing", async (_, amount) => {
      const customerId = await bareCustomer();
      const r = await credit(customerId, amount);
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("VALIDATION_ERROR");
      expect(await balanceOf(customerId)).toBe(0);
      expect(await ledgerOf(customerId)).toEqual([]);
    });

    it('takes the customer\'s currency in either case ("USD", "usd")', async () => {
      const customerId = await bareCustomer();
      for (const currency of ["USD", "usd"]) {
        const r = await credit(customerId, 1, { currency });
        expect(r.status, currency).toBe(201);
        expect(r.body.currency).toBe("usd");
      }
      expect(await balanceOf(customerId)).toBe(200);
    });

    it("refuses another currency than the customer's with 409 CURRENCY_MISMATCH and an unknown one with 400", async () => {
      const customerId = await bareCustomer();
      const jpy = await credit(customerId, 500, { currency: "jpy" });
      expect(jpy.status).toBe(409);
      expect(jpy.body.error).toMatchObject({ code: "CURRENCY_MISMATCH", details: null });
      expect((await credit(customerId, 5, { currency: "xyz" })).status).toBe(400);
      expect((await credit(customerId, 5, { currency: "us" })).status).toBe(400);
      expect(await balanceOf(customerId)).toBe(0);
    });

    it("answers 404 for an unknown customer", async () => {
      const r = await credit("cus_nope", 5);
      expect(r.status).toBe(404);
      expect(r.body.error.code).toBe("NOT_FOUND");
    });

    it("takes a description of 500 characters and refuses 501, an empty one and unknown fields", async () => {
      const customerId = await bareCustomer();
      expect((await credit(customerId, 1, { description: "d".repeat(500) })).status).toBe(201);
      expect((await credit(customerId, 1, { description: "d".repeat(501) })).status).toBe(400);
      expect((await credit(customerId, 1, { description: "" })).status).toBe(400);
      expect((await credit(customerId, 1, { note: "x" })).status).toBe(400);
      expect(await balanceOf(customerId)).toBe(100);
    });

    it("is for operators and services: a tenant owner gets 403, nobody 401", async () => {
      const up = await b.upgraded("plan_starter");
      const customerId = up.subscription.customerId;
      expect((await credit(customerId, 5, {}, up.owner)).status).toBe(403);
      expect((await credit(customerId, 5, {}, b.as.member(up.platformId))).status).toBe(403);
      expect((await credit(customerId, 5, {}, {})).status).toBe(401);
      expect((await credit(customerId, 5, {}, await b.as.service())).status).toBe(201);
      expect(await balanceOf(customerId)).toBe(500);
    });

    it("replays a repeated Idempotency-Key with Idempotent-Replayed: true and moves the balance once", async () => {
      const customerId = await bareCustomer();
      const key = { ...op, "idempotency-key": crypto.randomUUID() };
      const first = await credit(customerId, "7.25", {}, key);
      expect(first.status).toBe(201);
      expect(first.headers.get("idempotent-replayed")).toBeNull();
      const again = await credit(customerId, "7.25", {}, key);
      expect(again.status).toBe(201);
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      expect(again.body).toEqual(first.body);
      expect(await balanceOf(customerId)).toBe(725);
      const other = await credit(customerId, "7.26", {}, key);
      expect(other.status).toBe(422);
      expect(other.body.error.code).toBe("IDEMPOTENCY_KEY_REUSED");
      expect(await balanceOf(customerId)).toBe(725);
    });

    it("moves the balance once for five concurrent requests with one key", async () => {
      const customerId = await bareCustomer();
      const key = { ...op, "idempotency-key": crypto.randomUUID() };
      const answers = await Promise.all(Array.from({ length: 5 }, () => credit(customerId, 3, {}, key)));
      const ran = answers.filter((a) => a.status === 201 && a.headers.get("idempotent-replayed") === null);
      expect(ran).toHaveLength(1);
      // the others replay the first, or are told it is still running
      for (const a of answers.filter((a) => a !== ran[0])) {
        const outcome = a.status === 201 && a.headers.get("idempotent-replayed") === "true" ? "replayed" : a.body.error?.code;
        expect(["replayed", "IDEMPOTENCY_KEY_IN_USE"]).toContain(outcome);
      }
      expect(await balanceOf(customerId)).toBe(300);
      expect(await ledgerOf(customerId)).toHaveLength(1);
      const replay = await credit(customerId, 3, {}, key);
      expect(replay.headers.get("idempotent-replayed")).toBe("true");
      expect(replay.body.balanceCents).toBe(300);
    });
  });

  describe("credit on the next invoices (DESIGN §6.3 Balance)", () => {
    it("applies a credit to the renewal before charging: 10.00 off starter charges 19.00 and uses the balance up", async () => {
      const up = await b.upgraded("plan_starter");
      const customerId = up.subscription.customerId;
      await credit(customerId, "10.00");
      await pastPeriodEnd(up.platformId);
      const renewal = (await invoicesOf(up.platformId))[0];
      expect(renewal).toMatchObject({ status: "paid", subtotalCents: 2900, totalCents: 2900, creditAppliedCents: 1000, amountDueCents: 1900, amountPaidCents: 1900 });
      expect(await balanceOf(customerId)).toBe(0);
      expect((await ledgerOf(customerId)).map((l) => [l.kind, l.amountCents, l.invoiceId])).toContainEqual(["applied", -1000, renewal.id]);
    });

    it("keeps the rest of a credit larger than the invoice on the balance, and charges nothing", async () => {
      const up = await b.upgraded("plan_starter");
      const customerId = up.subscription.customerId;
      await credit(customerId, 50);
      await pastPeriodEnd(up.platformId);
      const renewal = (await invoicesOf(up.platformId))[0];
      expect(renewal).toMatchObject({ status: "paid", totalCents: 2900, creditAppliedCents: 2900, amountDueCents: 0, amountPaidCents: 0 });
      expect(await balanceOf(customerId)).toBe(5000 - 2900);
    });
  });

  describe("minimum charge (DESIGN §6.3)", () => {
    it("does not charge a due amount of 20 cents: the invoice is paid, the 20 cents are owed on the balance", async () => {
      const { platformId, customerId } = await carriedDebit();
      const renewal = (await invoicesOf(platformId))[0];
      expect(renewal).toMatchObject({ status: "paid", totalCents: 2900, creditAppliedCents: 2880, amountDueCents: 20, amountPaidCents: 0 });
      expect(await balanceOf(customerId)).toBe(-20);
      const charges = (await b.db.execute(`select count(*)::int as n from billing.charges where invoice_id = '${renewal.id}'`)) as any;
      expect(Number((charges.rows ?? charges)[0].n)).toBe(0);
    });

    it("collects the carried 20 cents with the next invoice, as a line of kind carried", async () => {
      const { platformId, customerId } = await carriedDebit();
      await pastPeriodEnd(platformId);
      const next = (await invoicesOf(platformId))[0];
      expect(next.lines.map((l: { kind: string; amountCents: number }) => [l.kind, l.amountCents])).toEqual([
        ["subscription", 2900],
        ["carried", 20],
      ]);
      expect(next).toMatchObject({ status: "paid", subtotalCents: 2920, taxCents: 0, totalCents: 2920, amountPaidCents: 2920 });
      expect(await balanceOf(customerId)).toBe(0);
    });
  });

  describe("POST /operator/invoices/generate", () => {
    it("answers 409 NOTHING_TO_INVOICE when nothing is pending, 404 for an unknown customer", async () => {
      const customerId = await bareCustomer();
      const none = await b.call("POST", "/operator/invoices/generate", { headers: op, body: { customerId } });
      expect(none.status).toBe(409);
      expect(none.body.error.code).toBe("NOTHING_TO_INVOICE");
      // a credit is nothing to invoice either
      await credit(customerId, 5);
      expect((await b.call("POST", "/operator/invoices/generate", { headers: op, body: { customerId } })).status).toBe(409);
      expect((await b.call("POST", "/operator/invoices/generate", { headers: op, body: { customerId: "cus_nope" } })).status).toBe(404);
      expect((await b.call("POST", "/operator/invoices/generate", { headers: op, body: { customerId, extra: 1 } })).status).toBe(400);
    });

    it("refuses a carried debit under the minimum charge with 409: it is collected with the next invoice, not invoiced again and again", async () => {
      const { platformId, customerId } = await carriedDebit();
      const before = await invoicesOf(platformId);
      const r = await b.call("POST", "/operator/invoices/generate", { headers: op, body: { customerId, description: "Settlement" } });
      expect(r.status).toBe(409);
      expect(r.body.error).toMatchObject({ code: "NOTHING_TO_INVOICE", message: expect.stringContaining("20 cents") });
      expect(await invoicesOf(platformId)).toHaveLength(before.length);
      expect(await balanceOf(customerId)).toBe(-20);
    });

    /** A starter customer owing 5.00 (a debit over the minimum, as voiding a collection can leave one). */
    async function owing() {
      const up = await b.upgraded("plan_starter");
      const customerId: string = up.subscription.customerId;
      const now = await b.engine.time.now();
      await b.db.transaction((tx) => moveBalance(tx, now, customerId, -500, { kind: "restored", description: "Owed again", currency: "usd", actorType: "system", actorId: null }));
      return { ...up, customerId };
    }

    it("finalizes an owed balance with the next number and the description, charges it and clears the balance", async () => {
      const { platformId, customerId } = await owing();
      const r = await b.call("POST", "/operator/invoices/generate", { headers: op, body: { customerId, description: "Settlement" } });
      expect(r.status).toBe(201);
      expect(r.body).toMatchObject({ customerId, platformId, status: "paid", subtotalCents: 500, totalCents: 500, amountDueCents: 500, amountPaidCents: 500, number: expect.stringMatching(/-0002$/) });
      expect(r.body.lines).toEqual([expect.objectContaining({ kind: "carried", amountCents: 500, description: expect.stringMatching(/^Settlement/) })]);
      expect(await balanceOf(customerId)).toBe(0);
    });

    it("replays a repeated Idempotency-Key: one invoice, one charge, the same answer", async () => {
      const { platformId, customerId } = await owing();
      const key = { ...op, "idempotency-key": crypto.randomUUID() };
      const first = await b.call("POST", "/operator/invoices/generate", { headers: key, body: { customerId } });
      const again = await b.call("POST", "/operator/invoices/generate", { headers: key, body: { customerId } });
      expect(again.status).toBe(201);
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      expect(again.body).toEqual(first.body);
      expect(await invoicesOf(platformId)).toHaveLength(2);
    });

    it("is for operators: a tenant owner gets 403", async () => {
      const up = await b.upgraded("plan_starter");
      const r = await b.call("POST", "/operator/invoices/generate", { headers: up.owner, body: { customerId: up.subscription.customerId } });
      expect(r.status).toBe(403);
    });
  });

  describe("POST /operator/invoices/{id}/void", () => {
    /** A starter customer whose renewal was refused (pm_card_chargeCustomerFail): past_due, its invoice open. */
    async function refusedRenewal(setup: (customerId: string) => Promise<unknown> = async () => {}) {
      const up = await b.upgraded("plan_starter");
      const customerId: string = up.subscription.customerId;
      await setup(customerId);
      const card = await b.call("POST", "/payment-methods/pm_card_chargeCustomerFail/attach", { headers: op, body: { customerId, setAsDefault: true } });
      expect(card.status).toBe(200);
      await pastPeriodEnd(up.platformId);
      expect((await subscriptionOf(up.platformId)).status).toBe("past_due");
      return { ...up, customerId, renewal: (await invoicesOf(up.platformId))[0] };
    }

    it("refuses to void a paid invoice with 409", async () => {
      const up = await b.upgraded("plan_starter");
      const r = await b.call("POST", `/operator/invoices/${up.invoice.id}/void`, { headers: op });
      expect(r.status).toBe(409);
      expect(r.body.error.code).toBe("INVOICE_NOT_OPEN");
      expect((await invoicesOf(up.platformId))[0].status).toBe("paid");
    });

    it("voids an open invoice and gives back the credit it applied; a second void is 409", async () => {
      const { customerId, renewal, platformId } = await refusedRenewal((id) => credit(id, 5));
      expect(renewal).toMatchObject({ status: "open", creditAppliedCents: 500, amountDueCents: 2400, amountPaidCents: 0 });
      expect(await balanceOf(customerId)).toBe(0);
      const r = await b.call("POST", `/operator/invoices/${renewal.id}/void`, { headers: op });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ id: renewal.id, status: "void", number: renewal.number, amountPaidCents: 0 });
      expect(await balanceOf(customerId)).toBe(500);
      expect((await invoicesOf(platformId))[0].status).toBe("void");
      const twice = await b.call("POST", `/operator/invoices/${renewal.id}/void`, { headers: op });
      expect(twice.status).toBe(409);
      expect(await balanceOf(customerId)).toBe(500);
    });

    it("owes the carried debit again when the invoice that collected it is voided", async () => {
      const { platformId, customerId } = await carriedDebit();
      await b.call("POST", "/payment-methods/pm_card_chargeCustomerFail/attach", { headers: op, body: { customerId, setAsDefault: true } });
      await pastPeriodEnd(platformId);
      const open = (await invoicesOf(platformId))[0];
      expect(open).toMatchObject({ status: "open", subtotalCents: 2920 });
      expect(await balanceOf(customerId)).toBe(0);
      expect((await b.call("POST", `/operator/invoices/${open.id}/void`, { headers: op })).status).toBe(200);
      expect(await balanceOf(customerId)).toBe(-20);
    });

    it("answers 404 for an unknown invoice and 403 to a tenant", async () => {
      expect((await b.call("POST", "/operator/invoices/in_nope/void", { headers: op })).status).toBe(404);
      const up = await b.upgraded("plan_starter");
      expect((await b.call("POST", `/operator/invoices/${up.invoice.id}/void`, { headers: up.owner })).status).toBe(403);
    });
  });

  describe("PATCH /operator/subscriptions/{id}/override", () => {
    const override = (id: string, body: unknown, headers = op) => b.call("PATCH", `/operator/subscriptions/${id}/override`, { headers, body });

    it("sets growth on a free platform's subscription without an invoice, and the registry follows", async () => {
      const platformId = await b.newPlatform();
      const free = await subscriptionOf(platformId);
      const r = await override(free.id, { planTier: "growth" });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ id: free.id, tier: "growth", planId: "plan_growth", status: "active", customerId: null, currentPeriodEnd: free.currentPeriodEnd });
      expect(await invoicesOf(platformId)).toEqual([]);
      await b.ctx.tierSync.push(b.clock.now());
      expect((await b.platformOf(platformId)).tier).toBe("growth");
    });

    it("changes a paid tier without proration: no invoice, no balance", async () => {
      const up = await b.upgraded("plan_scale");
      const r = await override(up.subscription.id, { planTier: "starter" });
      expect(r.body).toMatchObject({ tier: "starter", status: "active" });
      expect(await invoicesOf(up.platformId)).toHaveLength(1);
      expect(await balanceOf(up.subscription.customerId)).toBe(0);
    });

    it.each([
      ["an unknown tier", { planTier: "gold" }],
      ["an empty body", {}],
      ["a fractional trialEnd", { trialEnd: 1.5 }],
      ["a negative trialEnd", { trialEnd: -1 }],
      ["an unknown field", { planTier: "growth", tier: "growth" }],
    ])("refuses %s with 400", async (_, body) => {
      const platformId = await b.newPlatform();
      const free = await subscriptionOf(platformId);
      const r = await override(free.id, body);
      expect(r.status).toBe(400);
      expect((await subscriptionOf(platformId)).tier).toBe("free");
    });

    it("starts a trial of starter on free with a trialEnd in the future", async () => {
      const platformId = await b.newPlatform();
      const free = await subscriptionOf(platformId);
      const trialEnd = secondsOf(b.clock.now()) + 5 * 86_400;
      const r = await override(free.id, { trialEnd });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ status: "trialing", tier: "starter", trialEnd, currentPeriodEnd: trialEnd, currentPeriodStart: secondsOf(b.clock.now()) });
      expect(await invoicesOf(platformId)).toEqual([]);
    });

    it("ends a trial now with a trialEnd in the past: charged to the default card, anchored now, the trial's credit applied", async () => {
      const up = await b.upgraded("plan_starter");
      b.clock.advance(7 * DAY);
      await b.call("POST", `/operator/subscriptions/${up.subscription.id}/trial`, { headers: op, body: { trialDays: 14 } });
      const credited = await balanceOf(up.subscription.customerId);
      b.clock.advance(DAY);
      const now = secondsOf(b.clock.now());
      const r = await override(up.subscription.id, { trialEnd: now - 3600 });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ status: "active", tier: "starter", billingAnchor: now, currentPeriodStart: now });
      const charged = (await invoicesOf(up.platformId))[0];
      expect(charged).toMatchObject({ status: "paid", periodStart: now, subtotalCents: 2900, creditAppliedCents: credited, amountPaidCents: 2900 - credited });
      expect(await balanceOf(up.subscription.customerId)).toBe(0);
    });

    it("ends a trial in the past with nobody to charge: the platform returns to free", async () => {
      const platformId = await b.newPlatform();
      const free = await subscriptionOf(platformId);
      expect((await override(free.id, { trialEnd: secondsOf(b.clock.now()) + 86_400 })).body.status).toBe("trialing");
      const r = await override(free.id, { trialEnd: secondsOf(b.clock.now()) - 60 });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ id: free.id, status: "canceled" });
      const current = await subscriptionOf(platformId);
      expect(current).toMatchObject({ tier: "free", status: "active" });
      expect(current.id).not.toBe(free.id);
      expect(await invoicesOf(platformId)).toEqual([]);
      // the ended row takes no more changes
      const ended = await override(free.id, { planTier: "growth" });
      expect(ended.status).toBe(409);
      expect(ended.body.error.code).toBe("SUBSCRIPTION_ENDED");
    });

    it("answers 404 for an unknown subscription at once", async () => {
      const r = await override("sub_nope", { planTier: "growth" });
      expect(r.status).toBe(404);
    });

    it("refuses a past trialEnd on a subscription that is not in a trial: 409 NOT_TRIALING, nothing charged", async () => {
      const up = await b.upgraded("plan_starter");
      const r = await override(up.subscription.id, { trialEnd: 1 });
      expect(r.status).toBe(409);
      expect(r.body.error.code).toBe("NOT_TRIALING");
      expect(await invoicesOf(up.platformId)).toHaveLength(1);
    });

    it("is for operators: a tenant owner gets 403", async () => {
      const up = await b.upgraded("plan_starter");
      expect((await override(up.subscription.id, { planTier: "scale" }, up.owner)).status).toBe(403);
    });
  });

  describe("POST /operator/subscriptions/{id}/trial", () => {
    const trial = (id: string, body: unknown, headers = op) => b.call("POST", `/operator/subscriptions/${id}/trial`, { headers, body });

    it("takes 365 days, and refuses 366, 0, 1.5 and a string with 400", async () => {
      const platformId = await b.newPlatform();
      const free = await subscriptionOf(platformId);
      for (const trialDays of [366, 0, 1.5, -1, "7"]) expect((await trial(free.id, { trialDays })).status, String(trialDays)).toBe(400);
      expect((await trial(free.id, {})).status).toBe(400);
      const r = await trial(free.id, { trialDays: 365 });
      expect(r.status).toBe(200);
      const now = secondsOf(b.clock.now());
      expect(r.body).toMatchObject({ status: "trialing", tier: "starter", trialEnd: now + 365 * 86_400, currentPeriodEnd: now + 365 * 86_400 });
    });

    it("credits the unused paid time of a period to the balance by Stripe's rule, once, and charges nothing", async () => {
      const up = await b.upgraded("plan_starter");
      b.clock.advance(10 * DAY + 12_345_000);
      const before = await subscriptionOf(up.platformId);
      const now = secondsOf(b.clock.now());
      const r = await trial(up.subscription.id, { trialDays: 14 });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ status: "trialing", tier: "starter", trialEnd: now + 14 * 86_400 });
      const remaining = before.currentPeriodEnd - now;
      const periodLength = before.currentPeriodEnd - before.currentPeriodStart;
      const expected = Math.round((2900 * remaining) / periodLength);
      expect(await balanceOf(up.subscription.customerId)).toBe(expected);
      // a second trial call moves the end, not the balance
      const again = await trial(up.subscription.id, { trialDays: 20 });
      expect(again.body.trialEnd).toBe(now + 20 * 86_400);
      expect(await balanceOf(up.subscription.customerId)).toBe(expected);
      expect((await ledgerOf(up.subscription.customerId)).filter((l) => l.kind === "trial_credit")).toHaveLength(1);
      expect(await invoicesOf(up.platformId)).toHaveLength(1);
    });

    it("keeps the tier of a paid subscription for its trial", async () => {
      const up = await b.upgraded("plan_growth");
      const r = await trial(up.subscription.id, { trialDays: 3 });
      expect(r.body).toMatchObject({ tier: "growth", status: "trialing" });
    });

    it("answers 404 for an unknown subscription at once", async () => {
      expect((await trial("sub_nope", { trialDays: 3 })).status).toBe(404);
    });

    it("is for operators: a tenant owner gets 403, nobody 401", async () => {
      const up = await b.upgraded("plan_starter");
      expect((await trial(up.subscription.id, { trialDays: 3 }, up.owner)).status).toBe(403);
      expect((await trial(up.subscription.id, { trialDays: 3 }, {})).status).toBe(401);
      expect((await subscriptionOf(up.platformId)).status).toBe("active");
    });
  });

  describe("GET /operator/audit", () => {
    const audit = (query = "", headers = op) => b.call("GET", `/operator/audit${query}`, { headers });

    it("lists the actions newest first with actor, target, before, after and the request id sent", async () => {
      const up = await b.upgraded("plan_starter");
      const customerId = up.subscription.customerId;
      const creditId = unique("req-credit");
      const trialId = unique("req-trial");
      await b.call("POST", "/operator/credits", { headers: { ...op, "x-request-id": creditId }, body: { customerId, amount: 7, description: "Sorry" } });
      await b.call("POST", `/operator/subscriptions/${up.subscription.id}/trial`, { headers: { ...op, "x-request-id": trialId }, body: { trialDays: 3 } });
      const r = await audit("?limit=2");
      expect(r.status).toBe(200);
      expect(r.body.data).toHaveLength(2);
      const [newest, older] = r.body.data;
      expect(newest).toMatchObject({ action: "subscription.trial", targetType: "subscription", targetId: up.subscription.id, requestId: trialId, actorType: "user", actorId: expect.any(String) });
      expect(newest.before).toMatchObject({ status: "active", tier: "starter" });
      expect(newest.after).toMatchObject({ status: "trialing", tier: "starter" });
      expect(older).toMatchObject({ action: "credit.grant", targetType: "customer", targetId: customerId, requestId: creditId, before: { balanceCents: 0 }, after: { balanceCents: 700, amountCents: 700 } });
      expect(newest.at).toBe(secondsOf(b.clock.now()));
      expect(r.body.cursor).toEqual(expect.any(String));
    });

    it("writes one line for a replayed credit and none for a refused one", async () => {
      const customerId = await bareCustomer();
      const key = { ...op, "idempotency-key": crypto.randomUUID() };
      await credit(customerId, 2, {}, key);
      await credit(customerId, 2, {}, key);
      await credit(customerId, 2, { currency: "eur" });
      const [row] = await b.db.select({ n: count() }).from(operatorAudit).where(and(eq(operatorAudit.targetId, customerId), eq(operatorAudit.action, "credit.grant")));
      expect(Number(row!.n)).toBe(1);
    });

    it("walks every line with limit and cursor, each once, newest first", async () => {
      const customerId = await bareCustomer();
      for (let i = 0; i < 15; i++) await credit(customerId, 1);
      const seen: { id: string; at: number }[] = [];
      let cursor: string | null = null;
      do {
        const page: any = await audit(`?limit=7${cursor ? `&cursor=${cursor}` : ""}`);
        expect(page.status).toBe(200);
        expect(page.body.data.length).toBeLessThanOrEqual(7);
        seen.push(...page.body.data);
        cursor = page.body.cursor;
      } while (cursor);
      const [total] = await b.db.select({ n: count() }).from(operatorAudit);
      expect(seen).toHaveLength(Number(total!.n));
      expect(seen.length).toBeGreaterThan(14);
      expect(new Set(seen.map((e) => e.id)).size).toBe(seen.length);
      expect(seen.map((e) => e.at)).toEqual([...seen.map((e) => e.at)].sort((x, y) => y - x));
    });

    it("refuses a garbage cursor and limits outside 1-100 with 400", async () => {
      for (const query of ["?cursor=!!!", `?cursor=${Buffer.from('{"k":1}').toString("base64url")}`, "?cursor=bm90anNvbg", "?limit=0", "?limit=101", "?limit=abc"]) {
        expect((await audit(query)).status, query).toBe(400);
      }
      expect((await audit("?limit=100")).status).toBe(200);
    });

    it("is for operators: a tenant owner gets 403, nobody 401", async () => {
      const platformId = await b.newPlatform();
      expect((await audit("", b.as.owner(platformId))).status).toBe(403);
      expect((await audit("", {})).status).toBe(401);
    });
  });
});

describe.each(testDatabases())("tax on invoices (CORE_BILLING_TAX_PERCENT 8.25) on $name", (database) => {
  let b: Billing;
  beforeAll(async () => {
    b = await startBilling(database, { taxPercent: "8.25" });
  });
  afterAll(() => b?.close());
  const { balanceOf, invoicesOf, credit, pastPeriodEnd, subscribedSeats } = operatorKit(() => b);

  it("adds one tax amount on the subtotal: starter 2900 → tax 239, total and charge 3139", async () => {
    const up = await b.upgraded("plan_starter");
    expect(up.invoice).toMatchObject({ status: "paid", subtotalCents: 2900, taxCents: 239, totalCents: 3139, amountDueCents: 3139, amountPaidCents: 3139 });
  });

  it("rounds the tax once, half away from zero: 2 × starter (5800) → 478.5 → 479", async () => {
    const { platformId } = await subscribedSeats("price_starter_monthly", 2);
    expect((await invoicesOf(platformId))[0]).toMatchObject({ subtotalCents: 5800, taxCents: 479, totalCents: 6279, amountPaidCents: 6279 });
  });

  it("does not tax a carried debit again on the invoice that collects it", async () => {
    const up = await b.upgraded("plan_starter");
    const customerId = up.subscription.customerId;
    // 3139 due at renewal, 3119 of it credited: 20 cents left, under the minimum charge
    await credit(customerId, "31.19");
    await pastPeriodEnd(up.platformId);
    expect((await invoicesOf(up.platformId))[0]).toMatchObject({ status: "paid", totalCents: 3139, creditAppliedCents: 3119, amountDueCents: 20, amountPaidCents: 0 });
    expect(await balanceOf(customerId)).toBe(-20);
    await pastPeriodEnd(up.platformId);
    const next = (await invoicesOf(up.platformId))[0];
    expect(next.lines.map((l: { kind: string; amountCents: number }) => [l.kind, l.amountCents])).toEqual([
      ["subscription", 2900],
      ["carried", 20],
    ]);
    // 8.25 % of 2900 is 239; of 2920 it would be 241
    expect(next).toMatchObject({ status: "paid", subtotalCents: 2920, taxCents: 239, totalCents: 3159, amountPaidCents: 3159 });
    expect(await balanceOf(customerId)).toBe(0);
  });
});

describe.each(testDatabases())("GET /operator/overview on $name", (database) => {
  let b: Billing;
  let op: Record<string, string>;
  beforeAll(async () => {
    b = await startBilling(database);
    op = b.as.operator();
  });
  afterAll(() => b?.close());
  const { subscriptionOf, pastPeriodEnd, subscribedSeats } = operatorKit(() => b);
  const billingTokens = () => new ServiceTokenClient(b.iam.url, { serviceId: "billing", secret: "billing-secret" });
  /** how many platforms the registry knows, by walking its pages as an operator would */
  async function registryPlatformCount(): Promise<number> {
    let total = 0;
    for await (const ids of b.ctx.platforms.platformIdPages()) total += ids.length;
    return total;
  }

  it("counts an empty billing as zeros", async () => {
    const r = await b.call("GET", "/operator/overview", { headers: op });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      currency: "usd",
      mrrCents: 0,
      activePlatforms: 0,
      paidPlatforms: 0,
      trialingPlatforms: 0,
      pastDuePlatforms: 0,
      platformsByTier: { free: 0, starter: 0, growth: 0, scale: 0 },
      revenueThisMonthCents: 0,
      platformCountsComplete: true,
    });
  });

  it("counts platforms by state and tier, MRR of paid subscriptions (past due too) × quantity, and this month's collected revenue", async () => {
    // paid on 31 January, refused at its renewal on 28 February: past_due
    const late = await b.upgraded("plan_starter");
    await b.call("POST", "/payment-methods/pm_card_chargeCustomerFail/attach", { headers: op, body: { customerId: late.subscription.customerId, setAsDefault: true } });
    await pastPeriodEnd(late.platformId);
    expect((await subscriptionOf(late.platformId)).status).toBe("past_due");
    // in February: one starter, two seats of growth, one free, one trial of starter
    await b.upgraded("plan_starter");
    await subscribedSeats("price_growth_monthly", 2);
    await subscriptionOf(await b.newPlatform());
    const trialing = await subscriptionOf(await b.newPlatform());
    expect((await b.call("POST", `/operator/subscriptions/${trialing.id}/trial`, { headers: op, body: { trialDays: 14 } })).status).toBe(200);

    const r = await b.call("GET", "/operator/overview", { headers: op });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      currency: "usd",
      // the past_due starter is still subscribed while its payment is retried; the trial pays nothing yet
      mrrCents: 2900 + 2900 + 2 * 9900,
      activePlatforms: 5,
      paidPlatforms: 2,
      trialingPlatforms: 1,
      pastDuePlatforms: 1,
      platformsByTier: { free: 1, starter: 3, growth: 1, scale: 0 },
      // January's 2900 is last month's; the refused renewal collected nothing; a payment of this very
      // instant counts
      revenueThisMonthCents: 2900 + 2 * 9900,
      platformCountsComplete: true,
    });
  });

  it("counts the platforms the registry knows and billing has not read yet as active and free, without reading them", async () => {
    const before = (await b.call("GET", "/operator/overview", { headers: op })).body;
    const unread = [await b.newPlatform(), await b.newPlatform(), await b.newPlatform()];
    const after = (await b.call("GET", "/operator/overview", { headers: op })).body;
    expect(after).toEqual({
      ...before,
      activePlatforms: before.activePlatforms + 3,
      platformsByTier: { ...before.platformsByTier, free: before.platformsByTier.free + 3 },
    });
    // counting them made no subscription: they are still unread
    const rows = await b.db.select({ n: count() }).from(subscriptions).where(inArray(subscriptions.platformId, unread));
    expect(Number(rows[0]!.n)).toBe(0);
    // once read, each is counted once, not twice
    for (const platformId of unread) await subscriptionOf(platformId);
    expect((await b.call("GET", "/operator/overview", { headers: op })).body).toEqual(after);
  });

  it("walks the registry's pages, one request per hundred platforms (never one per platform), and counts each once", async () => {
    while ((await registryPlatformCount()) <= 205) await b.newPlatform();
    const total = await registryPlatformCount();
    const asked: string[] = [];
    const counting: typeof fetch = (input, init) => {
      asked.push(String(input));
      return fetch(input, init);
    };
    const original = b.ctx.platforms;
    b.ctx.platforms = new PlatformDirectory(b.registryUrl, billingTokens(), counting);
    try {
      const r = await b.call("GET", "/operator/overview", { headers: op });
      expect(r.status).toBe(200);
      expect(r.body.activePlatforms).toBe(total);
      expect(r.body.platformCountsComplete).toBe(true);
      expect(asked).toHaveLength(Math.ceil(total / 100));
      expect(asked.every((url) => url.includes("/platforms?limit=100"))).toBe(true);
    } finally {
      b.ctx.platforms = original;
    }
  });

  it("answers what billing knows, with platformCountsComplete false, when the registry is down, failing or answering nonsense", async () => {
    const complete = (await b.call("GET", "/operator/overview", { headers: op })).body;
    await b.newPlatform();
    const original = b.ctx.platforms;
    // a registry that answers 500, and one that answers 200 with what is not a page of platforms
    const answers = [
      (res: ServerResponse) => res.writeHead(500, { "content-type": "application/json" }).end('{"error":{"code":"INTERNAL"}}'),
      (res: ServerResponse) => res.writeHead(200, { "content-type": "application/json" }).end("<html>maintenance</html>"),
      (res: ServerResponse) => res.writeHead(200, { "content-type": "application/json" }).end('{"data":[{"id":7}],"cursor":null}'),
    ];
    const servers = await Promise.all(
      answers.map(async (answer) => {
        const server = createServer((_req, res) => answer(res));
        await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
        return server;
      }),
    );
    try {
      // nothing listens on port 1: the registry is down
      for (const url of ["http://127.0.0.1:1", ...servers.map((s) => `http://127.0.0.1:${(s.address() as AddressInfo).port}`)]) {
        b.ctx.platforms = new PlatformDirectory(url, billingTokens());
        const r = await b.call("GET", "/operator/overview", { headers: op });
        expect(r.status, url).toBe(200);
        // MRR and revenue are billing's own; the platform counts are those billing has read (the new one is left out)
        const billingOnly = (await b.db.select({ n: count() }).from(subscriptions).where(eq(subscriptions.current, true)))[0]!.n;
        expect(r.body, url).toEqual({
          ...complete,
          activePlatforms: Number(billingOnly),
          platformsByTier: { ...complete.platformsByTier, free: complete.platformsByTier.free - (complete.activePlatforms - Number(billingOnly)) },
          platformCountsComplete: false,
        });
      }
    } finally {
      b.ctx.platforms = original;
      for (const server of servers) {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      }
    }
    const again = (await b.call("GET", "/operator/overview", { headers: op })).body;
    expect(again).toEqual({ ...complete, activePlatforms: complete.activePlatforms + 1, platformsByTier: { ...complete.platformsByTier, free: complete.platformsByTier.free + 1 } });
  });

  it("is for operators: a tenant owner gets 403, nobody 401", async () => {
    const platformId = await b.newPlatform();
    expect((await b.call("GET", "/operator/overview", { headers: b.as.owner(platformId) })).status).toBe(403);
    expect((await b.call("GET", "/operator/overview")).status).toBe(401);
  });
});
