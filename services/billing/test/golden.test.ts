import { describe, expect, it } from "vitest";
import { addMonthsClamped, periodAt, periodOf } from "../src/periods.js";
import { prorate, prorationLines, roundHalfAwayFromZero } from "../src/proration.js";

// Golden tables for DESIGN §6.3: period bounds for every anchor day over several years, and proration
// to the cent, each checked against an independent computation written here. The oracle counts days
// with the 146 097-day Gregorian cycle (H. Hinnant's days_from_civil) instead of the module's leap-year
// test and Date setters, and rounds with BigInt quotient and remainder instead of the module's
// (2n + d) / 2d. Mismatches are collected and reported together so a failure names anchor and n.

const SECOND = 1000;
const DAY_SECONDS = 86_400;

/** Days from 1970-01-01 to a proleptic Gregorian date (month 1-12), from the 400-year cycle. */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const monthFromMarch = (month + 9) % 12;
  const dayOfYear = Math.floor((153 * monthFromMarch + 2) / 5) + day - 1;
  const dayOfEra = yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear;
  return era * 146_097 + dayOfEra - 719_468;
}

/** A month's length as the distance between its first day and the next month's first day. */
function monthLength(year: number, month: number): number {
  return month === 12 ? daysFromCivil(year + 1, 1, 1) - daysFromCivil(year, 12, 1) : daysFromCivil(year, month + 1, 1) - daysFromCivil(year, month, 1);
}

interface Civil {
  year: number;
  month: number;
  day: number;
  secondOfDay: number;
}

const epochMs = (c: Civil) => (daysFromCivil(c.year, c.month, c.day) * DAY_SECONDS + c.secondOfDay) * SECOND;

/** anchor + n months, every bound from the anchor, the day clamped to the target month (DESIGN §6.3). */
function expectedBound(anchor: Civil, n: number): number {
  const months = anchor.year * 12 + (anchor.month - 1) + n;
  const year = Math.floor(months / 12);
  const month = (months % 12) + 1;
  return epochMs({ year, month, day: Math.min(anchor.day, monthLength(year, month)), secondOfDay: anchor.secondOfDay });
}

const iso = (ms: number) => new Date(ms).toISOString();
const at = (text: string) => new Date(text);

/** mulberry32: a fixed-seed generator, so the "random" instants are the same on every run. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** Reports the first mismatches with the total, so one failing run shows what is wrong. */
function expectNoMismatch(mismatches: string[], checked: number): void {
  expect(mismatches.slice(0, 25), `${mismatches.length} of ${checked} checks failed`).toEqual([]);
  expect(checked).toBeGreaterThan(0);
}

// 2024 and 2028 are leap years; 2000 is (divisible by 400), 2100 is not (divisible by 100 only).
const YEARS = [1999, 2000, 2023, 2024, 2025, 2026, 2027, 2028, 2029, 2099, 2100];
// periodAt is checked on fewer years, to stay fast: a leap year, a common year, 2000 and 2100
const PERIOD_AT_YEARS = [2000, 2024, 2026, 2100];
// anchors at 10:00:00 and 23:59:59 UTC: a bound that loses the time of day cannot pass
const SECONDS_OF_DAY = [10 * 3600, DAY_SECONDS - 1];
const LAST_INDEX = 40;

function anchorsOf(year: number): Civil[] {
  const anchors: Civil[] = [];
  for (let month = 1; month <= 12; month++)
    for (let day = 1; day <= monthLength(year, month); day++)
      for (const secondOfDay of SECONDS_OF_DAY) anchors.push({ year, month, day, secondOfDay });
  return anchors;
}

