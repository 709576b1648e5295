import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "drizzle-orm";
import { silentLogger } from "@core/kit";
import { rowsOf, testDatabases } from "@core/storage";
import { BillingTime } from "../src/billing-time.js";
import type { Engine } from "../src/engine.js";
import { pruneUsageEvents } from "../src/metering/retention.js";
import { LocalProvider } from "../src/provider/local.js";
import { BillingWorker } from "../src/renewals.js";
import { startBilling, unique, type Answer, type Billing, type Headers } from "./support/billing.js";

/**
 * Usage metering end to end (DESIGN §6.5): events through `POST /usage/events`, read back through
 * table A's usage routes, closed into an invoice by the worker, recounted by reconcile.
 */

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const seconds = (d: Date) => Math.floor(d.getTime() / 1000);

interface Event {
  id: string;
  platformId: string;
  meter: string;
  quantity: number | string;
  timestamp: number | string;
  tenantId?: string | null;
  stackId?: string | null;
}

describe.each(testDatabases())("usage metering on $name", (database) => {
  let b: Billing;
  let op: Headers;
  beforeAll(async () => {
    b = await startBilling(database);
    op = b.as.operator();
  });
  afterAll(() => b?.close());

  const now = () => seconds(b.clock.now());
  const event = (platformId: string, overrides: Partial<Event> = {}): Event => ({ id: unique("evt"), platformId, meter: "api_requests", quantity: 1, timestamp: now() - 60, ...overrides });
  const send = (events: unknown[], headers: Headers = op, path = "/usage/events"): Promise<Answer> => b.call("POST", path, { headers, body: { events } });
  const statuses = (answer: Answer) => answer.body.results.map((r: { status: string; code?: string }) => r.code ?? r.status);
  const current = async (platformId: string, query = "") => (await b.call("GET", `/usage/current?platformId=${platformId}${query}`, { headers: op })).body;
  const quantityOf = async (platformId: string, meter = "api_requests") => (await current(platformId)).meters.find((m: { meter: string }) => m.meter === meter).quantity;
  const reconcile = async (platformId: string, periodStart?: number) =>
    (await b.call("GET", `/operator/usage/reconcile?platformId=${platformId}${periodStart === undefined ? "" : `&periodStart=${periodStart}`}`, { headers: op })).body;
  /** time passes and the worker does what fell due: renewals, closes, charges, retention, alert mail */
  const elapse = async (ms: number) => {
    b.clock.advance(ms);
    await b.ctx.worker.pass();
  };

  describe("exactly once", () => {
    it("accepts a batch, answers a re-sent batch with duplicates and counts it once", async () => {
      const platformId = await b.newPlatform();
      const events = Array.from({ length: 10 }, () => event(platformId, { quantity: 0.1 }));
      const first = await send(events);
      expect(first.status).toBe(200);
      expect(first.body).toEqual({ accepted: 10, duplicates: 0, rejected: 0, results: events.map((e, index) => ({ index, id: e.id, status: "accepted" })) });
      const again = await send(events);
      expect(again.body).toEqual({ accepted: 0, duplicates: 10, rejected: 0, results: events.map((e, index) => ({ index, id: e.id, status: "duplicate" })) });
      // ten events of 0.1 make exactly 1
      expect(await quantityOf(platformId)).toBe("1");
    });

    it("knows the same event however its quantity and timestamp are written", async () => {
      const platformId = await b.newPlatform();
      const at = now() - 120;
      const original = event(platformId, { quantity: "2.50", timestamp: at });
      expect(statuses(await send([original]))).toEqual(["accepted"]);
      const sameEvent = [
        { ...original, quantity: 2.5 },
        { ...original, quantity: "2.5000" },
        { ...original, timestamp: new Date(at * 1000).toISOString() },
        { ...original, timestamp: new Date(at * 1000).toISOString().replace("Z", "+00:00") },
        { ...original, tenantId: null },
      ];
      expect(statuses(await send(sameEvent))).toEqual(["duplicate", "duplicate", "duplicate", "duplicate", "duplicate"]);
      expect(await quantityOf(platformId)).toBe("2.5");
    });

    it("rejects an id counted before with other content as ID_REUSED, and changes nothing", async () => {
      const platformId = await b.newPlatform();
      const original = event(platformId, { quantity: 3, tenantId: "t1" });
      await send([original]);
      const reused = [
        { ...original, quantity: 4 },
        { ...original, tenantId: "t2" },
        { ...original, stackId: "s1" },
        { ...original, meter: "compute_minutes" },
        { ...original, timestamp: (original.timestamp as number) - 1 },
      ];
      const answer = await send(reused);
      expect(statuses(answer)).toEqual(["ID_REUSED", "ID_REUSED", "ID_REUSED", "ID_REUSED", "ID_REUSED"]);
      expect(answer.body.results[0].message).toContain(original.id);
      expect(await quantityOf(platformId)).toBe("3");
      expect(await quantityOf(platformId, "compute_minutes")).toBe("0");
    });

    it("treats an id twice in one batch as its first report: the same event is a duplicate, other content ID_REUSED", async () => {
      const platformId = await b.newPlatform();
      const e = event(platformId, { quantity: 5 });
      const answer = await send([e, { ...e }, { ...e, quantity: 6 }]);
      expect(statuses(answer)).toEqual(["accepted", "duplicate", "ID_REUSED"]);
      expect(answer.body).toMatchObject({ accepted: 1, duplicates: 1, rejected: 1 });
      expect(await quantityOf(platformId)).toBe("5");
    });

    it("lets a later report of an id count when the first one in the batch was refused: refused is not counted", async () => {
      const platformId = await b.newPlatform();
      const id = unique("evt");
      const answer = await send([event(platformId, { id, timestamp: now() + 3600 }), event(platformId, { id, meter: "gpu_hours" }), event(platformId, { id, quantity: 4 }), event(platformId, { id, quantity: 4 })]);
      expect(statuses(answer)).toEqual(["OUT_OF_WINDOW", "UNKNOWN_METER", "accepted", "duplicate"]);
      expect(await quantityOf(platformId)).toBe("4");
    });

    it("keeps ids per platform: the same id on two platforms is two events", async () => {
      const [p1, p2] = [await b.newPlatform(), await b.newPlatform()];
      const id = unique("shared");
      expect(statuses(await send([event(p1, { id }), event(p2, { id, quantity: 7 })]))).toEqual(["accepted", "accepted"]);
      expect([await quantityOf(p1), await quantityOf(p2)]).toEqual(["1", "7"]);
    });

    it("answers the same under /api/billing, and an event sent through one prefix is a duplicate through the other", async () => {
      const platformId = await b.newPlatform();
      const e = event(platformId);
      expect(statuses(await send([e], op, "/api/billing/usage/events"))).toEqual(["accepted"]);
      expect(statuses(await send([e]))).toEqual(["duplicate"]);
    });

    it("counts eight concurrent batches with overlapping ids exactly once each, without deadlock", async () => {
      const platformId = await b.newPlatform();
      // 8 batches of 200 over 600 ids: every id in about three batches, in different orders
      const pool = Array.from({ length: 600 }, (_, i) => event(platformId, { id: `ov-${i}`, quantity: "0.001", tenantId: `t${i % 7}`, stackId: `s${i % 3}`, meter: ["api_requests", "compute_minutes"][i % 2]! }));
      const batches = Array.from({ length: 8 }, (_, k) => Array.from({ length: 200 }, (_, j) => pool[(k * 75 + j * 7) % 600]!).reverse());
      const answers = await Promise.all(batches.map((batch) => send(batch)));
      for (const answer of answers) expect(answer.status).toBe(200);
      const accepted = answers.reduce((sum, a) => sum + a.body.accepted, 0);
      const distinct = new Set(batches.flat().map((e) => e.id));
      expect(accepted).toBe(distinct.size);
      expect(answers.reduce((sum, a) => sum + a.body.duplicates, 0)).toBe(8 * 200 - distinct.size);
      const perMeter = (meter: string) => [...distinct].filter((id) => pool.find((e) => e.id === id)!.meter === meter).length / 1000;
      expect(await quantityOf(platformId)).toBe(String(perMeter("api_requests")));
      expect(await quantityOf(platformId, "compute_minutes")).toBe(String(perMeter("compute_minutes")));
      expect((await reconcile(platformId)).consistent).toBe(true);
    });
  });

  describe("each event on its own", () => {
    it.each([
      ["a negative quantity", { quantity: -1 }, "quantity must not be negative"],
      ["13 decimal places", { quantity: "0.0000000000001" }, "at most 12 decimal places"],
      ["a float with 17 digits", { quantity: 0.30000000000000004 }, "at most 12 decimal places"],
      ["an exponent in a string", { quantity: "1e3" }, "plain decimal"],
      ["a quantity of 10^20", { quantity: "100000000000000000000" }, "below 10^20"],
      ["a boolean quantity", { quantity: true }, "quantity"],
      ["no meter", { meter: undefined }, "meter"],
      ["an empty id", { id: "" }, "id"],
      ["an id of 129 characters", { id: "x".repeat(129) }, "id"],
      ["a tenant with a control character", { tenantId: "acme\u0007" }, "control characters"],
      ["a stack of 129 characters", { stackId: "s".repeat(129) }, "stackId"],
      ["a date without a time", { timestamp: "2026-01-31" }, "timestamp"],
      ["a time without an offset", { timestamp: "2026-01-31T09:00:00" }, "timestamp"],
      ["milliseconds for seconds", { timestamp: Date.now() * 1000 }, "timestamp"],
      ["an unknown field", { properties: { a: 1 } }, 'Unknown field "properties"'],
    ])("rejects %s with VALIDATION_ERROR and keeps the rest of the batch", async (_, change, message) => {
      const platformId = await b.newPlatform();
      const bad = { ...event(platformId), ...change };
      const good = event(platformId);
      const answer = await send([good, bad, good.id === bad.id ? event(platformId) : { ...good, id: unique("evt") }]);
      expect(answer.status).toBe(200);
      expect(answer.body.results[1]).toEqual({ index: 1, id: typeof bad.id === "string" && bad.id.length >= 1 && bad.id.length <= 128 ? bad.id : null, status: "rejected", code: "VALIDATION_ERROR", message: expect.stringContaining(message) });
      expect(answer.body).toMatchObject({ accepted: 2, rejected: 1 });
      expect(await quantityOf(platformId)).toBe("2");
    });

    it("refuses the whole batch with 400 when a string holds U+0000, which no database keeps (the shared input screen)", async () => {
      const platformId = await b.newPlatform();
      const r = await send([event(platformId), event(platformId, { tenantId: "a\u0000b" })]);
      expect(r.status).toBe(400);
      expect(r.body.error.details).toEqual([expect.objectContaining({ path: "events.1.tenantId" })]);
      expect(await quantityOf(platformId)).toBe("0");
    });

    it("rejects an event that is not an object, with a null id", async () => {
      const platformId = await b.newPlatform();
      const answer = await send([5, null, "evt", [event(platformId)], event(platformId)]);
      expect(statuses(answer)).toEqual(["VALIDATION_ERROR", "VALIDATION_ERROR", "VALIDATION_ERROR", "VALIDATION_ERROR", "accepted"]);
      expect(answer.body.results.slice(0, 4).map((r: { id: unknown }) => r.id)).toEqual([null, null, null, null]);
    });

    it("rejects an unknown meter and an unknown platform by name", async () => {
      const platformId = await b.newPlatform();
      const answer = await send([event(platformId, { meter: "gpu_hours" }), event("plt_nobody"), event(platformId)]);
      expect(statuses(answer)).toEqual(["UNKNOWN_METER", "UNKNOWN_PLATFORM", "accepted"]);
      expect(answer.body.results[0].message).toContain("api_requests, compute_minutes, storage_gb_hours");
    });

    it("takes a timestamp up to 5 minutes ahead (counted now) and 35 days old; beyond either is OUT_OF_WINDOW", async () => {
      const platformId = await b.newPlatform();
      const t = now();
      const answer = await send([
        event(platformId, { timestamp: t + 299 }),
        event(platformId, { timestamp: t + 301 }),
        event(platformId, { timestamp: t - 35 * 86_400 + 60 }),
        event(platformId, { timestamp: t - 35 * 86_400 - 1 }),
      ]);
      expect(statuses(answer)).toEqual(["accepted", "OUT_OF_WINDOW", "accepted", "OUT_OF_WINDOW"]);
      expect(await quantityOf(platformId)).toBe("2");
    });

    it("answers a re-sent event that fell out of the window since as a duplicate, not as rejected", async () => {
      const platformId = await b.newPlatform();
      const old = event(platformId, { timestamp: now() - 35 * 86_400 + 30 });
      expect(statuses(await send([old]))).toEqual(["accepted"]);
      b.clock.advance(60_000);
      expect(statuses(await send([old, { ...old, quantity: 9 }]))).toEqual(["duplicate", "OUT_OF_WINDOW"]);
    });

    it("refuses a batch of 0 or 1001 events, or one that is not { events: [...] }, with 400 and keeps nothing", async () => {
      const platformId = await b.newPlatform();
      const over = Array.from({ length: 1001 }, () => event(platformId));
      for (const body of [{ events: [] }, { events: over }, { events: event(platformId) }, [event(platformId)], { events: [event(platformId)], extra: 1 }]) {
        const r = await b.call("POST", "/usage/events", { headers: op, body });
        expect(r.status).toBe(400);
        expect(r.body.error.code).toBe("VALIDATION_ERROR");
      }
      expect(await quantityOf(platformId)).toBe("0");
      const full = await send(over.slice(0, 1000));
      expect(full.body.accepted).toBe(1000);
    });

    it("is for services and operators: a tenant's owner is 403, no credential 401", async () => {
      const platformId = await b.newPlatform();
      expect((await send([event(platformId)], await b.as.service())).status).toBe(200);
      const owner = await send([event(platformId)], b.as.owner(platformId));
      expect(owner.status).toBe(403);
      expect((await send([event(platformId)], {})).status).toBe(401);
      expect(await quantityOf(platformId)).toBe("1");
    });
  });

  describe("reads see a batch as soon as it is answered", () => {
    it("answers current, daily, summary, the stack's usage and the tenants from what was ingested", async () => {
      const { platformId } = await b.upgraded("plan_starter");
      const today = new Date(b.clock.now().getTime()).toISOString().slice(0, 10);
      await send([
        event(platformId, { quantity: 4, tenantId: "t1", stackId: "stk_b" }),
        event(platformId, { quantity: "0.5", tenantId: "t2", stackId: "stk_b" }),
        event(platformId, { meter: "storage_gb_hours", quantity: 2, stackId: "stk_a" }),
        event(platformId, { meter: "compute_minutes", quantity: 3 }),
      ]);
      expect((await current(platformId)).meters.map((m: { quantity: string }) => m.quantity)).toEqual(["4.5", "3", "2"]);
      expect((await current(platformId, "&tenantId=t2")).meters[0].quantity).toBe("0.5");
      const daily = await b.call("GET", `/usage/daily?platformId=${platformId}&from=${today}&to=${today}`, { headers: op });
      expect(daily.body.data).toEqual([
        { date: today, meter: "api_requests", quantity: "4.5" },
        { date: today, meter: "compute_minutes", quantity: "3" },
        { date: today, meter: "storage_gb_hours", quantity: "2" },
      ]);
      const summary = await b.call("GET", `/usage-summary?platformId=${platformId}`, { headers: op });
      expect(summary.body.stacks).toEqual([
        { stackId: null, meters: [{ meter: "compute_minutes", quantity: "3" }] },
        { stackId: "stk_a", meters: [{ meter: "storage_gb_hours", quantity: "2" }] },
        { stackId: "stk_b", meters: [{ meter: "api_requests", quantity: "4.5" }] },
      ]);
      const stack = await b.call("GET", `/platforms/${platformId}/stacks/stk_b/usage`, { headers: op });
      expect(stack.body.meters[0]).toEqual({ meter: "api_requests", quantity: "4.5" });
      const tenants = await b.call("GET", `/usage/entities?platformId=${platformId}`, { headers: op });
      expect(tenants.body.data.map((t: { tenantId: string }) => t.tenantId)).toEqual(["t1", "t2"]);
    });
  });

  describe("alerts", () => {
    it("fires 80 % and 100 % once each, by the batch that crosses them, and mails the billing email", async () => {
      const { platformId } = await b.upgraded("plan_starter"); // 100000 api_requests included
      const mailed = b.mails.length;
      await send([event(platformId, { quantity: 79_999 })]);
      expect((await b.call("GET", `/usage/alerts?platformId=${platformId}`, { headers: op })).body.data).toEqual([]);
      await send([event(platformId, { quantity: 1 })]);
      await send([event(platformId, { quantity: 5 })]);
      await send([event(platformId, { quantity: 30_000 })]);
      await send([event(platformId, { quantity: 30_000 })]);
      const alerts = (await b.call("GET", `/usage/alerts?platformId=${platformId}`, { headers: op })).body.data;
      expect(alerts).toEqual([
        { id: expect.any(String), meter: "api_requests", thresholdPercent: 80, quantity: "80000", included: "100000", triggeredAt: now() },
        { id: expect.any(String), meter: "api_requests", thresholdPercent: 100, quantity: "110005", included: "100000", triggeredAt: now() },
      ]);
      await b.ctx.mail.drain();
      const mails = b.mails.slice(mailed).filter((m) => m.subject.startsWith("Usage alert") && m.text.includes(platformId));
      expect(mails.map((m) => [m.to, m.subject])).toEqual([
        ["billing@example.com", "Usage alert: api_requests reached 80% of what your plan includes"],
        ["billing@example.com", "Usage alert: api_requests reached 100% of what your plan includes"],
      ]);
    });

    it("fires a threshold once when concurrent batches cross it together", async () => {
      const { platformId } = await b.upgraded("plan_starter");
      await Promise.all(Array.from({ length: 6 }, () => send([event(platformId, { quantity: 20_000 })])));
      const alerts = (await b.call("GET", `/usage/alerts?platformId=${platformId}`, { headers: op })).body.data;
      expect(alerts.map((a: { thresholdPercent: number }) => a.thresholdPercent)).toEqual([80, 100]);
    });

    it("keeps an alert whose mail failed and mails it on a later pass", async () => {
      const { platformId } = await b.upgraded("plan_starter");
      b.mailer.mailFails = true;
      try {
        await send([event(platformId, { quantity: 85_000 })]);
        await b.ctx.mail.drain();
      } finally {
        b.mailer.mailFails = false;
      }
      const alertsOf = () => b.mails.filter((m) => m.subject.startsWith("Usage alert") && m.text.includes(platformId));
      expect(alertsOf()).toEqual([]);
      // the wait after a failure is on the wall clock, which the manual clock drives
      b.clock.advance(3 * 60_000);
      await b.ctx.mail.drain();
      expect(alertsOf()).toHaveLength(1);
    });
  });

  describe("period close", () => {
    it("invoices the overage when the grace ends and charges it; a late event inside the grace is on it, after it PERIOD_CLOSED", async () => {
      const { platformId, subscription } = await b.upgraded("plan_starter"); // 100000 included, 0.004 cents beyond
      const periodEnd = new Date(subscription.currentPeriodEnd * 1000);
      await send([event(platformId, { quantity: 100_000 }), event(platformId, { meter: "compute_minutes", quantity: "1000.5" })]);
      // the period ends and renews; its usage stays open for the grace (an hour)
      b.clock.set(new Date(periodEnd.getTime() + 10 * 60_000));
      await b.ctx.worker.pass();
      const late = event(platformId, { quantity: 250_000, timestamp: seconds(periodEnd) - 30 });
      expect(statuses(await send([late, event(platformId, { quantity: 7 })]))).toEqual(["accepted", "accepted"]);
      expect(await quantityOf(platformId)).toBe("7");
      // the grace ends: the period closes and its usage invoice is charged
      await elapse(HOUR);
      const invoices = (await b.call("GET", `/invoices?platformId=${platformId}`, { headers: op })).body.data;
      const usage = invoices.find((i: { lines: { kind: string }[] }) => i.lines.some((l) => l.kind === "usage"));
      expect(usage).toMatchObject({ status: "paid", periodStart: subscription.currentPeriodStart, periodEnd: seconds(periodEnd), subtotalCents: 1000 + 0 });
      expect(usage.lines).toEqual([
        expect.objectContaining({ kind: "usage", meter: "api_requests", quantity: "250000", unitAmountCents: "0.004", amountCents: 1000, description: "API requests: 350,000 used, 100,000 included" }),
        expect.objectContaining({ kind: "usage", meter: "compute_minutes", quantity: "0.5", unitAmountCents: "0.5", amountCents: 0 }),
      ]);
      // after the grace: closed, but a re-sent counted event is still a duplicate
      const after = await send([event(platformId, { timestamp: seconds(periodEnd) - 60 }), late]);
      expect(statuses(after)).toEqual(["PERIOD_CLOSED", "duplicate"]);
      const recount = await reconcile(platformId, subscription.currentPeriodStart);
      expect(recount).toMatchObject({ status: "closed", invoiceId: usage.id, consistent: true });
      expect(recount.meters[0]).toEqual({ meter: "api_requests", events: "350000", rollups: "350000", invoiced: "350000" });
    });

    it("closes a period without overage, and a free platform's, without an invoice", async () => {
      const { platformId, subscription } = await b.upgraded("plan_starter");
      const free = await b.newPlatform();
      await send([event(platformId, { quantity: 10 }), event(free, { quantity: 50_000 })]);
      const freePeriod = (await current(free)).periodStart;
      b.clock.set(new Date(subscription.currentPeriodEnd * 1000 + 2 * HOUR));
      await b.ctx.worker.pass();
      const invoices = (await b.call("GET", `/invoices?platformId=${platformId}`, { headers: op })).body.data;
      expect(invoices.filter((i: { lines: { kind: string }[] }) => i.lines.some((l) => l.kind === "usage"))).toEqual([]);
      expect(await reconcile(platformId, subscription.currentPeriodStart)).toMatchObject({ status: "closed", invoiceId: null, consistent: true });
      const freeRecount = await reconcile(free, freePeriod);
      expect(freeRecount).toMatchObject({ status: "closed", invoiceId: null, consistent: true });
      expect(freeRecount.meters[0]).toEqual({ meter: "api_requests", events: "50000", rollups: "50000", invoiced: "50000" });
    });

    it("keeps usage before an upgrade from free in the free period, and after it in the paid one", async () => {
      const platformId = await b.newPlatform();
      const free = await current(platformId);
      await send([event(platformId, { quantity: 10 })]);
      b.clock.advance(HOUR);
      const owner = b.as.owner(platformId);
      const upgraded = await b.call("POST", "/api/billing/upgrade", { headers: owner, body: { planId: "plan_growth", paymentMethodId: "pm_card_visa", billingEmail: "billing@example.com", idempotencyKey: crypto.randomUUID() } });
      expect(upgraded.body).toMatchObject({ subscription: { tier: "growth" } });
      // stamped before the upgrade, sent after it: the free period, which the upgrade ended
      const before = event(platformId, { quantity: 5, timestamp: now() - 1800 });
      expect(statuses(await send([before, event(platformId, { quantity: 3, timestamp: now() })]))).toEqual(["accepted", "accepted"]);
      expect(await quantityOf(platformId)).toBe("3");
      const freeRecount = await reconcile(platformId, free.periodStart);
      expect(freeRecount).toMatchObject({ periodEnd: upgraded.body.subscription.currentPeriodStart, consistent: true });
      expect(freeRecount.meters[0].events).toBe("15");
    });

    it("recounts from one snapshot: consistent while batches commit around it", async () => {
      const platformId = await b.newPlatform();
      const batches = Array.from({ length: 12 }, () => Array.from({ length: 100 }, () => event(platformId, { quantity: "0.5" })));
      let sending = true;
      const sent = (async () => {
        for (const batch of batches) expect((await send(batch)).status).toBe(200);
        sending = false;
      })();
      const recounts: boolean[] = [];
      while (sending) {
        recounts.push((await reconcile(platformId)).consistent);
        // in process on PGlite nothing here waits on the network: let the event loop serve other I/O
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      await sent;
      expect(recounts.length).toBeGreaterThan(0);
      expect(recounts.every(Boolean)).toBe(true);
      expect(await quantityOf(platformId)).toBe("600");
    });

    it("answers 404 for a period that does not exist and a platform that does not, and 403 to a tenant", async () => {
      const platformId = await b.newPlatform();
      expect((await b.call("GET", `/operator/usage/reconcile?platformId=${platformId}&periodStart=12345`, { headers: op })).status).toBe(404);
      expect((await b.call("GET", `/operator/usage/reconcile?platformId=plt_nobody`, { headers: op })).status).toBe(404);
      expect((await b.call("GET", `/operator/usage/reconcile?platformId=${platformId}`, { headers: b.as.owner(platformId) })).status).toBe(403);
      expect((await b.call("GET", `/operator/usage/reconcile?platformId=${platformId}&periodStart=abc`, { headers: op })).status).toBe(400);
    });
  });

  describe("two replicas on one database", () => {
    it("close each period once and invoice its overage once, however their workers race", async () => {
      const paid = await Promise.all(Array.from({ length: 4 }, () => b.upgraded("plan_starter")));
      for (const { platformId } of paid) await send([event(platformId, { quantity: 150_000 })]);
      // the other replica: its own engine on the same database (on PostgreSQL through the pool, so the claims race)
      const replica: Engine = { ...b.engine, time: new BillingTime(b.db, b.clock, false), provider: new LocalProvider(b.db, b.clock) };
      const other = new BillingWorker(replica, 60_000, silentLogger());
      b.clock.set(new Date(paid[0]!.subscription.currentPeriodEnd * 1000 + 2 * HOUR));
      await Promise.all([b.ctx.worker.pass(), other.pass(), b.ctx.worker.pass(), other.pass()]);
      await other.stop();
      for (const { platformId, subscription } of paid) {
        const invoices = (await b.call("GET", `/invoices?platformId=${platformId}`, { headers: op })).body.data;
        const usage = invoices.filter((i: { lines: { kind: string }[] }) => i.lines.some((l) => l.kind === "usage"));
        expect(usage.map((i: { status: string; totalCents: number }) => [i.status, i.totalCents])).toEqual([["paid", 200]]);
        expect(await reconcile(platformId, subscription.currentPeriodStart)).toMatchObject({ status: "closed", invoiceId: usage[0].id, consistent: true });
      }
    });

    it("prune different events, never one twice: the tallies add up to what was deleted", async () => {
      const platformId = await b.newPlatform();
      const periodStart = (await current(platformId)).periodStart;
      for (let k = 0; k < 6; k++) await send(Array.from({ length: 1000 }, () => event(platformId, { quantity: "0.25", timestamp: now() - 10 })));
      b.clock.advance(36 * DAY);
      const later = b.clock.now();
      const pruned = await Promise.all([pruneUsageEvents(b.db, later), pruneUsageEvents(b.db, later), pruneUsageEvents(b.db, later)]);
      // other tests' old events go too; this platform's are all gone, each counted once in the tallies
      expect(pruned.reduce((sum, n) => sum + n, 0)).toBeGreaterThanOrEqual(6000);
      const [left] = rowsOf<{ n: string | number }>(await b.db.execute(sql`select count(*) as n from billing.usage_events where platform_id = ${platformId}`));
      expect(Number(left!.n)).toBe(0);
      const [tally] = rowsOf<{ events: string | number; quantity: string }>(
        await b.db.execute(sql`select events, quantity::text as quantity from billing.usage_pruned where platform_id = ${platformId} and meter = 'api_requests'`),
      );
      expect([Number(tally!.events), Number(tally!.quantity)]).toEqual([6000, 1500]);
      const recount = await reconcile(platformId, periodStart);
      expect(recount.meters[0]).toMatchObject({ events: "1500", rollups: "1500" });
    });
  });

  describe("retention", () => {
    it("prunes raw events 35 days and 5 minutes after their timestamp, and reconcile still counts them", async () => {
      const platformId = await b.newPlatform();
      const periodStart = (await current(platformId)).periodStart;
      const e = event(platformId, { quantity: "1.5", timestamp: now() - 10 });
      await send([e]);
      const stored = async () => rowsOf<{ n: string | number }>(await b.db.execute(sql`select count(*) as n from billing.usage_events where platform_id = ${platformId}`))[0]!.n;
      expect(Number(await stored())).toBe(1);
      await elapse(35 * DAY);
      expect(Number(await stored())).toBe(1);
      await elapse(10 * 60_000);
      expect(Number(await stored())).toBe(0);
      const recount = await reconcile(platformId, periodStart);
      expect(recount.consistent).toBe(true);
      expect(recount.meters[0]).toMatchObject({ events: "1.5", rollups: "1.5" });
      // the id is forgotten only once a copy could no longer be counted
      expect(statuses(await send([e]))).toEqual(["OUT_OF_WINDOW"]);
    });
  });
});
