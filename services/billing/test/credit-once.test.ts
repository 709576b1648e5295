import { eq, inArray } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "@core/storage";
import { balanceLedger, customers, invoices } from "../src/db/schema.js";
import { startBilling, unique, type Billing, type Headers } from "./support/billing.js";

/** Platforms racing at once: enough that, without the customer's lock, some pair interleaves badly. */
const PLATFORMS = 12;
/** The step between the requests' starts: across the platforms they meet the other side's work early, midway and late. */
const STAGGER_MS = 3;
/** The credit each customer holds when the race starts, in cents. */
const CREDIT_CENTS = 1000;

/**
 * One credit is applied once (docs/vault/cross-cutting/security.md, Billing): every read of a
 * customer's balance that pricing applies to an invoice happens under the customer's lock, in the
 * transaction that finalizes the invoice. Each customer holds a credit of $10 when two things that
 * apply it race, one a request over real HTTP, the other the worker of another replica: a tier
 * change against the close of the period before (which invoices its overage), an upgrade against
 * the close of the last paid period, a seat change against the renewal. Whatever the interleaving,
 * the credit applied to the new invoices adds up to at most the credit held, the balance never goes
 * below zero through it, and the ledger agrees with the balance.
 */
describe.each(testDatabases())("one credit applied once on $name", (database) => {
  let b: Billing;
  let http: Awaited<ReturnType<Billing["overHttp"]>>;
  let op: Headers;
  /** while set, the provider verifies a card only once this has settled (a slow attach) */
  let attachWaitsFor: Promise<unknown> | null = null;
  beforeAll(async () => {
    b = await startBilling(database, {}, { localFaults: { beforeAttach: async () => void (await attachWaitsFor) } });
    http = await b.overHttp();
    op = b.as.operator();
  });
  afterAll(() => b?.close());

  const nowSeconds = () => Math.floor(b.clock.now().getTime() / 1000);
  const staggered = async <T>(i: number, send: () => Promise<T>): Promise<T> => {
    await new Promise((resolve) => setTimeout(resolve, (i % 6) * STAGGER_MS));
    return send();
  };

  /** $10 of compute beyond what starter includes, in each platform's current period. */
  async function overage(platformIds: string[]) {
    for (const platformId of platformIds) {
      const usage = await http.call("POST", "/usage/events", { headers: op, body: { events: [{ id: unique("evt"), platformId, meter: "compute_minutes", quantity: 3000, timestamp: nowSeconds() }] } });
      expect(usage.body.accepted).toBe(1);
    }
  }

  /** The clock a minute past the first period's end, and a worker pass: each platform renews (or returns to free); its usage closes an hour later. */
  async function pastPeriodEnd(periodEnd: number) {
    b.clock.advance(periodEnd * 1000 - b.clock.now().getTime() + 60_000);
    await b.ctx.worker.pass();
  }

  /** $10 of operator credit on each customer; answers when, to tell the race's invoices from the earlier ones. */
  async function credited(customerIds: string[]) {
    for (const customerId of customerIds) {
      const r = await http.call("POST", "/operator/credits", { headers: { ...op, "idempotency-key": crypto.randomUUID() }, body: { customerId, amount: CREDIT_CENTS / 100, description: "Goodwill" } });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
    }
    // a second on: what the race makes is created after this, what came before at or before it
    b.clock.advance(2_000);
    return new Date(Math.floor(b.clock.now().getTime() / 1000) * 1000);
  }

  /** The credit of every invoice finalized since `since` adds up to at most the credit held; the balance and the ledger agree. */
  async function expectCreditAppliedOnce(customerIds: string[], since: Date) {
    const made = await b.db.select().from(invoices).where(inArray(invoices.customerId, customerIds));
    const rows = await b.db.select().from(customers).where(inArray(customers.id, customerIds));
    for (const customerId of customerIds) {
      const raced = made.filter((i) => i.customerId === customerId && i.finalizedAt !== null && i.createdAt >= since);
      const applied = raced.reduce((sum, i) => sum + i.creditAppliedCents, 0);
      const balance = rows.find((r) => r.id === customerId)!.balanceCents;
      const ledger = (await b.db.select().from(balanceLedger).where(eq(balanceLedger.customerId, customerId))).reduce((sum, e) => sum + e.amountCents, 0);
      const detail = `${customerId}: ${raced.map((i) => `${i.reason} applied ${i.creditAppliedCents}`).join(", ")}; balance ${balance}`;
      expect(raced.length, detail).toBe(2);
      expect(applied, detail).toBeLessThanOrEqual(CREDIT_CENTS);
      expect(balance, detail).toBe(CREDIT_CENTS - applied);
      expect(ledger, detail).toBe(balance);
    }
  }

  it("a tier change racing the usage close of the period before applies the credit once", async () => {
    const made = await Promise.all(Array.from({ length: PLATFORMS }, () => b.upgraded()));
    await overage(made.map((m) => m.platformId));
    await pastPeriodEnd(made[0]!.subscription.currentPeriodEnd);
    const customerIds = made.map((m) => m.subscription.customerId as string);
    const since = await credited(customerIds);
    // the first periods' usage is due to close: another replica closes it as the tier changes arrive
    b.clock.advance(3_600_000);
    const [, ...changes] = await Promise.all([
      b.replica().app.ctx.worker.pass(),
      ...made.map(({ owner }, i) => staggered(i, () => http.call("POST", "/subscription/change-tier", { headers: { ...owner, "idempotency-key": crypto.randomUUID() }, body: { tier: "growth" } }))),
    ]);
    for (const change of changes) expect(change.status, JSON.stringify(change.body)).toBe(200);
    await b.ctx.worker.pass();
    await expectCreditAppliedOnce(customerIds, since);
  });

  it("an upgrade racing the usage close of the platform's last paid period applies the credit once, however long the card takes", async () => {
    const made = await Promise.all(Array.from({ length: PLATFORMS }, () => b.upgraded()));
    await overage(made.map((m) => m.platformId));
    for (const { owner } of made) expect((await http.call("POST", "/subscription/cancel", { headers: owner, body: {} })).status).toBe(200);
    // the period ends: each platform is on free again, and its last paid period closes an hour later
    await pastPeriodEnd(made[0]!.subscription.currentPeriodEnd);
    const customerIds = made.map((m) => m.subscription.customerId as string);
    const since = await credited(customerIds);
    b.clock.advance(3_600_000);
    // the owners upgrade again; while the provider verifies their cards, another replica closes the periods
    let closed!: () => void;
    attachWaitsFor = new Promise<void>((resolve) => (closed = resolve));
    const upgrades = made.map(({ owner }) =>
      http.call("POST", "/api/billing/upgrade", { headers: owner, body: { planId: "plan_starter", paymentMethodId: "pm_card_visa", billingEmail: "billing@example.com", idempotencyKey: crypto.randomUUID() } }),
    );
    try {
      await b.replica().app.ctx.worker.pass();
    } finally {
      closed();
      attachWaitsFor = null;
    }
    for (const upgrade of await Promise.all(upgrades)) expect(upgrade.status, JSON.stringify(upgrade.body)).toBe(200);
    await b.ctx.worker.pass();
    await expectCreditAppliedOnce(customerIds, since);
  });

  it("the operator audit of credits granted at once names the balance each started from", async () => {
    const { subscription } = await b.upgraded();
    const customerId = subscription.customerId as string;
    const granted = await Promise.all(
      Array.from({ length: 6 }, () => http.call("POST", "/operator/credits", { headers: { ...op, "idempotency-key": crypto.randomUUID() }, body: { customerId, amount: 1, description: "At once" } })),
    );
    for (const r of granted) expect(r.status).toBe(201);
    const audit = (await http.call("GET", "/operator/audit?limit=100", { headers: op })).body.data as { action: string; targetId: string; before: { balanceCents: number }; after: { balanceCents: number } }[];
    const mine = audit.filter((e) => e.action === "credit.grant" && e.targetId === customerId);
    expect(mine).toHaveLength(6);
    for (const entry of mine) expect(entry.after.balanceCents - entry.before.balanceCents).toBe(100);
    expect(mine.map((e) => e.before.balanceCents).sort((x, y) => x - y)).toEqual([0, 100, 200, 300, 400, 500]);
  });

  it("a seat change racing the renewal applies the credit once", async () => {
    const made = await Promise.all(Array.from({ length: PLATFORMS }, () => b.upgraded()));
    const customerIds = made.map((m) => m.subscription.customerId as string);
    const since = await credited(customerIds);
    // every period ends now: another replica renews while the seats are added (charged now, prorated)
    b.clock.advance(made[0]!.subscription.currentPeriodEnd * 1000 - b.clock.now().getTime() + 60_000);
    const [, ...changes] = await Promise.all([
      b.replica().app.ctx.worker.pass(),
      ...made.map(({ subscription }, i) => staggered(i, () => http.call("PATCH", `/subscriptions/${subscription.id}`, { headers: { ...op, "idempotency-key": crypto.randomUUID() }, body: { quantity: 3 } }))),
    ]);
    for (const change of changes) expect(change.status, JSON.stringify(change.body)).toBe(200);
    await b.ctx.worker.pass();
    await expectCreditAppliedOnce(customerIds, since);
  });
});
