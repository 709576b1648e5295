import Decimal from "decimal.js";

/** Exact decimals for money and usage (DESIGN §2, §6.2): a private clone, rounding half away from zero. */
const Exact = Decimal.clone({ precision: 80, rounding: Decimal.ROUND_HALF_UP, toExpNeg: -100, toExpPos: 100 });

/** ISO 4217 minor units of the currencies billing knows. */
export const MINOR_UNITS: Readonly<Record<string, number>> = {
  usd: 2, eur: 2, gbp: 2, cad: 2, aud: 2, chf: 2, sek: 2, nok: 2, dkk: 2, pln: 2, czk: 2, inr: 2, brl: 2, mxn: 2, sgd: 2, hkd: 2, nzd: 2, zar: 2,
  jpy: 0, krw: 0, vnd: 0, clp: 0, isk: 0, ugx: 0,
  kwd: 3, bhd: 3, jod: 3, omr: 3, tnd: 3,
};

export const minorUnitsOf = (currency: string): number | undefined =>
  Object.hasOwn(MINOR_UNITS, currency.toLowerCase()) ? MINOR_UNITS[currency.toLowerCase()] : undefined;

const PLAIN_DECIMAL = /^[0-9]+(\.[0-9]+)?$/;

/**
 * An amount in major units (12.5 is $12.50) as integer minor units, parsed as a decimal (DESIGN §6.4):
 * 4.35 is 435, never 434. A JSON number goes through its shortest decimal text, which is what the
 * client wrote. At most the currency's precision, more than 0.
 */
export function parseMajorAmount(amount: number | string, currency: string): { ok: true; minorUnits: number } | { ok: false; reason: string } {
  const digits = minorUnitsOf(currency);
  if (digits === undefined) return { ok: false, reason: `Unknown currency "${currency.slice(0, 8)}"` };
  let text: string;
  if (typeof amount === "number") {
    if (!Number.isFinite(amount)) return { ok: false, reason: "Give a finite amount" };
    text = new Exact(amount).toFixed();
  } else {
    if (!PLAIN_DECIMAL.test(amount)) return { ok: false, reason: "Give the amount as a plain decimal, such as 12.50" };
    text = amount;
  }
  const value = new Exact(text);
  if (value.decimalPlaces() > digits) {
    return { ok: false, reason: `${currency.toUpperCase()} has ${digits} decimal place${digits === 1 ? "" : "s"}: give at most ${digits}` };
  }
  const minor = value.times(new Exact(10).pow(digits));
  if (minor.lte(0)) return { ok: false, reason: "The amount must be more than 0" };
  if (minor.gt(Number.MAX_SAFE_INTEGER)) return { ok: false, reason: "The amount is too large" };
  return { ok: true, minorUnits: minor.toNumber() };
}

/** A usage line's amount: quantity × unit price in cents, exact, rounded once half away from zero (DESIGN §6.2). */
export function lineAmountCents(quantity: string, unitAmountCents: string): number {
  return new Exact(quantity).times(unitAmountCents).toDecimalPlaces(0).toNumber();
}

/** What a quantity goes beyond what is included, exactly: `max(quantity − included, 0)`, a decimal string. */
export function overageOf(quantity: string, included: string): string {
  const beyond = new Exact(quantity).minus(included);
  return beyond.isPositive() && !beyond.isZero() ? beyond.toFixed() : "0";
}

/** A canonical decimal string: no exponent, no trailing zeros ("1", "0.3"). */
export function decimalString(value: string | number): string {
  return new Exact(value).toFixed();
}

/** An amount for people: "$29.00", "-$14.50", "¥500". */
export function formatMoney(minorUnits: number, currency: string): string {
  const digits = minorUnitsOf(currency) ?? 2;
  const major = new Exact(minorUnits).dividedBy(new Exact(10).pow(digits)).toNumber();
  return new Intl.NumberFormat("en-US", { style: "currency", currency: currency.toUpperCase(), minimumFractionDigits: digits, maximumFractionDigits: digits }).format(major);
}

/** A quantity for people, exact (never through a float), with thousands separators: "100000" is "100,000", "1234.5" is "1,234.5". */
export function formatQuantity(quantity: string | number): string {
  const [whole, fraction] = decimalString(quantity).split(".") as [string, string | undefined];
  const sign = whole.startsWith("-") ? "-" : "";
  const digits = sign ? whole.slice(1) : whole;
  return `${sign}${digits.replace(/\B(?=(\d{3})+(?!\d))/g, ",")}${fraction ? `.${fraction}` : ""}`;
}
