/** How commands show times, amounts and lists to a person (`--json` gives the raw values). */

/** Unix seconds (DESIGN §2) as a UTC time to the minute. */
export function when(seconds: number | null | undefined): string {
  if (typeof seconds !== "number" || !Number.isFinite(seconds)) return "-";
  return `${new Date(seconds * 1000).toISOString().slice(0, 16).replace("T", " ")} UTC`;
}

export const plural = (count: number, noun: string) => `${count} ${noun}${count === 1 ? "" : "s"}`;

/** Columns padded to their widest cell, two spaces apart. */
export function table(headers: string[], rows: string[][]): string {
  const cells = [headers, ...rows.map((row) => row.map((cell) => String(cell ?? "")))];
  const widths = headers.map((_, i) => Math.max(...cells.map((row) => row[i]!.length)));
  return cells.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join("  ")).join("\n");
}

// ISO 4217 minor units, as Stripe lists its zero- and three-decimal currencies; the rest have two
const ZERO_DECIMAL = new Set(["bif", "clp", "djf", "gnf", "jpy", "kmf", "krw", "mga", "pyg", "rwf", "ugx", "vnd", "vuv", "xaf", "xof", "xpf"]);
const THREE_DECIMAL = new Set(["bhd", "jod", "kwd", "omr", "tnd"]);
const SYMBOLS: Record<string, string> = { usd: "$", eur: "€", gbp: "£", jpy: "¥" };

/**
 * An amount in minor units (integer cents, DESIGN §6) with its currency: 2900 usd → "$29.00",
 * -150 eur → "-€1.50", 123456 chf → "CHF 1,234.56". Digits are moved as text, never divided as floats.
 */
export function money(minorUnits: number, currency: string): string {
  const code = currency.toLowerCase();
  if (!Number.isSafeInteger(minorUnits)) return `${minorUnits} ${code.toUpperCase()} minor units`;
  const decimals = minorDigits(code);
  const digits = String(Math.abs(minorUnits)).padStart(decimals + 1, "0");
  const major = groupThousands(digits.slice(0, digits.length - decimals));
  const number = decimals > 0 ? `${major}.${digits.slice(digits.length - decimals)}` : major;
  return withCurrency(minorUnits < 0, number, code);
}

const minorDigits = (code: string) => (ZERO_DECIMAL.has(code) ? 0 : THREE_DECIMAL.has(code) ? 3 : 2);
const withCurrency = (negative: boolean, number: string, code: string) => {
  const sign = negative ? "-" : "";
  const symbol = SYMBOLS[code];
  return symbol ? `${sign}${symbol}${number}` : `${sign}${code.toUpperCase()} ${number}`;
};

/**
 * A unit price: a decimal string of minor units (DESIGN §6.2: fractions of a cent, up to 12 places)
 * in major units, exactly, by moving the decimal point as text: "0.004" usd → "$0.00004",
 * "2900" usd → "$29.00", "150000.5" usd → "$1,500.005". At least the currency's decimals are shown.
 */
export function decimalMoney(minorUnits: string, currency: string): string {
  const match = /^(-?)(\d+)(?:\.(\d+))?$/.exec(minorUnits.trim());
  if (!match) return `${minorUnits} ${currency.toUpperCase()} minor units`;
  const [, sign, whole, fraction = ""] = match;
  const code = currency.toLowerCase();
  const decimals = minorDigits(code);
  const padded = whole!.padStart(decimals + 1, "0");
  const major = padded.slice(0, padded.length - decimals).replace(/^0+(?=\d)/, "");
  const minor = (padded.slice(padded.length - decimals) + fraction).replace(/0+$/, "").padEnd(decimals, "0");
  const negative = sign === "-" && /[1-9]/.test(whole! + fraction);
  return withCurrency(negative, minor ? `${groupThousands(major)}.${minor}` : groupThousands(major), code);
}

/** "1234567" → "1,234,567" */
export const groupThousands = (digits: string) => digits.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
