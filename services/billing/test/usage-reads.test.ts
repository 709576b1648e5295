import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "@core/storage";
import { sql } from "drizzle-orm";
import { usageAlerts, usageDaily, usageDays, usageEntities, usagePeriods, usageTotals } from "../src/db/schema.js";
import { startBilling, unique, type Answer, type Billing, type Headers } from "./support/billing.js";

/**
 * Table A's usage reads (spec §4.4, DESIGN §6.5), as a read model: each test writes the rollups it
 * reads (daily rows, period totals, the period log) straight into the tables, as ingestion keeps
 * them, so days and periods far apart are quick to set up. metering.test.ts proves the same reads
 * through ingestion.
 */

interface Period {
  start: Date;
  end: Date;
}

const seconds = (d: Date) => Math.floor(d.getTime() / 1000);
const dayOf = (d: Date) => d.toISOString().slice(0, 10);
const cursorOf = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");

/** The periods before a period anchored on the 31st at 10:00 (see START), older ones first. */
const BEFORE_LAST: Period = { start: new Date("2025-11-30T10:00:00Z"), end: new Date("2025-12-31T10:00:00Z") };
const LAST: Period = { start: new Date("2025-12-31T10:00:00Z"), end: new Date("2026-01-31T10:00:00Z") };

const rollup = (platformId: string, period: Period, meter: string, day: string, quantity: string, at: { tenantId?: string; stackId?: string } = {}) => ({
  platformId,
  periodStart: period.start,
  periodEnd: period.end,
  meter,
  day,
  quantity,
  ...at,
});

/** `usage/daily`'s zero series: every day of from..to, both included, times every meter. */
function zeroSeries(from: string, to: string, meters: readonly string[]) {
  const points: { date: string; meter: string; quantity: string }[] = [];
  for (let t = Date.parse(from); t <= Date.parse(to); t += 86_400_000) {
    for (const meter of meters) points.push({ date: dayOf(new Date(t)), meter, quantity: "0" });
  }
  return points;
}

function expectRefusal(answer: Answer, status: number) {
  expect(answer.status).toBe(status);
  expect(answer.body.error).toEqual(expect.objectContaining({ code: expect.any(String), message: expect.any(String) }));
}

