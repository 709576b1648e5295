/**
 * Stripe's proration (DESIGN §6.3): to the second, in integer cents, each line rounded half away
 * from zero, over the period's real length (February is shorter than March). Exact: BigInt, never floats.
 */
export function roundHalfAwayFromZero(numerator: bigint, denominator: bigint): bigint {
  const negative = numerator < 0n;
  const n = negative ? -numerator : numerator;
  const rounded = (2n * n + denominator) / (2n * denominator);
  return negative ? -rounded : rounded;
}

/** `round(price × remaining / period)`, half away from zero. */
export function prorate(priceCents: number, remainingSeconds: number, periodSeconds: number): number {
  if (periodSeconds <= 0) return 0;
  return Number(roundHalfAwayFromZero(BigInt(Math.round(priceCents)) * BigInt(Math.round(remainingSeconds)), BigInt(Math.round(periodSeconds))));
}

const SHORT_MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const dayText = (d: Date) => `${d.getUTCDate()} ${SHORT_MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()}`;

export interface ProrationLine {
  description: string;
  amountCents: number;
  periodStart: Date;
  periodEnd: Date;
}

/**
 * The two lines of a change from one price to another at `at`: the unused time on the old price
 * credited (never more than `creditableCents`, what was charged for the period and not yet given
 * back) and the remaining time on the new price charged.
 */
export function prorationLines(input: {
  fromName: string;
  fromPriceCents: number;
  toName: string;
  toPriceCents: number;
  periodStart: Date;
  periodEnd: Date;
  at: Date;
  creditableCents: number;
}): { lines: ProrationLine[]; creditCents: number; chargeCents: number; totalCents: number } {
  const at = new Date(Math.floor(input.at.getTime() / 1000) * 1000);
  const periodSeconds = Math.floor((input.periodEnd.getTime() - input.periodStart.getTime()) / 1000);
  const remaining = Math.max(Math.floor((input.periodEnd.getTime() - at.getTime()) / 1000), 0);
  const creditCents = Math.max(Math.min(prorate(input.fromPriceCents, remaining, periodSeconds), input.creditableCents), 0);
  const chargeCents = prorate(input.toPriceCents, remaining, periodSeconds);
  const span = { periodStart: at, periodEnd: input.periodEnd };
  return {
    lines: [
      { description: `Unused time on ${input.fromName} after ${dayText(at)}`, amountCents: -creditCents, ...span },
      { description: `Remaining time on ${input.toName} after ${dayText(at)}`, amountCents: chargeCents, ...span },
    ],
    creditCents,
    chargeCents,
    totalCents: chargeCents - creditCents,
  };
}
