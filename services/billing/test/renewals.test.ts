import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "@core/kit";
import { rowsOf, testDatabases } from "@core/storage";
import { sql } from "drizzle-orm";
import { BillingTime } from "../src/billing-time.js";
import type { Engine } from "../src/engine.js";
import { LocalProvider } from "../src/provider/local.js";
import type { ChargeOutcome, ChargeRequest } from "../src/provider/types.js";
import { BillingWorker, RETRY_DAYS } from "../src/renewals.js";
import { startBilling, type Billing } from "./support/billing.js";

const DAY = 86_400_000;
const iso = (seconds: number) => new Date(seconds * 1000).toISOString();

describe.each(testDatabases())("renewals, dunning and the test clock on $name", (database) => {
  let b: Billing;
  let op: Record<string, string>;
  beforeAll(async () => {
    b = await startBilling(database, { testClock: true });
    op = b.as.operator();
  });
  afterAll(() => b?.close());

  const invoicesOf = async (platformId: string) => (await b.call("GET", `/invoices?platformId=${platformId}&limit=100`, { headers: op })).body.data as any[];
  const subscriptionOf = async (platformId: string) => (await b.call("GET", `/subscription?platformId=${platformId}`, { headers: op })).body;
  const advance = (seconds: number) => b.call("POST", "/operator/test-clock/advance", { headers: op, body: { seconds } });

  it("renews on the anchor's clamped month ends and invoices each period once, charged in advance", async () => {
    const { platformId } = await b.upgraded("plan_growth");
    const r = await advance(92 * 86_400); // 31 January + 92 days: past 28 February, 31 March and 30 April
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ enabled: true, offsetSeconds: 92 * 86_400 });
    const sub = await subscriptionOf(platformId);
    expect(iso(sub.currentPeriodStart)).toBe("2026-04-30T10:00:00.000Z");
    expect(iso(sub.currentPeriodEnd)).toBe("2026-05-31T10:00:00.000Z");
    const invoices = await invoicesOf(platformId);
    expect(invoices.map((i) => [i.status, iso(i.periodStart), i.amountPaidCents])).toEqual([
      ["paid", "2026-04-30T10:00:00.000Z", 9900],
      ["paid", "2026-03-31T10:00:00.000Z", 9900],
      ["paid", "2026-02-28T10:00:00.000Z", 9900],
      ["paid", "2026-01-31T10:00:00.000Z", 9900],
    ]);
    expect(invoices.map((i) => i.number.slice(-4))).toEqual(["0004", "0003", "0002", "0001"]);
    // a second pass and a second advance of nothing due invoice nothing again
    await b.ctx.worker.pass();
    expect(await invoicesOf(platformId)).toHaveLength(4);
  });

  it("answers the clock, refuses to go back, and is for operators", async () => {
    const now = await b.call("GET", "/operator/test-clock", { headers: op });
    expect(now.status).toBe(200);
    expect(now.body.now).toBe(Math.floor(b.clock.now().getTime() / 1000) + now.body.offsetSeconds);
    for (const seconds of [0, -60, 1.5, "60"]) expect((await advance(seconds as number)).status, String(seconds)).toBe(400);
    const platformId = await b.newPlatform();
    expect((await b.call("POST", "/operator/test-clock/advance", { headers: b.as.owner(platformId), body: { seconds: 60 } })).status).toBe(403);
  });

  it("applies a pending downgrade at the period's end and charges the lower price", async () => {
    const { platformId, owner } = await b.upgraded("plan_scale");
    expect((await b.call("POST", "/subscription/change-tier", { headers: owner, body: { tier: "starter" } })).body.subscription.pendingTier).toBe("starter");
    await advance(32 * 86_400);
    const sub = await subscriptionOf(platformId);
    expect(sub).toMatchObject({ tier: "starter", pendingTier: null, status: "active" });
    expect((await invoicesOf(platformId))[0]).toMatchObject({ status: "paid", amountPaidCents: 2900 });
    await b.ctx.tierSync.push(b.clock.now());
    expect((await b.platformOf(platformId)).tier).toBe("starter");
  });

  it("makes a refused renewal past_due, retries it after 1, 3 and 5 days, then marks it uncollectible and returns the platform to free", async () => {
    const { platformId } = await b.upgraded("plan_starter");
    const customerId = (await subscriptionOf(platformId)).customerId;
    await b.call("POST", "/payment-methods/pm_card_chargeCustomerFail/attach", { headers: op, body: { customerId, setAsDefault: true } });
    const end = (await subscriptionOf(platformId)).currentPeriodEnd;
    const clock = (await b.call("GET", "/operator/test-clock", { headers: op })).body.now;
    await advance(end - clock + 60);
    const pastDue = await subscriptionOf(platformId);
    expect(pastDue.status).toBe("past_due");
    const renewal = (await invoicesOf(platformId))[0];
    expect(renewal).toMatchObject({ status: "open", amountPaidCents: 0 });
    for (const [i, day] of RETRY_DAYS.entries()) {
      const previous = RETRY_DAYS[i - 1] ?? 0;
      await advance((day - previous) * 86_400);
      const status = (await subscriptionOf(platformId)).status;
      expect(status, `after the retry of day ${day}`).toBe(i < RETRY_DAYS.length - 1 ? "past_due" : "active");
    }
    const after = await b.call("GET", `/invoices/${renewal.id}?platformId=${platformId}`, { headers: op });
    expect(after.body.status).toBe("uncollectible");
    const sub = await subscriptionOf(platformId);
    expect(sub).toMatchObject({ tier: "free", status: "active" });
    expect(sub.id).not.toBe(pastDue.id);
    expect((await b.call("GET", `/subscriptions/${pastDue.id}`, { headers: op })).body.status).toBe("canceled");
    const charges = (await b.db.execute(`select count(*)::int as n from billing.charges where invoice_id = '${renewal.id}'`)) as any;
    // the renewal and three retries: four attempts, none more
    expect(Number((charges.rows ?? charges)[0].n)).toBe(1 + RETRY_DAYS.length);
  });

  it("retries a past_due renewal at once when a new default card is set, and the subscription is active again", async () => {
    const { platformId } = await b.upgraded("plan_starter");
    const customerId = (await subscriptionOf(platformId)).customerId;
    await b.call("POST", "/payment-methods/pm_card_chargeCustomerFail/attach", { headers: op, body: { customerId, setAsDefault: true } });
    const sub = await subscriptionOf(platformId);
    const clock = (await b.call("GET", "/operator/test-clock", { headers: op })).body.now;
    await advance(sub.currentPeriodEnd - clock + 60);
    expect((await subscriptionOf(platformId)).status).toBe("past_due");
    const fixed = await b.call("POST", "/payment-methods/pm_card_visa/attach", { headers: op, body: { customerId, setAsDefault: true } });
    expect(fixed.status).toBe(200);
    expect((await subscriptionOf(platformId)).status).toBe("active");
    expect((await invoicesOf(platformId))[0]).toMatchObject({ status: "paid", amountPaidCents: 2900 });
  });

  it("starts a trial without charging, keeps it across tier changes, and charges at its end, anchored there", async () => {
    const platformId = await b.newPlatform();
    const free = await subscriptionOf(platformId);
    const trial = await b.call("POST", `/operator/subscriptions/${free.id}/trial`, { headers: op, body: { trialDays: 14 } });
    expect(trial.status).toBe(200);
    expect(trial.body).toMatchObject({ status: "trialing", tier: "starter" });
    // a trial of a platform without a customer returns to free at its end: nobody to charge
    await advance(15 * 86_400);
    expect(await subscriptionOf(platformId)).toMatchObject({ tier: "free", status: "active" });
    expect(await invoicesOf(platformId)).toEqual([]);

    const paid = await b.upgraded("plan_starter");
    const current = await subscriptionOf(paid.platformId);
    const started = await b.call("POST", `/operator/subscriptions/${current.id}/trial`, { headers: op, body: { trialDays: 10 } });
    expect(started.body.status).toBe("trialing");
    const up = await b.call("POST", "/subscription/change-tier", { headers: paid.owner, body: { tier: "growth" } });
    expect(up.body).toMatchObject({ subscription: { tier: "growth", status: "trialing", trialEnd: started.body.trialEnd }, invoice: null });
    await advance(11 * 86_400);
    const after = await subscriptionOf(paid.platformId);
    expect(after).toMatchObject({ tier: "growth", status: "active", billingAnchor: started.body.trialEnd, currentPeriodStart: started.body.trialEnd });
    const last = (await invoicesOf(paid.platformId))[0];
    expect(last).toMatchObject({ status: "paid", periodStart: started.body.trialEnd, subtotalCents: 9900 });
    // the unused paid time given back when the trial started is applied to this first charge
    expect(last.creditAppliedCents).toBeGreaterThan(0);
    expect(last.amountPaidCents).toBe(9900 - last.creditAppliedCents);
  });

  it("a tier change racing the renewal ends in one consistent state: the period renewed once, then the change prorated in the new period", async () => {
    const racers = await Promise.all(Array.from({ length: 4 }, () => b.upgraded("plan_starter")));
    const end = (await subscriptionOf(racers[0]!.platformId)).currentPeriodEnd;
    const clock = (await b.call("GET", "/operator/test-clock", { headers: op })).body.now;
    // billing time moves past the period's end without running anything; then both go at once
    await b.engine.time.advance(end - clock + 3600);
    const answers = await Promise.all([...racers.map(({ owner }) => b.call("POST", "/subscription/change-tier", { headers: owner, body: { tier: "growth" } })), b.ctx.worker.pass()]);
    for (const [i, { platformId }] of racers.entries()) {
      expect((answers[i] as { status: number }).status, platformId).toBe(200);
      const sub = await subscriptionOf(platformId);
      expect(sub).toMatchObject({ tier: "growth", status: "active", currentPeriodStart: end });
      const invoices = await invoicesOf(platformId);
      // the first period, its one renewal at starter's price, and the proration of the new period
      expect(invoices.map((inv) => [inv.periodStart - end, inv.lines[0].kind, inv.status])).toEqual([
        [3600, "proration", "paid"],
        [0, "subscription", "paid"],
        [expect.any(Number), "subscription", "paid"],
      ]);
      expect(invoices[2].periodStart).toBeLessThan(end);
      expect(invoices[1].amountPaidCents).toBe(2900);
      // an hour into the new period: almost all of starter back, almost all of growth charged
      const [credit, charge] = invoices[0].lines.map((l: { amountCents: number }) => l.amountCents);
      const length = sub.currentPeriodEnd - end;
      expect(credit).toBe(-Math.round((2900 * (length - 3600)) / length));
      expect(charge).toBe(Math.round((9900 * (length - 3600)) / length));
    }
  });

  it("charges a renewal once when the replica that made it died before its charge: another replica's next pass charges it", async () => {
    const { platformId, subscription } = await b.upgraded("plan_starter");
    /** a provider whose charge of this customer never answers: the replica dies there */
    class DyingProvider extends LocalProvider {
      override charge(request: ChargeRequest): Promise<ChargeOutcome> {
        return request.customerId === subscription.customerId ? new Promise(() => {}) : super.charge(request);
      }
    }
    const dying = new BillingWorker({ ...b.engine, time: new BillingTime(b.db, b.clock, true), provider: new DyingProvider(b.db, b.clock) }, 60_000, silentLogger());
    const clock = (await b.call("GET", "/operator/test-clock", { headers: op })).body.now;
    await b.engine.time.advance((await subscriptionOf(platformId)).currentPeriodEnd - clock + 60);
    void dying.pass();
    for (let i = 0; i < 200 && (await invoicesOf(platformId)).length < 2; i++) await new Promise((resolve) => setTimeout(resolve, 25));
    const [renewal] = await invoicesOf(platformId);
    expect(renewal).toMatchObject({ status: "open", amountPaidCents: 0 });
    // its lease runs out a minute later; the next pass of a live replica finds the renewal due
    b.clock.advance(61_000);
    await b.ctx.worker.pass();
    const invoices = await invoicesOf(platformId);
    expect(invoices).toHaveLength(2);
    expect(invoices[0]).toMatchObject({ id: renewal.id, status: "paid", amountPaidCents: 2900 });
    expect((await subscriptionOf(platformId)).status).toBe("active");
    const charges = rowsOf<{ n: number }>(await b.db.execute(sql`select count(*)::int as n from billing.charges where invoice_id = ${renewal.id}`));
    expect(Number(charges[0]!.n)).toBe(1);
  });

  it("two replicas' workers on one database invoice each period once", async () => {
    const platforms = await Promise.all(Array.from({ length: 6 }, () => b.upgraded("plan_starter")));
    // the other replica: its own engine (time, provider) on the same database; on PostgreSQL the
    // two go through a pool of connections, so their claims really race in the database
    const replica: Engine = { ...b.engine, time: new BillingTime(b.db, b.clock, true), provider: new LocalProvider(b.db, b.clock) };
    const other = new BillingWorker(replica, 60_000, silentLogger());
    await b.engine.time.advance(3 * 31 * 86_400);
    // both replicas run everything due at once, twice over
    await Promise.all([b.ctx.worker.pass(), other.pass(), b.ctx.worker.pass(), other.pass()]);
    for (const { platformId } of platforms) {
      const invoices = await invoicesOf(platformId);
      const periods = invoices.map((i) => i.periodStart);
      expect(new Set(periods).size, platformId).toBe(periods.length);
      expect(invoices, platformId).toHaveLength(4);
      expect(invoices.every((i) => i.status === "paid")).toBe(true);
    }
    await other.stop();
  });
});