describe.each(testDatabases())("usage reads on $name", (database) => {
  let b: Billing;
  let meters: string[];
  let freeIncluded: Record<string, string>;
  beforeAll(async () => {
    b = await startBilling(database);
    const plans = (await b.call("GET", "/plans")).body as { tier: string; included: Record<string, string> }[];
    freeIncluded = plans.find((p) => p.tier === "free")!.included;
    meters = Object.keys(freeIncluded).sort();
  });
  afterAll(() => b?.close());

  /** Rollup rows with the per-day rows, period totals and period log rows ingestion keeps beside them. */
  async function seed(rows: ReturnType<typeof rollup> | ReturnType<typeof rollup>[]) {
    const list = Array.isArray(rows) ? rows : [rows];
    await b.db.insert(usageDaily).values(list.map(({ periodEnd: _end, ...row }) => row));
    for (const row of list) {
      await b.db
        .insert(usageTotals)
        .values({ platformId: row.platformId, periodStart: row.periodStart, meter: row.meter, quantity: row.quantity })
        .onConflictDoUpdate({ target: [usageTotals.platformId, usageTotals.periodStart, usageTotals.meter], set: { quantity: sql`${usageTotals.quantity} + excluded.quantity` } });
      await b.db
        .insert(usageDays)
        .values({ platformId: row.platformId, day: row.day, meter: row.meter, periodStart: row.periodStart, quantity: row.quantity })
        .onConflictDoUpdate({ target: [usageDays.platformId, usageDays.day, usageDays.meter, usageDays.periodStart], set: { quantity: sql`${usageDays.quantity} + excluded.quantity` } });
      await b.db.insert(usagePeriods).values({ platformId: row.platformId, periodStart: row.periodStart, periodEnd: row.periodEnd, tier: "starter", status: "closed" }).onConflictDoNothing();
    }
  }

  /** The platform's current period, as GET /subscription answers it. */
  async function currentPeriod(platformId: string, headers: Headers): Promise<Period> {
    const r = await b.call("GET", `/subscription?platformId=${platformId}`, { headers });
    expect(r.status).toBe(200);
    return { start: new Date(r.body.currentPeriodStart * 1000), end: new Date(r.body.currentPeriodEnd * 1000) };
  }

  /** A starter platform (100000 api_requests included, 0.004 cents each beyond) and its current period. */
  async function starter() {
    const { platformId, owner } = await b.upgraded("plan_starter");
    return { platformId, owner, period: await currentPeriod(platformId, owner) };
  }

  describe("a platform without usage", () => {
    it("answers the free plan's meters with zeros, and empty alerts, summary, history and entities", async () => {
      const platformId = await b.newPlatform();
      const owner = b.as.owner(platformId);
      const period = await currentPeriod(platformId, owner);
      expect(meters).toEqual(["api_requests", "compute_minutes", "storage_gb_hours"]);

      const current = await b.call("GET", `/usage/current?platformId=${platformId}`, { headers: owner });
      expect(current.status).toBe(200);
      expect(current.body).toEqual({
        platformId,
        tenantId: null,
        periodStart: seconds(period.start),
        periodEnd: seconds(period.end),
        meters: meters.map((meter) => ({ meter, quantity: "0", included: freeIncluded[meter], overage: "0", overageCents: 0 })),
        estimatedOverageCents: 0,
      });
      expect((await b.call("GET", `/usage/alerts?platformId=${platformId}`, { headers: owner })).body).toEqual({ data: [] });
      expect((await b.call("GET", `/usage-summary?platformId=${platformId}`, { headers: owner })).body).toEqual({
        platformId,
        periodStart: seconds(period.start),
        periodEnd: seconds(period.end),
        stacks: [],
      });
      expect((await b.call("GET", `/usage/history?platformId=${platformId}`, { headers: owner })).body).toEqual({ data: [], cursor: null });
      expect((await b.call("GET", `/usage/entities?platformId=${platformId}`, { headers: owner })).body).toEqual({ data: [], cursor: null });
    });

    it("answers a stack without usage with zeros and the daily series from the period's first day to today", async () => {
      const platformId = await b.newPlatform();
      const owner = b.as.owner(platformId);
      const period = await currentPeriod(platformId, owner);
      const r = await b.call("GET", `/platforms/${platformId}/stacks/stk_quiet/usage`, { headers: owner });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({
        platformId,
        stackId: "stk_quiet",
        periodStart: seconds(period.start),
        periodEnd: seconds(period.end),
        meters: meters.map((meter) => ({ meter, quantity: "0" })),
        daily: zeroSeries(dayOf(period.start), dayOf(b.clock.now()), meters),
      });
    });
  });

  describe("usage/current", () => {
    it("sums each meter exactly, as decimal strings, across tenants, stacks and days (0.1 ten times is 1)", async () => {
      const { platformId, owner, period } = await starter();
      const tenths = Array.from({ length: 10 }, (_, i) =>
        rollup(platformId, period, "compute_minutes", `2026-02-${String(i + 1).padStart(2, "0")}`, "0.1", { tenantId: i % 2 ? "t1" : "t2", stackId: ["s1", "s2", ""][i % 3] }),
      );
      await seed([...tenths, rollup(platformId, period, "api_requests", "2026-02-03", "100000.5")]);
      const r = await b.call("GET", `/usage/current?platformId=${platformId}`, { headers: owner });
      expect(r.status).toBe(200);
      expect(r.body.meters).toEqual([
        // 0.5 beyond at 0.004 cents is 0.002 cents: rounds to 0
        { meter: "api_requests", quantity: "100000.5", included: "100000", overage: "0.5", overageCents: 0 },
        { meter: "compute_minutes", quantity: "1", included: "1000", overage: "0", overageCents: 0 },
        { meter: "storage_gb_hours", quantity: "0", included: "1000", overage: "0", overageCents: 0 },
      ]);
      expect(r.body.estimatedOverageCents).toBe(0);
    });

    it("prices the overage at the plan's unit price, each meter rounded once half away from zero", async () => {
      const { platformId, owner, period } = await starter();
      await seed([
        rollup(platformId, period, "api_requests", "2026-02-01", "600000"),
        rollup(platformId, period, "api_requests", "2026-02-02", "500000", { tenantId: "t1" }),
        rollup(platformId, period, "compute_minutes", "2026-02-01", "1001"),
        rollup(platformId, period, "storage_gb_hours", "2026-02-01", "1000.000000000001"),
      ]);
      const r = await b.call("GET", `/usage/current?platformId=${platformId}`, { headers: owner });
      expect(r.body.meters).toEqual([
        { meter: "api_requests", quantity: "1100000", included: "100000", overage: "1000000", overageCents: 4000 },
        { meter: "compute_minutes", quantity: "1001", included: "1000", overage: "1", overageCents: 1 },
        { meter: "storage_gb_hours", quantity: "1000.000000000001", included: "1000", overage: "0.000000000001", overageCents: 0 },
      ]);
      expect(r.body.estimatedOverageCents).toBe(4001);
    });

    it("counts only the current period's rows, and only one tenant's with tenantId", async () => {
      const { platformId, owner, period } = await starter();
      await seed([
        rollup(platformId, period, "api_requests", "2026-02-01", "5", { tenantId: "t1" }),
        rollup(platformId, period, "api_requests", "2026-02-01", "7", { tenantId: "t2" }),
        rollup(platformId, period, "api_requests", "2026-02-02", "11"),
        rollup(platformId, LAST, "api_requests", "2026-01-30", "1000", { tenantId: "t1" }),
      ]);
      const apiRequests = async (query: string) => {
        const r = await b.call("GET", `/usage/current?platformId=${platformId}${query}`, { headers: owner });
        expect(r.status).toBe(200);
        return [r.body.tenantId, r.body.meters[0].quantity];
      };
      expect(await apiRequests("")).toEqual([null, "23"]);
      expect(await apiRequests("&tenantId=t1")).toEqual(["t1", "5"]);
      expect(await apiRequests("&tenantId=t_nobody")).toEqual(["t_nobody", "0"]);
    });
  });

  describe("usage/history", () => {
    /** Two closed periods and the open one; history answers the closed ones only. */
    async function withHistory() {
      const { platformId, owner, period } = await starter();
      await seed([
        rollup(platformId, LAST, "storage_gb_hours", "2026-01-02", "0.5"),
        rollup(platformId, LAST, "api_requests", "2026-01-02", "2", { tenantId: "t1" }),
        rollup(platformId, LAST, "api_requests", "2026-01-03", "3", { tenantId: "t2", stackId: "s1" }),
        rollup(platformId, BEFORE_LAST, "compute_minutes", "2025-12-01", "7"),
        rollup(platformId, period, "api_requests", "2026-02-01", "100"),
      ]);
      const rows = [
        { periodStart: seconds(LAST.start), periodEnd: seconds(LAST.end), meter: "api_requests", quantity: "5" },
        { periodStart: seconds(LAST.start), periodEnd: seconds(LAST.end), meter: "storage_gb_hours", quantity: "0.5" },
        { periodStart: seconds(BEFORE_LAST.start), periodEnd: seconds(BEFORE_LAST.end), meter: "compute_minutes", quantity: "7" },
      ];
      return { platformId, owner, rows };
    }

    it("answers one row per closed period and meter, newest period first and meters in name order", async () => {
      const { platformId, owner, rows } = await withHistory();
      const r = await b.call("GET", `/usage/history?platformId=${platformId}`, { headers: owner });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ data: rows, cursor: null });
      const t1 = await b.call("GET", `/usage/history?platformId=${platformId}&tenantId=t1`, { headers: owner });
      expect(t1.body).toEqual({ data: [{ ...rows[0], quantity: "2" }], cursor: null });
    });

    it("pages with limit: limit=1 walks every row once, and the last page's cursor is null", async () => {
      const { platformId, owner, rows } = await withHistory();
      const seen: unknown[] = [];
      let cursor: string | null = null;
      for (let page = 0; page < rows.length; page++) {
        const r: Answer = await b.call("GET", `/usage/history?platformId=${platformId}&limit=1${cursor ? `&cursor=${cursor}` : ""}`, { headers: owner });
        expect(r.status).toBe(200);
        expect(r.body.data).toHaveLength(1);
        seen.push(...r.body.data);
        cursor = r.body.cursor;
        expect(cursor === null).toBe(page === rows.length - 1);
      }
      expect(seen).toEqual(rows);
      const two = await b.call("GET", `/usage/history?platformId=${platformId}&limit=2`, { headers: owner });
      const rest = await b.call("GET", `/usage/history?platformId=${platformId}&limit=2&cursor=${two.body.cursor}`, { headers: owner });
      expect([...two.body.data, ...rest.body.data]).toEqual(rows);
      expect(rest.body.cursor).toBeNull();
    });

    it.each([
      ["not base64url", "not a cursor!"],
      ["not JSON", Buffer.from("not json").toString("base64url")],
      ["a JSON array", cursorOf(["2025-12-31T10:00:00.000Z", "api_requests"])],
      ["a day that does not exist", cursorOf({ k: "2026-02-30T10:00:00.000Z", id: "api_requests" })],
      ["a meter with SQL in it", cursorOf({ k: "2025-12-31T10:00:00.000Z", id: "api_requests' or '1'='1" })],
      ["a usage/entities cursor", cursorOf({ k: "t1", id: "t1" })],
    ])("refuses a cursor that is %s with 400 in the error envelope", async (_, cursor) => {
      const { platformId, owner } = await withHistory();
      expectRefusal(await b.call("GET", `/usage/history?platformId=${platformId}&cursor=${encodeURIComponent(cursor)}`, { headers: owner }), 400);
    });

    it("takes limit from 1 to 100: 0 and 101 are 400", async () => {
      const { platformId, owner } = await withHistory();
      for (const limit of [1, 100]) expect((await b.call("GET", `/usage/history?platformId=${platformId}&limit=${limit}`, { headers: owner })).status).toBe(200);
      for (const limit of [0, 101, 2.5]) expectRefusal(await b.call("GET", `/usage/history?platformId=${platformId}&limit=${limit}`, { headers: owner }), 400);
    });
  });

  describe("usage/daily", () => {
    it("answers every day of from..to, both included, times every meter, zeros included", async () => {
      const { platformId, owner, period } = await starter();
      await seed([
        rollup(platformId, period, "compute_minutes", "2026-02-01", "1.25", { tenantId: "t1", stackId: "s1" }),
        rollup(platformId, period, "compute_minutes", "2026-02-01", "0.75", { tenantId: "t2" }),
        rollup(platformId, period, "api_requests", "2026-02-03", "9", { tenantId: "t1" }),
        // outside from..to on both sides
        rollup(platformId, LAST, "api_requests", "2026-01-29", "100"),
        rollup(platformId, period, "api_requests", "2026-02-04", "100"),
      ]);
      const expected = zeroSeries("2026-01-30", "2026-02-03", meters).map((p) =>
        p.date === "2026-02-01" && p.meter === "compute_minutes" ? { ...p, quantity: "2" } : p.date === "2026-02-03" && p.meter === "api_requests" ? { ...p, quantity: "9" } : p,
      );
      const r = await b.call("GET", `/usage/daily?platformId=${platformId}&from=2026-01-30&to=2026-02-03`, { headers: owner });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ data: expected });
      expect(r.body.data).toHaveLength(5 * 3);
      const t2 = await b.call("GET", `/usage/daily?platformId=${platformId}&tenantId=t2&from=2026-02-01&to=2026-02-01`, { headers: owner });
      expect(t2.body.data).toEqual([
        { date: "2026-02-01", meter: "api_requests", quantity: "0" },
        { date: "2026-02-01", meter: "compute_minutes", quantity: "0.75" },
        { date: "2026-02-01", meter: "storage_gb_hours", quantity: "0" },
      ]);
    });

    it("sums the day a period ends over both periods that share it", async () => {
      const { platformId, owner, period } = await starter();
      const boundary = dayOf(period.start);
      const before: Period = { start: new Date(period.start.getTime() - 31 * 86_400_000), end: period.start };
      await seed([rollup(platformId, before, "api_requests", boundary, "2"), rollup(platformId, period, "api_requests", boundary, "3.5")]);
      const r = await b.call("GET", `/usage/daily?platformId=${platformId}&from=${boundary}&to=${boundary}`, { headers: owner });
      expect(r.body.data[0]).toEqual({ date: boundary, meter: "api_requests", quantity: "5.5" });
      // the period itself counts only its own row
      expect((await b.call("GET", `/usage/current?platformId=${platformId}`, { headers: owner })).body.meters[0].quantity).toBe("3.5");
    });

    it("answers 366 days, both ends counted", async () => {
      const platformId = await b.newPlatform();
      const r = await b.call("GET", `/usage/daily?platformId=${platformId}&from=2026-01-01&to=2027-01-01`, { headers: b.as.owner(platformId) });
      expect(r.status).toBe(200);
      expect(r.body.data).toHaveLength(366 * 3);
      expect(r.body.data.at(-1)).toEqual({ date: "2027-01-01", meter: "storage_gb_hours", quantity: "0" });
    });

    it.each([
      ["from after to", "from=2026-02-02&to=2026-02-01"],
      ["367 days", "from=2026-01-01&to=2027-01-02"],
      ["a day that does not exist", "from=2026-02-01&to=2026-02-30"],
      ["a day without its zeros", "from=2026-2-01&to=2026-02-03"],
      ["a timestamp for a day", "from=2026-02-01T00:00:00Z&to=2026-02-03"],
      ["no from", "to=2026-02-03"],
      ["no to", "from=2026-02-01"],
      ["year 0, which PostgreSQL's dates do not have", "from=0000-01-01&to=0000-01-02"],
      ["a day before 1970", "from=1969-12-31&to=1970-01-01"],
    ])("refuses %s with 400", async (_, range) => {
      const platformId = await b.newPlatform();
      expectRefusal(await b.call("GET", `/usage/daily?platformId=${platformId}&${range}`, { headers: b.as.owner(platformId) }), 400);
    });
  });

  describe("usage/entities, usage/alerts and the per-stack reads", () => {
    it("pages the tenants with usage by tenant id: limit 2, then the rest with a null cursor", async () => {
      const { platformId, owner } = await starter();
      const seen = (day: number) => new Date(Date.UTC(2026, 1, day, 12));
      await b.db.insert(usageEntities).values(
        ["t_c", "t_a", "t_b"].map((tenantId, i) => ({ platformId, tenantId, firstSeenAt: seen(1 + i), lastSeenAt: seen(5 + i) })),
      );
      const entity = (tenantId: string, i: number) => ({ tenantId, firstSeenAt: seconds(seen(1 + i)), lastSeenAt: seconds(seen(5 + i)) });
      const first = await b.call("GET", `/usage/entities?platformId=${platformId}&limit=2`, { headers: owner });
      expect(first.status).toBe(200);
      expect(first.body.data).toEqual([entity("t_a", 1), entity("t_b", 2)]);
      expect(first.body.cursor).toEqual(expect.any(String));
      const rest = await b.call("GET", `/usage/entities?platformId=${platformId}&limit=2&cursor=${first.body.cursor}`, { headers: owner });
      expect(rest.body).toEqual({ data: [entity("t_c", 0)], cursor: null });
      expectRefusal(await b.call("GET", `/usage/entities?platformId=${platformId}&cursor=${cursorOf({ k: 5, id: 5 })}`, { headers: owner }), 400);
      expectRefusal(await b.call("GET", `/usage/entities?platformId=${platformId}&limit=101`, { headers: owner }), 400);
    });

    it("pages tenant ids that are not row ids (acme.prod, zeta:1) with the cursor it gave", async () => {
      const { platformId, owner } = await starter();
      const at = new Date(Date.UTC(2026, 1, 1, 12));
      await b.db.insert(usageEntities).values(["acme.prod", "acme.stage", "zeta:1"].map((tenantId) => ({ platformId, tenantId, firstSeenAt: at, lastSeenAt: at })));
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const page: Answer = await b.call("GET", `/usage/entities?platformId=${platformId}&limit=1${cursor ? `&cursor=${cursor}` : ""}`, { headers: owner });
        expect(page.status).toBe(200);
        seen.push(...page.body.data.map((e: { tenantId: string }) => e.tenantId));
        cursor = page.body.cursor;
      } while (cursor);
      expect(seen).toEqual(["acme.prod", "acme.stage", "zeta:1"]);
      expectRefusal(await b.call("GET", `/usage/entities?platformId=${platformId}&cursor=${cursorOf({ k: "a\u0000b", id: "a\u0000b" })}`, { headers: owner }), 400);
    });

    it("lists the alerts of the current period only, in the order they fired", async () => {
      const { platformId, owner, period } = await starter();
      const at = (hours: number) => new Date(period.start.getTime() + hours * 3_600_000);
      const alert = (id: string, periodStart: Date, thresholdPercent: number, quantity: string, triggeredAt: Date) => ({
        id,
        platformId,
        meter: "api_requests",
        periodStart,
        thresholdPercent,
        quantity,
        included: "100000",
        triggeredAt,
      });
      const [full, eighty, old] = [unique("ual"), unique("ual"), unique("ual")];
      await b.db.insert(usageAlerts).values([
        alert(full, period.start, 100, "100000.5", at(30)),
        alert(eighty, period.start, 80, "80000", at(2)),
        alert(old, LAST.start, 80, "80001", new Date("2026-01-20T00:00:00Z")),
      ]);
      const r = await b.call("GET", `/usage/alerts?platformId=${platformId}`, { headers: owner });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({
        data: [
          { id: eighty, meter: "api_requests", thresholdPercent: 80, quantity: "80000", included: "100000", triggeredAt: seconds(at(2)) },
          { id: full, meter: "api_requests", thresholdPercent: 100, quantity: "100000.5", included: "100000", triggeredAt: seconds(at(30)) },
        ],
      });
    });

    it("answers usage-summary per stack and meter, usage without a stack as stackId null, and one stack's meters and days", async () => {
      const { platformId, owner, period } = await starter();
      const today = dayOf(b.clock.now());
      await seed([
        rollup(platformId, period, "api_requests", today, "4", { stackId: "stk_b", tenantId: "t1" }),
        rollup(platformId, period, "api_requests", today, "0.5", { stackId: "stk_b", tenantId: "t2" }),
        rollup(platformId, period, "storage_gb_hours", today, "2", { stackId: "stk_a" }),
        rollup(platformId, period, "compute_minutes", today, "3"),
        rollup(platformId, LAST, "compute_minutes", "2026-01-15", "99", { stackId: "stk_a" }),
      ]);
      const summary = await b.call("GET", `/usage-summary?platformId=${platformId}`, { headers: owner });
      expect(summary.status).toBe(200);
      expect(summary.body.stacks).toEqual([
        { stackId: null, meters: [{ meter: "compute_minutes", quantity: "3" }] },
        { stackId: "stk_a", meters: [{ meter: "storage_gb_hours", quantity: "2" }] },
        { stackId: "stk_b", meters: [{ meter: "api_requests", quantity: "4.5" }] },
      ]);
      const stack = await b.call("GET", `/platforms/${platformId}/stacks/stk_b/usage`, { headers: owner });
      expect(stack.status).toBe(200);
      expect(stack.body.meters).toEqual([
        { meter: "api_requests", quantity: "4.5" },
        { meter: "compute_minutes", quantity: "0" },
        { meter: "storage_gb_hours", quantity: "0" },
      ]);
      expect(stack.body.daily).toEqual(
        zeroSeries(dayOf(period.start), today, meters).map((p) => (p.date === today && p.meter === "api_requests" ? { ...p, quantity: "4.5" } : p)),
      );
    });
  });

  describe("access", () => {
    it("lets a member (billing:read) read; its own platform is the default where platformId is optional", async () => {
      const { platformId, period } = await starter();
      await seed(rollup(platformId, LAST, "api_requests", "2026-01-02", "8"));
      const member = b.as.member(platformId);
      const current = await b.call("GET", `/usage/current?platformId=${platformId}`, { headers: member });
      expect(current.status).toBe(200);
      expect(current.body.periodStart).toBe(seconds(period.start));
      expect((await b.call("GET", "/usage/history", { headers: member })).body.data).toEqual([
        { periodStart: seconds(LAST.start), periodEnd: seconds(LAST.end), meter: "api_requests", quantity: "8" },
      ]);
      expect((await b.call("GET", "/usage/entities", { headers: member })).status).toBe(200);
    });

    it("answers 404 to the owner of another platform naming this one, on every read", async () => {
      const platformId = await b.newPlatform();
      const stranger = b.as.owner(await b.newPlatform());
      for (const path of [
        `/usage/current?platformId=${platformId}`,
        `/usage/daily?platformId=${platformId}&from=2026-02-01&to=2026-02-01`,
        `/usage/history?platformId=${platformId}`,
        `/usage/entities?platformId=${platformId}`,
        `/usage/alerts?platformId=${platformId}`,
        `/usage-summary?platformId=${platformId}`,
        `/platforms/${platformId}/stacks/stk_1/usage`,
      ]) {
        const r = await b.call("GET", path, { headers: stranger });
        expect(r.status, path).toBe(404);
        expect(r.body.error.code).toBe("NOT_FOUND");
      }
    });

    it("asks an operator to name the platform (400 without platformId), and answers 404 for one that does not exist", async () => {
      const platformId = await b.newPlatform();
      const operator = b.as.operator();
      expectRefusal(await b.call("GET", "/usage/history", { headers: operator }), 400);
      expectRefusal(await b.call("GET", "/usage/entities", { headers: operator }), 400);
      expect((await b.call("GET", `/usage/history?platformId=${platformId}`, { headers: operator })).body).toEqual({ data: [], cursor: null });
      expectRefusal(await b.call("GET", `/usage/current?platformId=${unique("plt_missing")}`, { headers: operator }), 404);
      const service = await b.as.service();
      expect((await b.call("GET", `/usage/current?platformId=${platformId}`, { headers: service })).status).toBe(200);
    });

    it("answers 401 without a credential, and 400 when platformId is missing where it is required", async () => {
      const platformId = await b.newPlatform();
      expectRefusal(await b.call("GET", `/usage/current?platformId=${platformId}`), 401);
      expectRefusal(await b.call("GET", `/usage/history?platformId=${platformId}`), 401);
      const owner = b.as.owner(platformId);
      for (const route of ["/usage/current", "/usage/alerts", "/usage-summary", "/usage/daily?from=2026-02-01&to=2026-02-01"]) {
        expectRefusal(await b.call("GET", route, { headers: owner }), 400);
      }
    });
  });

  it("answers the same under /api/billing", async () => {
    const { platformId, owner, period } = await starter();
    await seed([rollup(platformId, period, "api_requests", "2026-02-01", "100001"), rollup(platformId, LAST, "api_requests", "2026-01-02", "1")]);
    for (const suffix of [
      `/usage/current?platformId=${platformId}`,
      `/usage/daily?platformId=${platformId}&from=2026-01-31&to=2026-02-02`,
      `/usage/history?platformId=${platformId}`,
      `/usage-summary?platformId=${platformId}`,
      `/platforms/${platformId}/stacks/stk_1/usage`,
    ]) {
      const bare = await b.call("GET", suffix, { headers: owner });
      const prefixed = await b.call("GET", `/api/billing${suffix}`, { headers: owner });
      expect(bare.status, suffix).toBe(200);
      expect(prefixed.body, suffix).toEqual(bare.body);
    }
  });
});