describe("billing periods, golden table (DESIGN §6.3)", () => {
  it("the test's own calendar agrees with known dates and month lengths", () => {
    expect(daysFromCivil(1970, 1, 1)).toBe(0);
    expect(daysFromCivil(2000, 1, 1)).toBe(10_957);
    expect(daysFromCivil(2000, 3, 1)).toBe(11_017);
    expect(daysFromCivil(2024, 2, 29)).toBe(19_782);
    expect(daysFromCivil(2026, 1, 31)).toBe(20_484);
    expect(daysFromCivil(2100, 3, 1)).toBe(47_541);
    const lengths = (year: number) => Array.from({ length: 12 }, (_, i) => monthLength(year, i + 1));
    expect(lengths(2026)).toEqual([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]);
    expect(lengths(2024)[1]).toBe(29);
    expect(lengths(2028)[1]).toBe(29);
    expect(lengths(2000)[1]).toBe(29);
    expect(lengths(2100)[1]).toBe(28);
    expect(lengths(2099)[1]).toBe(28);
    expect(epochMs({ year: 2026, month: 2, day: 28, secondOfDay: 36_000 })).toBe(Date.parse("2026-02-28T10:00:00Z"));
  });

  it.each(YEARS)("bounds periods 0-40 of every anchor day of %i from the anchor, clamped, at the anchor's time of day", (year) => {
    const mismatches: string[] = [];
    let checked = 0;
    for (const anchor of anchorsOf(year)) {
      const anchorDate = new Date(epochMs(anchor));
      const a = iso(anchorDate.getTime());
      let previousEnd = anchorDate.getTime();
      for (let n = 0; n <= LAST_INDEX; n++) {
        const period = periodOf(anchorDate, n);
        const start = period.start.getTime();
        const end = period.end.getTime();
        const wantStart = expectedBound(anchor, n);
        const wantEnd = expectedBound(anchor, n + 1);
        checked += 6;
        if (period.index !== n) mismatches.push(`anchor ${a} n=${n}: index ${period.index}`);
        if (start !== wantStart) mismatches.push(`anchor ${a} n=${n}: start ${iso(start)}, expected ${iso(wantStart)}`);
        if (end !== wantEnd) mismatches.push(`anchor ${a} n=${n}: end ${iso(end)}, expected ${iso(wantEnd)}`);
        if (start !== previousEnd) mismatches.push(`anchor ${a} n=${n}: start ${iso(start)} is not the end of period n-1 ${iso(previousEnd)}`);
        const secondOfDay = (((end / SECOND) % DAY_SECONDS) + DAY_SECONDS) % DAY_SECONDS;
        if (secondOfDay !== anchor.secondOfDay) mismatches.push(`anchor ${a} n=${n}: end ${iso(end)} is not at the anchor's time of day`);
        const moved = addMonthsClamped(anchorDate, n + 1).getTime();
        if (moved !== wantEnd) mismatches.push(`anchor ${a}: addMonthsClamped(+${n + 1}) ${iso(moved)}, expected ${iso(wantEnd)}`);
        previousEnd = end;
      }
      // the anchor itself is never changed by the calls
      if (anchorDate.getTime() !== epochMs(anchor)) mismatches.push(`anchor ${a} was mutated`);
    }
    expectNoMismatch(mismatches, checked);
  });

  it.each([
    // DESIGN §6.3's own example, and where computing from the previous end would give 28 March and 28 April
    ["2026-01-31T10:00:00Z", 0, "2026-01-31T10:00:00.000Z", "2026-02-28T10:00:00.000Z"],
    ["2026-01-31T10:00:00Z", 1, "2026-02-28T10:00:00.000Z", "2026-03-31T10:00:00.000Z"],
    ["2026-01-31T10:00:00Z", 2, "2026-03-31T10:00:00.000Z", "2026-04-30T10:00:00.000Z"],
    ["2026-01-31T10:00:00Z", 3, "2026-04-30T10:00:00.000Z", "2026-05-31T10:00:00.000Z"],
    ["2026-01-31T10:00:00Z", 12, "2027-01-31T10:00:00.000Z", "2027-02-28T10:00:00.000Z"],
    ["2024-01-31T10:00:00Z", 0, "2024-01-31T10:00:00.000Z", "2024-02-29T10:00:00.000Z"],
    ["2024-01-31T10:00:00Z", 1, "2024-02-29T10:00:00.000Z", "2024-03-31T10:00:00.000Z"],
    ["2024-02-29T10:00:00Z", 0, "2024-02-29T10:00:00.000Z", "2024-03-29T10:00:00.000Z"],
    ["2024-02-29T10:00:00Z", 11, "2025-01-29T10:00:00.000Z", "2025-02-28T10:00:00.000Z"],
    ["2024-02-29T10:00:00Z", 12, "2025-02-28T10:00:00.000Z", "2025-03-29T10:00:00.000Z"],
    ["2024-02-29T10:00:00Z", 48, "2028-02-29T10:00:00.000Z", "2028-03-29T10:00:00.000Z"],
    ["2026-01-30T10:00:00Z", 0, "2026-01-30T10:00:00.000Z", "2026-02-28T10:00:00.000Z"],
    ["2026-01-30T10:00:00Z", 1, "2026-02-28T10:00:00.000Z", "2026-03-30T10:00:00.000Z"],
    ["2026-01-29T23:59:59Z", 0, "2026-01-29T23:59:59.000Z", "2026-02-28T23:59:59.000Z"],
    ["2026-01-29T23:59:59Z", 1, "2026-02-28T23:59:59.000Z", "2026-03-29T23:59:59.000Z"],
    ["2026-03-31T10:00:00Z", 0, "2026-03-31T10:00:00.000Z", "2026-04-30T10:00:00.000Z"],
    ["2026-03-31T10:00:00Z", 1, "2026-04-30T10:00:00.000Z", "2026-05-31T10:00:00.000Z"],
    ["2026-12-31T23:59:59Z", 1, "2027-01-31T23:59:59.000Z", "2027-02-28T23:59:59.000Z"],
    ["2000-01-31T10:00:00Z", 0, "2000-01-31T10:00:00.000Z", "2000-02-29T10:00:00.000Z"],
    ["2100-01-31T10:00:00Z", 0, "2100-01-31T10:00:00.000Z", "2100-02-28T10:00:00.000Z"],
    ["2100-01-31T10:00:00Z", 1, "2100-02-28T10:00:00.000Z", "2100-03-31T10:00:00.000Z"],
    ["2099-12-31T10:00:00Z", 1, "2100-01-31T10:00:00.000Z", "2100-02-28T10:00:00.000Z"],
    ["2100-02-28T10:00:00Z", 0, "2100-02-28T10:00:00.000Z", "2100-03-28T10:00:00.000Z"],
  ] as const)("anchor %s, period %i runs from %s to %s", (anchor, n, start, end) => {
    const period = periodOf(at(anchor), n);
    expect({ index: period.index, start: period.start.toISOString(), end: period.end.toISOString() }, `anchor ${anchor} n=${n}`).toEqual({ index: n, start, end });
  });

  it.each(PERIOD_AT_YEARS)("periodAt(anchor, at) of every anchor day of %i holds at: start included, end excluded, period 0 before the anchor", (year) => {
    const random = seeded(year);
    const mismatches: string[] = [];
    let checked = 0;
    const check = (anchorDate: Date, instant: number, want: number, why: string) => {
      checked++;
      const got = periodAt(anchorDate, new Date(instant)).index;
      if (got !== want) mismatches.push(`anchor ${iso(anchorDate.getTime())} at ${iso(instant)} (${why}): period ${got}, expected ${want}`);
    };
    for (const anchor of anchorsOf(year)) {
      const anchorDate = new Date(epochMs(anchor));
      check(anchorDate, anchorDate.getTime() - 1, 0, "1 ms before the anchor");
      check(anchorDate, anchorDate.getTime() - 40 * DAY_SECONDS * SECOND, 0, "40 days before the anchor");
      for (let n = 0; n <= LAST_INDEX; n++) {
        const start = expectedBound(anchor, n);
        const end = expectedBound(anchor, n + 1);
        // the end of period n is checked as the start of period n + 1
        check(anchorDate, start, n, "the start");
        check(anchorDate, start + Math.floor(random() * (end - start)), n, "inside");
        check(anchorDate, end - 1, n, "1 ms before the end");
      }
      check(anchorDate, expectedBound(anchor, LAST_INDEX + 1), LAST_INDEX + 1, "the end");
    }
    expectNoMismatch(mismatches, checked);
  });
});

