import DecimalJs from "decimal.js";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "@core/storage";
import { DEFAULT_PLANS } from "../src/plans.js";
import { startBilling, unique, type Billing, type Headers } from "./support/billing.js";

/**
 * The exactly-once property (DESIGN §6.5), by fast-check: random batches with duplicates, reused
 * ids, events out of the window, unknown meters and platforms, sent in random order and partly at the
 * same time. Whatever happens, for every platform and meter: the events answered `accepted` = the
 * raw events = the rollups = `usage/current` = what the period's invoice was priced from after the
 * close, and `reconcile` says consistent. Every answer agrees with what is stored: one `accepted`
 * per id, `duplicate` only for the stored content, `ID_REUSED` only for other content.
 */

/** the test's own exact arithmetic: 80 digits, so no sum is rounded (decimal.js rounds to 20 by default) */
const Decimal = DecimalJs.clone({ precision: 80 });
const DAY_S = 86_400;
const METERS = ["api_requests", "compute_minutes", "storage_gb_hours"] as const;
const starter = DEFAULT_PLANS.find((p) => p.tier === "starter")!;

type Slot = "paid" | "free" | "unknown";
type When = "inside" | "ahead" | "old";

interface Draft {
  slot: Slot;
  idNo: number;
  meter: string;
  /** integer units of 10^-scale */
  units: bigint;
  scale: number;
  tenant: number;
  when: When;
  /** seconds into the usable part of the period */
  offset: number;
}

const draft = fc.record({
  slot: fc.constantFrom<Slot>("paid", "paid", "paid", "free", "free", "unknown"),
  idNo: fc.nat(60),
  meter: fc.constantFrom(...METERS, ...METERS, "gpu_hours"),
  units: fc.bigInt(0n, 10n ** 9n),
  scale: fc.integer({ min: 0, max: 12 }),
  tenant: fc.nat(3),
  when: fc.constantFrom<When>("inside", "inside", "inside", "inside", "ahead", "old"),
  offset: fc.nat(9 * DAY_S),
});

/** A run: events in batches, and which batches go out together. */
const run = fc.record({
  drafts: fc.array(draft, { minLength: 1, maxLength: 160 }),
  cuts: fc.array(fc.nat(160), { maxLength: 12 }),
  together: fc.array(fc.boolean(), { minLength: 13, maxLength: 13 }),
  shuffle: fc.array(fc.nat(), { minLength: 160, maxLength: 160 }),
});

const decimal = (units: bigint, scale: number) => new Decimal(units.toString()).dividedBy(new Decimal(10).pow(scale)).toFixed();

