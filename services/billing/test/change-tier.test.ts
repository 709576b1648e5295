import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "@core/storage";
import { startBilling, type Billing } from "./support/billing.js";

const DAY = 86_400_000;

describe.each(testDatabases())("tier changes on $name", (database) => {
  let b: Billing;
  beforeAll(async () => {
    b = await startBilling(database);
  });
  afterAll(() => b?.close());

  const preview = (owner: Record<string, string>, tier: string) => b.call("GET", `/subscription/proration-preview?tier=${tier}`, { headers: owner });
  const change = (owner: Record<string, string>, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    b.call("POST", "/subscription/change-tier", { headers: { ...owner, ...headers }, body });

  it("prorates an upgrade to the second over the period's real length, and charges exactly the preview", async () => {
    const { owner, subscription } = await b.upgraded("plan_starter");
    // the period is 31 January 10:00 to 28 February 10:00: 28 days; half of it later
    b.clock.advance(14 * DAY);
    const shown = await preview(owner, "growth");
    expect(shown.status).toBe(200);
    expect(shown.body).toMatchObject({
      currentTier: "starter",
      newTier: "growth",
      currency: "usd",
      lines: [
        { description: "Unused time on Starter after 14 Feb 2026", amountCents: -1450 },
        { description: "Remaining time on Growth after 14 Feb 2026", amountCents: 4950 },
      ],
      subtotalCents: 3500,
      taxCents: 0,
      creditAppliedCents: 0,
      amountDueCents: 3500,
    });
    expect(shown.body.effectiveAt).toBe(shown.body.prorationDate);
    b.clock.advance(60_000);
    const r = await change(owner, { tier: "growth", prorationDate: shown.body.prorationDate, expectedAmountDueCents: 3500 });
    expect(r.status).toBe(200);
    expect(r.body.subscription).toMatchObject({ id: subscription.id, tier: "growth", planId: "plan_growth", pendingTier: null });
    expect(r.body.invoice).toMatchObject({ status: "paid", amountDueCents: 3500, amountPaidCents: 3500, number: expect.stringMatching(/-0002$/) });
    expect(r.body.invoice.lines.map((l: { amountCents: number }) => l.amountCents)).toEqual([-1450, 4950]);
  });

  it("answers 409 AMOUNT_CHANGED with the new amount when the expected amount no longer holds, and changes nothing", async () => {
    const { owner } = await b.upgraded("plan_starter");
    b.clock.advance(7 * DAY);
    const r = await change(owner, { tier: "scale", expectedAmountDueCents: 1 });
    expect(r.status).toBe(409);
    expect(r.body.error).toMatchObject({ code: "AMOUNT_CHANGED", details: { amountDueCents: expect.any(Number) } });
    expect((await b.call("GET", "/subscription/proration-preview?tier=scale", { headers: owner })).body.amountDueCents).toBe(r.body.error.details.amountDueCents);
    expect((await b.call("GET", "/subscription/proration-preview?tier=starter", { headers: owner })).status).toBe(409);
  });

  it("schedules a downgrade for the period's end without charging, and calls it off when asked for the current tier", async () => {
    const { owner, platformId } = await b.upgraded("plan_growth");
    const shown = await preview(owner, "starter");
    expect(shown.body).toMatchObject({ lines: [], amountDueCents: 0, prorationDate: null });
    const down = await change(owner, { tier: "starter" });
    expect(down.status).toBe(200);
    expect(down.body).toMatchObject({ subscription: { tier: "growth", pendingTier: "starter" }, invoice: null });
    expect(down.body.subscription.currentPeriodEnd).toBe(shown.body.effectiveAt);
    const kept = await change(owner, { tier: "growth" });
    expect(kept.body.subscription).toMatchObject({ tier: "growth", pendingTier: null });
    const same = await change(owner, { tier: "growth" });
    expect(same.status).toBe(409);
    expect(same.body.error.code).toBe("SAME_TIER");
    expect((await b.call("GET", `/invoices?platformId=${platformId}`, { headers: owner })).body.data).toHaveLength(1);
  });

  it("lists an upgrade and a change made in the same second newest first, on one page and page by page", async () => {
    const { owner, platformId } = await b.upgraded("plan_starter");
    expect((await change(owner, { tier: "growth" })).status).toBe(200);
    const page = (await b.call("GET", `/invoices?platformId=${platformId}`, { headers: owner })).body;
    expect(page.data.map((i: { createdAt: number }) => i.createdAt)).toEqual([page.data[0].createdAt, page.data[0].createdAt]);
    expect(page.data.map((i: { number: string }) => i.number.slice(-4))).toEqual(["0002", "0001"]);
    const first = (await b.call("GET", `/invoices?platformId=${platformId}&limit=1`, { headers: owner })).body;
    const second = (await b.call("GET", `/invoices?platformId=${platformId}&limit=1&cursor=${first.cursor}`, { headers: owner })).body;
    expect([...first.data, ...second.data]).toEqual(page.data);
    expect(second.cursor).toBeNull();
  });

  it("sends a free platform to the upgrade route: 409 USE_UPGRADE", async () => {
    const platformId = await b.newPlatform();
    const r = await change(b.as.owner(platformId), { tier: "growth" });
    expect(r.status).toBe(409);
    expect(r.body.error.code).toBe("USE_UPGRADE");
    expect(r.body.error.message).toContain("/api/billing/upgrade");
  });

  it("credits only what was charged for the period across several changes", async () => {
    const { owner } = await b.upgraded("plan_starter");
    b.clock.advance(7 * DAY);
    expect((await change(owner, { tier: "growth" })).status).toBe(200);
    b.clock.advance(7 * DAY);
    const second = await change(owner, { tier: "scale" });
    expect(second.status).toBe(200);
    const [credit, charge] = second.body.invoice.lines.map((l: { amountCents: number }) => l.amountCents);
    // 14 of 28 days remain: half of growth's 9900 back, half of scale's 49900 charged
    expect([credit, charge]).toEqual([-4950, 24950]);
  });

  it("refuses an upgrade whose card declines with 402 and details, keeps the tier and voids the invoice", async () => {
    const { owner, platformId } = await b.upgraded("plan_starter", "pm_card_visa");
    // the owner's default card becomes one that fails every charge
    const customerId = (await b.call("GET", `/subscription?platformId=${platformId}`, { headers: owner })).body.customerId;
    const attached = await b.call("POST", "/payment-methods/pm_card_chargeCustomerFail/attach", { headers: b.as.operator(), body: { customerId, setAsDefault: true } });
    expect(attached.status).toBe(200);
    const r = await change(owner, { tier: "growth" });
    expect(r.status).toBe(402);
    expect(r.body.error).toMatchObject({ code: "PAYMENT_DECLINED", details: { code: "card_declined", declineCode: "generic_decline" } });
    expect((await b.call("GET", `/subscription?platformId=${platformId}`, { headers: owner })).body.tier).toBe("starter");
  });

  it("applies the same key once through either prefix", async () => {
    const { owner, platformId } = await b.upgraded("plan_starter");
    const key = { "idempotency-key": crypto.randomUUID() };
    const first = await change(owner, { tier: "growth" }, key);
    const again = await b.call("POST", "/api/billing/subscription/change-tier", { headers: { ...owner, ...key }, body: { tier: "growth" } });
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body).toEqual(first.body);
    const paid = (await b.call("GET", `/invoices?platformId=${platformId}`, { headers: owner })).body.data.filter((i: { status: string }) => i.status === "paid");
    expect(paid).toHaveLength(2);
  });
});