/** round(price × remaining / period), half away from zero: BigInt quotient, then the remainder against half the divisor. */
function expectedShare(price: number, remaining: number, period: number): number {
  const numerator = BigInt(price) * BigInt(remaining);
  const divisor = BigInt(period);
  const negative = numerator < 0n;
  const magnitude = negative ? -numerator : numerator;
  const quotient = magnitude / divisor;
  const rounded = 2n * (magnitude % divisor) >= divisor ? quotient + 1n : quotient;
  return Number(negative ? -rounded : rounded);
}

// periods of every length a month gives: 28 and 29 days in February, 30 and 31 days
const PERIODS = {
  feb2026: { label: "28-day February 2026", anchor: "2026-01-31T10:00:00Z", n: 0, start: "2026-01-31T10:00:00Z", end: "2026-02-28T10:00:00Z", days: 28 },
  feb2026late: { label: "28-day period from 28 February 2026", anchor: "2026-01-28T23:59:59Z", n: 1, start: "2026-02-28T23:59:59Z", end: "2026-03-28T23:59:59Z", days: 28 },
  feb2024: { label: "29-day February 2024", anchor: "2024-01-31T10:00:00Z", n: 0, start: "2024-01-31T10:00:00Z", end: "2024-02-29T10:00:00Z", days: 29 },
  feb2000: { label: "29-day February 2000", anchor: "2000-01-01T10:00:00Z", n: 1, start: "2000-02-01T10:00:00Z", end: "2000-03-01T10:00:00Z", days: 29 },
  feb2100: { label: "28-day February 2100", anchor: "2099-12-01T10:00:00Z", n: 2, start: "2100-02-01T10:00:00Z", end: "2100-03-01T10:00:00Z", days: 28 },
  apr2026: { label: "30-day April 2026", anchor: "2026-01-31T10:00:00Z", n: 2, start: "2026-03-31T10:00:00Z", end: "2026-04-30T10:00:00Z", days: 30 },
  mar2026: { label: "31-day March 2026", anchor: "2026-03-01T10:00:00Z", n: 0, start: "2026-03-01T10:00:00Z", end: "2026-04-01T10:00:00Z", days: 31 },
  may2026: { label: "31-day May 2026 after a clamped April", anchor: "2026-01-31T10:00:00Z", n: 3, start: "2026-04-30T10:00:00Z", end: "2026-05-31T10:00:00Z", days: 31 },
  dec2026: { label: "31-day period over the new year", anchor: "2026-12-15T23:59:59Z", n: 0, start: "2026-12-15T23:59:59Z", end: "2027-01-15T23:59:59Z", days: 31 },
};
type PeriodKey = keyof typeof PERIODS;