describe.each(testDatabases())("exactly once, by property, on $name", (database) => {
  let b: Billing;
  let op: Headers;
  beforeAll(async () => {
    b = await startBilling(database);
    op = b.as.operator();
  });
  afterAll(() => b?.close());

  it("keeps raw events, rollups, usage/current, reconcile and the closing invoice equal, whatever is sent", async () => {
    await fc.assert(
      fc.asyncProperty(run, async ({ drafts, cuts, together, shuffle }) => {
        // two platforms ten days into a period: one paid (its overage is invoiced), one on free
        const { platformId: paid, subscription } = await b.upgraded("plan_starter");
        const free = await b.newPlatform();
        b.clock.advance(10 * DAY_S * 1000);
        const now = Math.floor(b.clock.now().getTime() / 1000);
        const platformOf: Record<Slot, string> = { paid, free, unknown: unique("plt_unknown") };
        const prefix = unique("id");
        const events = drafts.map((d) => ({
          id: `${prefix}-${d.idNo}`,
          platformId: platformOf[d.slot],
          meter: d.meter,
          quantity: d.units % 3n === 0n ? Number(decimal(d.units, d.scale)) : decimal(d.units, d.scale),
          timestamp: d.when === "ahead" ? now + 301 + d.offset : d.when === "old" ? now - 36 * DAY_S - d.offset : now - d.offset,
          tenantId: d.tenant === 0 ? undefined : `tenant-${d.tenant}`,
        }));
        // random order, random batches, some sent at the same time
        const order = events.map((e, i) => ({ e, k: shuffle[i] ?? i })).sort((x, y) => x.k - y.k).map((x) => x.e);
        const bounds = [...new Set([0, ...cuts.map((c) => c % order.length), order.length])].sort((x, y) => x - y);
        const batches = bounds.slice(1).map((end, i) => order.slice(bounds[i], end)).filter((batch) => batch.length > 0);
        const answers: { event: (typeof events)[number]; status: string; code?: string }[] = [];
        for (let i = 0; i < batches.length; ) {
          const group = [batches[i]!];
          while (i + group.length < batches.length && together[i + group.length]) group.push(batches[i + group.length]!);
          const replies = await Promise.all(group.map((batch) => b.call("POST", "/usage/events", { headers: op, body: { events: batch } })));
          replies.forEach((reply, g) => {
            expect(reply.status).toBe(200);
            reply.body.results.forEach((r: { index: number; status: string; code?: string }) => answers.push({ event: group[g]![r.index]!, status: r.status, code: r.code }));
          });
          i += group.length;
        }

        // every answer agrees with what the event is and with the one stored copy of its id
        const stored = new Map<string, (typeof events)[number]>();
        for (const a of answers.filter((x) => x.status === "accepted")) {
          const k = `${a.event.platformId}/${a.event.id}`;
          expect(stored.has(k)).toBe(false);
          stored.set(k, a.event);
        }
        const same = (x: (typeof events)[number], y: (typeof events)[number]) =>
          x.meter === y.meter && x.timestamp === y.timestamp && new Decimal(x.quantity).eq(y.quantity) && (x.tenantId ?? null) === (y.tenantId ?? null);
        for (const a of answers) {
          const first = stored.get(`${a.event.platformId}/${a.event.id}`);
          if (a.status === "duplicate") expect(first && same(first, a.event)).toBe(true);
          if (a.code === "ID_REUSED") expect(first && !same(first, a.event)).toBe(true);
          if (a.code === "UNKNOWN_PLATFORM") expect(a.event.platformId).toBe(platformOf.unknown);
          if (a.code === "UNKNOWN_METER") expect(a.event.meter).toBe("gpu_hours");
          if (a.code === "OUT_OF_WINDOW") expect(a.event.timestamp > now + 300 || a.event.timestamp < now - 35 * DAY_S).toBe(true);
          if (a.status === "accepted") expect(a.event.platformId !== platformOf.unknown && a.event.meter !== "gpu_hours" && a.event.timestamp <= now + 300 && a.event.timestamp >= now - 35 * DAY_S).toBe(true);
          expect(["accepted", "duplicate", "ID_REUSED", "UNKNOWN_PLATFORM", "UNKNOWN_METER", "OUT_OF_WINDOW"]).toContain(a.code ?? a.status);
        }
        // an event that could be counted was counted: its id is stored
        for (const a of answers) if (a.code === undefined) expect(stored.has(`${a.event.platformId}/${a.event.id}`)).toBe(true);

        const expected = (platformId: string) =>
          Object.fromEntries(METERS.map((m) => [m, [...stored.values()].filter((e) => e.platformId === platformId && e.meter === m).reduce((sum, e) => sum.plus(e.quantity), new Decimal(0)).toFixed()]));
        for (const platformId of [paid, free]) {
          const current = (await b.call("GET", `/usage/current?platformId=${platformId}`, { headers: op })).body;
          expect(Object.fromEntries(current.meters.map((m: { meter: string; quantity: string }) => [m.meter, m.quantity]))).toEqual(expected(platformId));
          const recount = (await b.call("GET", `/operator/usage/reconcile?platformId=${platformId}`, { headers: op })).body;
          expect(recount.consistent).toBe(true);
          expect(Object.fromEntries(recount.meters.map((m: { meter: string; events: string }) => [m.meter, m.events]))).toEqual(expected(platformId));
        }

        // the period closes: the invoice's overage is priced from exactly those totals
        b.clock.set(new Date((subscription.currentPeriodEnd + 3600 + 1) * 1000));
        await b.ctx.worker.pass();
        const recount = (await b.call("GET", `/operator/usage/reconcile?platformId=${paid}&periodStart=${subscription.currentPeriodStart}`, { headers: op })).body;
        expect(recount).toMatchObject({ status: "closed", consistent: true });
        expect(Object.fromEntries(recount.meters.map((m: { meter: string; invoiced: string }) => [m.meter, m.invoiced]))).toEqual(expected(paid));
        const invoices = (await b.call("GET", `/invoices?platformId=${paid}`, { headers: op })).body.data;
        const usageLines = invoices.flatMap((i: { lines: { kind: string }[] }) => i.lines.filter((l) => l.kind === "usage"));
        const overage = METERS.map((m) => ({ meter: m, beyond: Decimal.max(new Decimal(expected(paid)[m]!).minus(starter.included[m]!), 0) })).filter((o) => o.beyond.gt(0));
        const billable = overage.map((o) => ({ ...o, cents: o.beyond.times(starter.overageUnitCents[o.meter]!).toDecimalPlaces(0, DecimalJs.ROUND_HALF_UP).toNumber() }));
        if (billable.some((o) => o.cents > 0)) {
          expect(usageLines.map((l: { meter: string; quantity: string; amountCents: number }) => [l.meter, l.quantity, l.amountCents])).toEqual(billable.map((o) => [o.meter, o.beyond.toFixed(), o.cents]));
        } else {
          expect(usageLines).toEqual([]);
        }
      }),
      // no shrinking: every run moves the clock a month, so a long shrink would outlast the test; the seed and the case are printed
      { numRuns: 12, endOnFailure: true },
    );
  }, 240_000);
});
