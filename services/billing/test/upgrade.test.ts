import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "@core/storage";
import { startBilling, type Billing } from "./support/billing.js";

const upgradeBody = (overrides: Record<string, unknown> = {}) => ({
  planId: "plan_starter",
  paymentMethodId: "pm_card_visa",
  billingEmail: "Billing@Example.com",
  idempotencyKey: crypto.randomUUID(),
  ...overrides,
});

describe.each(testDatabases())("POST /api/billing/upgrade on $name", (database) => {
  let b: Billing;
  beforeAll(async () => {
    b = await startBilling(database);
  });
  afterAll(() => b?.close());

  it("starts every platform on free: the first read makes its free subscription, anchored now", async () => {
    const platformId = await b.newPlatform();
    const r = await b.call("GET", `/subscription?platformId=${platformId}`, { headers: b.as.member(platformId) });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ platformId, tier: "free", planId: "plan_free", status: "active", customerId: null, cancelAtPeriodEnd: false, pendingTier: null });
    expect(r.body.billingAnchor).toBe(Math.floor(b.clock.now().getTime() / 1000));
    const again = await b.call("GET", `/api/billing/subscription?platformId=${platformId}`, { headers: b.as.member(platformId) });
    expect(again.body.id).toBe(r.body.id);
  });

  it("charges the first period in full, then switches the plan, with a paid, numbered invoice", async () => {
    const platformId = await b.newPlatform();
    const owner = b.as.owner(platformId);
    const r = await b.call("POST", "/api/billing/upgrade", { headers: owner, body: upgradeBody() });
    expect(r.status).toBe(200);
    const { subscription, invoice } = r.body;
    expect(subscription).toMatchObject({ platformId, tier: "starter", planId: "plan_starter", status: "active", customerId: expect.stringMatching(/^cus_/) });
    // anchored at the upgrade: 31 January 10:00, so the period ends on 28 February (2026 is not a leap year)
    expect(new Date(subscription.currentPeriodEnd * 1000).toISOString()).toBe("2026-02-28T10:00:00.000Z");
    expect(invoice).toMatchObject({
      status: "paid",
      number: expect.stringMatching(/^[A-Z0-9]{8}-0001$/),
      subtotalCents: 2900,
      totalCents: 2900,
      amountDueCents: 2900,
      amountPaidCents: 2900,
      customerSnapshot: { email: "billing@example.com" },
      lines: [expect.objectContaining({ kind: "subscription", description: "Starter (monthly)", amountCents: 2900 })],
    });
    const methods = await b.call("GET", "/payment-methods", { headers: owner });
    expect(methods.body.data).toEqual([expect.objectContaining({ card: expect.objectContaining({ brand: "visa", last4: "4242" }), isDefault: true })]);
    await b.ctx.tierSync.push(b.clock.now());
    expect((await b.platformOf(platformId)).tier).toBe("starter");
  });

  it.each([
    ["pm_card_visa_chargeDeclined", "card_declined", "generic_decline"],
    ["pm_card_visa_chargeDeclinedInsufficientFunds", "card_declined", "insufficient_funds"],
    ["pm_card_visa_chargeDeclinedLostCard", "card_declined", "lost_card"],
    ["pm_card_visa_chargeDeclinedStolenCard", "card_declined", "stolen_card"],
    ["pm_card_chargeDeclinedExpiredCard", "expired_card", "expired_card"],
    ["pm_card_chargeDeclinedProcessingError", "processing_error", "none"],
  ])("refuses %s with 402 PAYMENT_DECLINED naming %s / %s, without details, and changes nothing", async (card, code, declineCode) => {
    const platformId = await b.newPlatform();
    const owner = b.as.owner(platformId);
    const r = await b.call("POST", "/api/billing/upgrade", { headers: owner, body: upgradeBody({ paymentMethodId: card }) });
    expect(r.status).toBe(402);
    expect(Object.keys(r.body.error).sort()).toEqual(["code", "message", "requestId"]);
    expect(r.body.error.code).toBe("PAYMENT_DECLINED");
    expect(r.body.error.message).toContain(`code: ${code}, decline code: ${declineCode}`);
    expect((await b.call("GET", `/subscription?platformId=${platformId}`, { headers: owner })).body.tier).toBe("free");
    expect((await b.call("GET", `/invoices?platformId=${platformId}`, { headers: owner })).body.data.filter((i: { status: string }) => i.status === "paid")).toEqual([]);
  });

  it("refuses a card that attaches and then declines: the subscription stays free and its invoice is void", async () => {
    const platformId = await b.newPlatform();
    const owner = b.as.owner(platformId);
    const r = await b.call("POST", "/api/billing/upgrade", { headers: owner, body: upgradeBody({ paymentMethodId: "pm_card_chargeCustomerFail" }) });
    expect(r.status).toBe(402);
    expect(r.body.error.message).toContain("decline code: generic_decline");
    expect((await b.call("GET", `/subscription?platformId=${platformId}`, { headers: owner })).body.tier).toBe("free");
    const invoices = (await b.call("GET", `/invoices?platformId=${platformId}`, { headers: owner })).body.data;
    expect(invoices.map((i: { status: string }) => i.status)).toEqual(["void"]);
  });

  it("answers a retry with the same key from the record: one charge, Idempotent-Replayed: true", async () => {
    const platformId = await b.newPlatform();
    const owner = b.as.owner(platformId);
    const body = upgradeBody();
    const first = await b.call("POST", "/api/billing/upgrade", { headers: owner, body });
    const again = await b.call("POST", "/api/billing/upgrade", { headers: owner, body });
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body).toEqual(first.body);
    const other = await b.call("POST", "/api/billing/upgrade", { headers: owner, body: { ...body, planId: "plan_growth" } });
    expect(other.status).toBe(422);
    expect(other.body.error.code).toBe("IDEMPOTENCY_KEY_REUSED");
  });

  it("charges once for ten parallel upgrades with one key", async () => {
    const platformId = await b.newPlatform();
    const owner = b.as.owner(platformId);
    const body = upgradeBody();
    const answers = await Promise.all(Array.from({ length: 10 }, () => b.call("POST", "/api/billing/upgrade", { headers: owner, body })));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(1);
    expect(statuses.every((s) => s === 200 || s === 409)).toBe(true);
    const paid = (await b.call("GET", `/invoices?platformId=${platformId}`, { headers: owner })).body.data;
    expect(paid.map((i: { status: string; amountPaidCents: number }) => [i.status, i.amountPaidCents])).toEqual([["paid", 2900]]);
  });

  it("refuses a second upgrade with 409 ALREADY_SUBSCRIBED", async () => {
    const { owner } = await b.upgraded();
    const r = await b.call("POST", "/api/billing/upgrade", { headers: owner, body: upgradeBody({ planId: "plan_growth" }) });
    expect(r.status).toBe(409);
    expect(r.body.error.code).toBe("ALREADY_SUBSCRIBED");
  });

  it.each([
    ["an unknown plan", { planId: "plan_gold" }, 400],
    ["the free plan", { planId: "plan_free" }, 400],
    ["an unknown payment method", { paymentMethodId: "pm_nope" }, 400],
    ["a key that is not a UUID", { idempotencyKey: "not-a-uuid" }, 400],
    ["an email that is not one", { billingEmail: "nope" }, 400],
  ])("refuses %s with %s and no details", async (_, overrides, status) => {
    const platformId = await b.newPlatform();
    const r = await b.call("POST", "/api/billing/upgrade", { headers: b.as.owner(platformId), body: upgradeBody(overrides) });
    expect(r.status).toBe(status);
    expect(r.body.error).not.toHaveProperty("details");
  });

  it("refuses a member without billing:manage with 403, and a caller without credentials with 401", async () => {
    const platformId = await b.newPlatform();
    expect((await b.call("POST", "/api/billing/upgrade", { headers: b.as.member(platformId), body: upgradeBody() })).status).toBe(403);
    expect((await b.call("POST", "/api/billing/upgrade", { body: upgradeBody() })).status).toBe(401);
  });
});
