/**
 * Billing periods (DESIGN §6.3, Stripe's rule): period n runs from anchor + n months to
 * anchor + n+1 months, each bound computed from the anchor and clamped to its month's length, at the
 * anchor's UTC time of day. All dates are UTC.
 */

export interface BillingPeriod {
  index: number;
  start: Date;
  end: Date;
}

/** Days in a month of the proleptic Gregorian calendar; `month` is 0-based. */
function daysInMonth(year: number, month: number): number {
  if (month === 1) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return month === 3 || month === 5 || month === 8 || month === 10 ? 30 : 31;
}

function assertValidDate(date: Date, name: string): void {
  if (Number.isNaN(date.getTime())) throw new RangeError(`${name} is an invalid Date`);
}

function assertIndex(value: number, name: string): void {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`${name} must be an integer ≥ 0, got ${value}`);
}

/**
 * `anchor` moved `months` calendar months forward, the day clamped to the target month's length and
 * the UTC time of day kept (DESIGN §6.3: 31 January + 1 month is 29 February in a leap year).
 */
export function addMonthsClamped(anchor: Date, months: number): Date {
  assertValidDate(anchor, "anchor");
  assertIndex(months, "months");
  const monthCount = anchor.getUTCMonth() + months;
  const year = anchor.getUTCFullYear() + Math.floor(monthCount / 12);
  const month = monthCount % 12;
  const day = Math.min(anchor.getUTCDate(), daysInMonth(year, month));
  // setUTCFullYear rather than Date.UTC: Date.UTC reads years 0-99 as 1900-1999
  const result = new Date(anchor.getTime());
  result.setUTCFullYear(year, month, day);
  return result;
}

/**
 * Period `index` of a subscription anchored at `anchor`. Both bounds come from the anchor, never from
 * the previous period's end (DESIGN §6.3), so a clamped February does not shorten every later period.
 */
export function periodOf(anchor: Date, index: number): BillingPeriod {
  assertIndex(index, "index");
  return { index, start: addMonthsClamped(anchor, index), end: addMonthsClamped(anchor, index + 1) };
}

/**
 * The period with start ≤ at < end; before the anchor, period 0 (DESIGN §6.3).
 *
 * Period n starts in calendar month (anchor's month + n), so n = the months between the anchor and
 * `at` starts in `at`'s month: it ends in the next month, after `at`, and if it starts later in that
 * month than `at`, period n − 1 (which starts in the previous month) holds `at`. One step at most.
 */
export function periodAt(anchor: Date, at: Date): BillingPeriod {
  assertValidDate(anchor, "anchor");
  assertValidDate(at, "at");
  if (at.getTime() < anchor.getTime()) return periodOf(anchor, 0);
  const monthsBetween = (at.getUTCFullYear() - anchor.getUTCFullYear()) * 12 + (at.getUTCMonth() - anchor.getUTCMonth());
  const index = addMonthsClamped(anchor, monthsBetween).getTime() > at.getTime() ? monthsBetween - 1 : monthsBetween;
  return periodOf(anchor, index);
}