// the default plans (free, starter, growth, scale) and odd prices that make every rounding visible
const PRICES = [0, 1, 3, 999, 2900, 9900, 12345, 49900];

function lines(key: PeriodKey, changeAt: Date, fromPriceCents: number, toPriceCents: number, creditableCents = fromPriceCents) {
  const p = PERIODS[key];
  return prorationLines({ fromName: "Old", fromPriceCents, toName: "New", toPriceCents, periodStart: at(p.start), periodEnd: at(p.end), at: changeAt, creditableCents });
}

describe("proration, golden table (DESIGN §6.3)", () => {
  it.each(Object.values(PERIODS))("the $label is a period of anchor $anchor, $days days long", (p) => {
    const period = periodOf(at(p.anchor), p.n);
    expect(period.start.getTime(), p.label).toBe(at(p.start).getTime());
    expect(period.end.getTime(), p.label).toBe(at(p.end).getTime());
    expect((period.end.getTime() - period.start.getTime()) / SECOND).toBe(p.days * DAY_SECONDS);
  });

  it.each([
    // key, change at, from, to, credit, charge: the remaining fraction worked out by hand
    ["feb2026", "2026-02-14T10:00:00Z", 2900, 9900, 1450, 4950], // 14/28 left: exactly half
    ["feb2026", "2026-02-14T10:00:00Z", 9900, 49900, 4950, 24950],
    ["feb2024", "2024-02-14T10:00:00Z", 2900, 9900, 1500, 5121], // 15/29 left: 1500, 5120.69
    ["feb2024", "2024-02-14T22:00:00Z", 2900, 9900, 1450, 4950], // 14.5/29 left: exactly half
    ["apr2026", "2026-04-14T10:00:00Z", 2900, 9900, 1547, 5280], // 16/30 left: 1546.67, 5280
    ["mar2026", "2026-03-15T10:00:00Z", 2900, 9900, 1590, 5429], // 17/31 left: 1590.32, 5429.03
    ["mar2026", "2026-03-16T22:00:00Z", 2900, 9900, 1450, 4950], // 15.5/31 left: exactly half
    ["mar2026", "2026-03-01T10:00:00Z", 2900, 9900, 2900, 9900], // at the start: the whole period
    ["mar2026", "2026-04-01T09:59:59Z", 2900, 49900, 0, 0], // 1 s left of 2 678 400: 0.001, 0.019
    ["feb2026", "2026-02-28T09:59:59Z", 49900, 49900, 0, 0], // 1 s of 2 419 200: 0.0206
    ["feb2026", "2026-02-14T10:00:00Z", 1, 3, 1, 2], // ties: 0.5 → 1, 1.5 → 2, away from zero
    ["feb2026", "2026-02-14T09:59:59Z", 1, 3, 1, 2], // 1 s more than half left: 0.50000041, 1.5000012
    ["feb2026", "2026-02-14T10:00:01Z", 1, 3, 0, 1], // 1 s less than half left: 0.49999959, 1.4999988
  ] as const)("%s, change at %s from %i to %i cents: credit %i, charge %i", (key, changeAt, from, to, credit, charge) => {
    const r = lines(key, at(changeAt), from, to);
    const row = `${key} at ${changeAt} ${from}→${to}`;
    expect(r.creditCents, row).toBe(credit);
    expect(r.chargeCents, row).toBe(charge);
    expect(r.totalCents, row).toBe(charge - credit);
    expect(r.lines.map((l) => l.amountCents + 0), row).toEqual([-credit + 0, charge]);
    expect(periodAt(at(PERIODS[key].anchor), at(changeAt)).index, row).toBe(PERIODS[key].n);
  });

  it("names the lines as Stripe does, each spanning from the change to the period end", () => {
    const p = PERIODS.feb2026;
    const r = prorationLines({ fromName: "Starter", fromPriceCents: 2900, toName: "Growth", toPriceCents: 9900, periodStart: at(p.start), periodEnd: at(p.end), at: at("2026-02-14T10:00:00Z"), creditableCents: 2900 });
    expect(r.lines).toEqual([
      { description: "Unused time on Starter after 14 Feb 2026", amountCents: -1450, periodStart: at("2026-02-14T10:00:00Z"), periodEnd: at(p.end) },
      { description: "Remaining time on Growth after 14 Feb 2026", amountCents: 4950, periodStart: at("2026-02-14T10:00:00Z"), periodEnd: at(p.end) },
    ]);
  });

  it("rounds half away from zero on both sides: the credit line of a half cent is -1, never -0", () => {
    expect([roundHalfAwayFromZero(1n, 2n), roundHalfAwayFromZero(-1n, 2n)]).toEqual([1n, -1n]);
    expect([roundHalfAwayFromZero(3n, 2n), roundHalfAwayFromZero(-3n, 2n)]).toEqual([2n, -2n]);
    expect([roundHalfAwayFromZero(5n, 2n), roundHalfAwayFromZero(-5n, 2n)]).toEqual([3n, -3n]);
    expect([roundHalfAwayFromZero(1n, 3n), roundHalfAwayFromZero(-1n, 3n), roundHalfAwayFromZero(-2n, 3n)]).toEqual([0n, 0n, -1n]);
    const p = PERIODS.feb2026;
    const half = (p.days * DAY_SECONDS) / 2;
    expect(prorate(1, half, p.days * DAY_SECONDS)).toBe(1);
    expect(prorate(1, half - 1, p.days * DAY_SECONDS)).toBe(0);
    expect(lines("feb2026", at("2026-02-14T10:00:00Z"), 1, 0).lines[0]?.amountCents).toBe(-1);
  });

  it("stays exact where floating point would see a tie: 99 999 999 999 cents × 1 504 009 s / 28 days", () => {
    // 150 400 899 998 495 991 / 2 419 200 = 62 169 684 192 remainder 1 209 591, just under half (1 209 600);
    // in doubles the quotient is 62 169 684 192.5 and Math.round gives …193
    expect(expectedShare(99_999_999_999, 1_504_009, 2_419_200)).toBe(62_169_684_192);
    expect(prorate(99_999_999_999, 1_504_009, 2_419_200)).toBe(62_169_684_192);
    const r = lines("feb2026", at("2026-02-11T00:13:11Z"), 99_999_999_999, 99_999_999_999);
    expect([r.creditCents, r.chargeCents]).toEqual([62_169_684_192, 62_169_684_192]);
  });

  it("roundHalfAwayFromZero agrees with quotient and remainder for every numerator -3000..3000 over divisors 1-40", () => {
    const mismatches: string[] = [];
    let checked = 0;
    for (let d = 1; d <= 40; d++)
      for (let n = -3000; n <= 3000; n++) {
        checked++;
        const got = roundHalfAwayFromZero(BigInt(n), BigInt(d));
        const want = BigInt(expectedShare(n, 1, d));
        if (got !== want) mismatches.push(`${n}/${d}: ${got}, expected ${want}`);
      }
    expectNoMismatch(mismatches, checked);
  });

  it.each(Object.keys(PERIODS) as PeriodKey[])("prorates every price pair to the cent at many seconds of the %s period, the credit capped by creditableCents", (key) => {
    const p = PERIODS[key];
    const start = at(p.start).getTime();
    const end = at(p.end).getTime();
    const periodSeconds = p.days * DAY_SECONDS;
    const half = periodSeconds / 2;
    const random = seeded(periodSeconds + p.n);
    const offsets = [0, 1, 2, 59, 3600, half - 1, half, half + 1, periodSeconds - 3600, periodSeconds - 2, periodSeconds - 1, periodSeconds];
    for (let i = 0; i < 10; i++) offsets.push(Math.floor(random() * periodSeconds));
    const mismatches: string[] = [];
    let checked = 0;
    for (const offset of offsets) {
      const changeAt = start + offset * SECOND;
      const remaining = periodSeconds - offset;
      for (const from of PRICES)
        for (const to of PRICES) {
          const fullCredit = expectedShare(from, remaining, periodSeconds);
          const charge = expectedShare(to, remaining, periodSeconds);
          // what was paid for the period, less one cent than the credit, nothing, part of the price
          const caps = [from, fullCredit - 1, 0, Math.floor(random() * (from + 1))];
          for (const cap of caps) {
            const credit = Math.max(Math.min(fullCredit, cap), 0);
            const r = lines(key, new Date(changeAt), from, to, cap);
            const row = `${p.label} at ${iso(changeAt)} (${remaining}/${periodSeconds} s left) ${from}→${to} creditable ${cap}`;
            checked++;
            const got = [r.creditCents, r.chargeCents, r.totalCents, r.lines[0]?.amountCents, r.lines[1]?.amountCents];
            const want = [credit, charge, charge - credit, -credit, charge];
            if (got.some((v, i) => v !== want[i])) mismatches.push(`${row}: [credit, charge, total, line 1, line 2] ${got.join(", ")}, expected ${want.join(", ")}`);
            if (r.lines.length !== 2 || r.lines.some((l) => l.periodStart.getTime() !== changeAt || l.periodEnd.getTime() !== end)) mismatches.push(`${row}: not two lines from the change to the period end`);
          }
          checked++;
          if (prorate(to, remaining, periodSeconds) !== charge) mismatches.push(`${p.label}: prorate(${to}, ${remaining}, ${periodSeconds}) ${prorate(to, remaining, periodSeconds)}, expected ${charge}`);
        }
    }
    expectNoMismatch(mismatches, checked);
  });
});
