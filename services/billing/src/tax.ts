import { readFileSync, statSync } from "node:fs";
import { z } from "@hono/zod-openapi";
import { ConfigError } from "@core/kit";
import type { Address, Seller, TaxExempt, TaxId } from "./db/schema.js";

/**
 * Tax by the buyer's country (DESIGN §6.11): the rates, the seller, the buyer's tax ids, and the one
 * decision every invoice, preview and upcoming invoice is priced with (`taxFor`, then `priceInvoice`).
 */

/** A percentage from 0 to 100 with at most 4 decimals ("19", "7.25"). */
export const PERCENT = /^(100(\.0{1,4})?|[1-9]?[0-9](\.[0-9]{1,4})?)$/;

const regionNames = new Intl.DisplayNames(["en"], { type: "region" });
// codes ICU names that ISO 3166-1 does not assign to a country (the EU, the UN, "UK", unknown)
const NOT_COUNTRIES = new Set(["EU", "EZ", "UN", "UK", "ZZ", "QO"]);

/** Whether `code` is an ISO 3166-1 alpha-2 country code ("DE", "US"). */
export function isCountry(code: string): boolean {
  return /^[A-Z]{2}$/.test(code) && !NOT_COUNTRIES.has(code) && regionNames.of(code) !== code;
}

/** A country's name for people ("Germany"), or the code itself. */
export const countryName = (code: string): string => (isCountry(code) ? (regionNames.of(code) ?? code) : code);

/** The member states of the European Union (VAT reverse charge applies between them). */
export const EU_COUNTRIES: ReadonlySet<string> = new Set([
  "AT", "BE", "BG", "HR", "CY", "CZ", "DK", "EE", "FI", "FR", "DE", "GR", "HU", "IE", "IT", "LV", "LT", "LU", "MT", "NL", "PL", "PT", "RO", "SK", "SI", "ES", "SE",
]);

/**
 * Stripe's tax id types billing takes, with a format check of each (the value with spaces, dots and
 * dashes removed, upper-cased). A format check is not a registry lookup (VIES): it catches typing
 * mistakes, as Stripe does before its asynchronous verification.
 */
export const TAX_ID_FORMATS: Readonly<Record<string, { pattern: RegExp; example: string }>> = {
  eu_vat: { pattern: /^(AT|BE|BG|CY|CZ|DE|DK|EE|EL|ES|FI|FR|HR|HU|IE|IT|LT|LU|LV|MT|NL|PL|PT|RO|SE|SI|SK|XI)[0-9A-Z+*]{2,12}$/, example: "DE123456789" },
  gb_vat: { pattern: /^GB([0-9]{9}|[0-9]{12}|GD[0-9]{3}|HA[0-9]{3})$/, example: "GB123456789" },
  us_ein: { pattern: /^[0-9]{9}$/, example: "12-3456789" },
  ch_vat: { pattern: /^CHE[0-9]{9}(MWST|TVA|IVA)$/, example: "CHE-123.456.789 MWST" },
  no_vat: { pattern: /^[0-9]{9}MVA$/, example: "123456789MVA" },
  au_abn: { pattern: /^[0-9]{11}$/, example: "12345678912" },
  ca_bn: { pattern: /^[0-9]{9}$/, example: "123456789" },
  ca_gst_hst: { pattern: /^[0-9]{9}RT[0-9]{4}$/, example: "123456789RT0002" },
  in_gst: { pattern: /^[0-9]{2}[A-Z]{5}[0-9]{4}[A-Z][1-9A-Z]Z[0-9A-Z]$/, example: "12ABCDE3456FGZH" },
  jp_cn: { pattern: /^[0-9]{13}$/, example: "1234567891234" },
  nz_gst: { pattern: /^[0-9]{8,9}$/, example: "123456789" },
  sg_uen: { pattern: /^[0-9A-Z]{9,10}$/, example: "123456789F" },
  za_vat: { pattern: /^4[0-9]{9}$/, example: "4123456789" },
  br_cnpj: { pattern: /^[0-9]{14}$/, example: "01.234.456/5432-10" },
  mx_rfc: { pattern: /^[A-Z&Ñ]{3,4}[0-9]{6}[A-Z0-9]{3}$/, example: "ABC010203AB9" },
  kr_brn: { pattern: /^[0-9]{10}$/, example: "123-45-67890" },
  li_uid: { pattern: /^CHE[0-9]{9}$/, example: "CHE123456789" },
  is_vat: { pattern: /^[0-9]{5,6}$/, example: "123456" },
};
export const TAX_ID_TYPES = Object.keys(TAX_ID_FORMATS) as [string, ...string[]];

/** A tax id as its format is checked: spaces, dots, dashes and slashes removed, upper case. */
export const normalTaxId = (value: string) => value.replace(/[\s.\-/]/g, "").toUpperCase();

/** The national formats of EU VAT numbers after the country prefix (the European Commission's VIES list). */
const EU_VAT_NATIONAL: Readonly<Record<string, RegExp>> = {
  AT: /^U[0-9]{8}$/,
  BE: /^[01][0-9]{9}$/,
  BG: /^[0-9]{9,10}$/,
  CY: /^[0-9]{8}[A-Z]$/,
  CZ: /^[0-9]{8,10}$/,
  DE: /^[0-9]{9}$/,
  DK: /^[0-9]{8}$/,
  EE: /^[0-9]{9}$/,
  EL: /^[0-9]{9}$/,
  ES: /^[0-9A-Z][0-9]{7}[0-9A-Z]$/,
  FI: /^[0-9]{8}$/,
  FR: /^[0-9A-Z]{2}[0-9]{9}$/,
  HR: /^[0-9]{11}$/,
  HU: /^[0-9]{8}$/,
  IE: /^[0-9][0-9A-Z+*][0-9]{5}[A-Z]{1,2}$/,
  IT: /^[0-9]{11}$/,
  LT: /^([0-9]{9}|[0-9]{12})$/,
  LU: /^[0-9]{8}$/,
  LV: /^[0-9]{11}$/,
  MT: /^[0-9]{8}$/,
  NL: /^[0-9]{9}B[0-9]{2}$/,
  PL: /^[0-9]{10}$/,
  PT: /^[0-9]{9}$/,
  RO: /^[0-9]{2,10}$/,
  SE: /^[0-9]{12}$/,
  SI: /^[0-9]{8}$/,
  SK: /^[0-9]{10}$/,
  XI: /^([0-9]{9}|[0-9]{12}|GD[0-9]{3}|HA[0-9]{3})$/,
};

/** Why a tax id's value does not fit its type, or null when it does. */
export function taxIdProblem(id: TaxId): string | null {
  const format = TAX_ID_FORMATS[id.type];
  if (!format) return `unknown tax id type "${id.type.slice(0, 20)}"`;
  const value = normalTaxId(id.value);
  const national = id.type === "eu_vat" ? EU_VAT_NATIONAL[value.slice(0, 2)] : undefined;
  if (!format.pattern.test(value) || (national && !national.test(value.slice(2)))) return `not a valid ${id.type} (for example ${format.example})`;
  return null;
}

/** The EU country an `eu_vat` id belongs to (Greece writes EL); null for Northern Ireland's XI and other types. */
export function euVatCountry(id: TaxId): string | null {
  if (id.type !== "eu_vat") return null;
  const prefix = normalTaxId(id.value).slice(0, 2);
  const country = prefix === "EL" ? "GR" : prefix;
  return EU_COUNTRIES.has(country) ? country : null;
}

/** The buyer as tax sees it. */
export interface TaxBuyer {
  address: Address | null;
  taxIds: TaxId[];
  taxExempt: TaxExempt;
}

/**
 * Why `reverse` cannot apply to this buyer with this seller, or null when it can: an EU business
 * (an `eu_vat` id of its own country) in another EU country than the seller's.
 */
export function reverseChargeProblem(buyer: Pick<TaxBuyer, "address" | "taxIds">, seller: Pick<Seller, "country">): string | null {
  if (!seller.country) return "Reverse charge needs the seller's country: the operator sets it in CORE_BILLING_SELLER";
  const country = buyer.address?.country;
  if (!country || !EU_COUNTRIES.has(country)) return "Reverse charge applies to a business in an EU country: give an address in the EU";
  if (country === seller.country) return `Reverse charge applies across borders only: the seller is in ${countryName(seller.country)} too`;
  if (!buyer.taxIds.some((id) => euVatCountry(id) === country)) return `Reverse charge needs the buyer's EU VAT id of ${countryName(country)} (eu_vat, ${country === "GR" ? "EL" : country}…)`;
  return null;
}

/** What an invoice's tax is: the rate and why (`standard`: the buyer's country's rate). */
export interface TaxDecision {
  ratePercent: string;
  treatment: "standard" | "exempt" | "reverse";
}

/** Rates by `default`, country ("DE") and country-state ("US-CA"), as decimal strings. */
export type RateTable = Readonly<Record<string, string>>;

const RateValue = z.union([z.number(), z.string()]).transform((v, ctx) => {
  const text = typeof v === "number" ? String(v) : v;
  if (!PERCENT.test(text)) {
    ctx.addIssue({ code: "custom", message: `must be a percentage from 0 to 100 with at most 4 decimals, got ${JSON.stringify(v).slice(0, 20)}` });
    return z.NEVER;
  }
  return text;
});
const rateKey = (k: string) => k === "default" || isCountry(k) || (/^[A-Z]{2}-[A-Z0-9]{1,3}$/.test(k) && isCountry(k.slice(0, 2)));
const RateTableSchema = z.record(z.string(), RateValue).superRefine((table, check) => {
  const keys = Object.keys(table);
  if (keys.length > 1000) check.addIssue({ code: "custom", message: "at most 1000 rates" });
  for (const key of keys.filter((k) => !rateKey(k)).slice(0, 3)) {
    check.addIssue({ code: "custom", path: [key], message: "keys are default, a country (DE) or a country and its region (US-CA)" });
  }
});

function parseRates(text: string, where: string): RateTable {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`CORE_BILLING_TAX_RATES (${where}): not JSON (${(err as Error).message})`);
  }
  const parsed = RateTableSchema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.slice(0, 5).map((i) => (i.path.length ? `${i.path.join(".")}: ${i.message}` : i.message));
    throw new ConfigError(`CORE_BILLING_TAX_RATES (${where}): ${problems.join("; ")}`);
  }
  return parsed.data;
}

/**
 * The tax rates of `CORE_BILLING_TAX_RATES`: inline JSON (it starts with `{`) or the path of a JSON
 * file. A file is looked at (stat) each time a rate is needed and read again when it changed, so a
 * new rate applies to the next invoice without a restart; a file that no longer reads or validates
 * keeps the last good rates, and the problem is reported (`onReloadError`) until it is fixed.
 * `CORE_BILLING_TAX_PERCENT` is the default when the table has none (both: they must agree).
 */
export class TaxRates {
  private table: RateTable;
  private stamp: string | null = null;
  private reportedStamp: string | null = null;
  /** told once per broken version of the file (the logger, in the app) */
  onReloadError: (message: string) => void = () => {};

  private constructor(
    private readonly file: string | null,
    table: RateTable,
    private readonly fallbackDefault: string,
    private readonly defaultGiven: boolean,
  ) {
    this.table = table;
    if (file) this.stamp = stampOf(file);
  }

  /** Validated at start: a ConfigError says what is wrong. */
  static load(value: string | undefined, taxPercent: string, taxPercentGiven: boolean): TaxRates {
    const text = value?.trim() ?? "";
    if (!text) return new TaxRates(null, {}, taxPercent, taxPercentGiven);
    const inline = text.startsWith("{");
    let content: string;
    if (inline) content = text;
    else {
      try {
        content = readFileSync(text, "utf8");
      } catch (err) {
        throw new ConfigError(`CORE_BILLING_TAX_RATES: cannot read ${text} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); give inline JSON or a JSON file`);
      }
    }
    const table = parseRates(content, inline ? "inline JSON" : text);
    const rates = new TaxRates(inline ? null : text, table, taxPercent, taxPercentGiven);
    rates.checkDefault(table, inline ? "inline JSON" : text);
    return rates;
  }

  /** Only the default (`CORE_BILLING_TAX_PERCENT`): what tests and a single-rate setup use. */
  static flat(percent: string): TaxRates {
    return new TaxRates(null, {}, percent, true);
  }

  private checkDefault(table: RateTable, where: string) {
    const given = table.default;
    if (given !== undefined && this.defaultGiven && !sameRate(given, this.fallbackDefault)) {
      throw new ConfigError(`CORE_BILLING_TAX_RATES (${where}): its default ${given} differs from CORE_BILLING_TAX_PERCENT ${this.fallbackDefault}; give one of them`);
    }
  }

  /** The table in force: the file's content as it is now, or the last good one. */
  current(): RateTable {
    if (!this.file) return this.table;
    const stamp = stampOf(this.file);
    if (stamp === this.stamp) return this.table;
    try {
      const table = parseRates(readFileSync(this.file, "utf8"), this.file);
      this.checkDefault(table, this.file);
      this.table = table;
      this.stamp = stamp;
    } catch (err) {
      if (this.reportedStamp !== stamp) {
        this.reportedStamp = stamp;
        this.onReloadError(`${(err as Error).message}; the rates read before stay in force`);
      }
    }
    return this.table;
  }

  /** The buyer's rate: `US-CA` before `US` before `default` (then `CORE_BILLING_TAX_PERCENT`, then 0). */
  rateFor(address: Pick<Address, "country" | "state"> | null): string {
    const table = this.current();
    const country = address?.country;
    const state = address?.state?.toUpperCase();
    if (country && state && table[`${country}-${state}`] !== undefined) return table[`${country}-${state}`]!;
    if (country && table[country] !== undefined) return table[country]!;
    return table.default ?? this.fallbackDefault;
  }
}

const sameRate = (a: string, b: string) => Number(a) === Number(b);

function stampOf(file: string): string {
  try {
    const s = statSync(file);
    return `${s.ino}:${s.size}:${s.mtimeMs}`;
  } catch {
    return "missing";
  }
}

/**
 * The tax of one buyer's invoice (DESIGN §6.11), decided when it is priced: `exempt` pays none;
 * `reverse` pays none while it still holds for the seller as configured now: when the seller's
 * country changed since the buyer chose it (so the buyer is now in the seller's country, or the
 * seller has none), the buyer pays its country's rate, as Stripe decides reverse charge per invoice.
 */
export function decideTax(rates: TaxRates, seller: Seller, buyer: TaxBuyer | null): TaxDecision {
  if (buyer?.taxExempt === "exempt") return { ratePercent: "0", treatment: "exempt" };
  if (buyer?.taxExempt === "reverse" && reverseChargeProblem(buyer, seller) === null) return { ratePercent: "0", treatment: "reverse" };
  return { ratePercent: rates.rateFor(buyer?.address ?? null), treatment: "standard" };
}

const Line = (max: number) =>
  z
    .string()
    .trim()
    .min(1)
    .max(max)
    .refine((s) => !/[\u0000-\u001f\u007f-\u009f]/.test(s), "must not contain control characters");

const SellerSchema = z
  .object({
    name: Line(200),
    addressLines: z.array(Line(200)).max(6),
    country: z.string().refine(isCountry, "an ISO 3166-1 alpha-2 country code such as DE"),
    taxId: Line(64).optional(),
    email: z.email().max(320),
    website: z.url({ protocol: /^https?$/ }).max(300).optional(),
  })
  .strict();

/**
 * The seller (`CORE_BILLING_SELLER`, a JSON file), validated at start. Without it: billing cannot
 * know the operator organization's name without asking IAM, so the seller is the name billing's
 * mail is sent from (`CORE_MAIL_FROM`'s display name and address), with no address, country or tax id,
 * and reverse charge is unavailable (it needs the seller's country).
 */
export function loadSeller(file: string | undefined, mailFrom: string): Seller {
  if (!file?.trim()) {
    const match = /^\s*"?([^"<]*?)"?\s*<([^>]+)>\s*$/.exec(mailFrom);
    const name = match?.[1]?.trim() || "Core";
    const email = match?.[2]?.trim() ?? (mailFrom.includes("@") ? mailFrom.trim() : null);
    return { name, addressLines: [], country: null, taxId: null, email, website: null };
  }
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new ConfigError(`CORE_BILLING_SELLER: cannot read ${file} as JSON (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  const parsed = SellerSchema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.slice(0, 5).map((i) => (i.path.length ? `${i.path.join(".")}: ${i.message}` : i.message));
    throw new ConfigError(`CORE_BILLING_SELLER (${file}): ${problems.join("; ")}`);
  }
  const s = parsed.data;
  return { name: s.name, addressLines: s.addressLines, country: s.country, taxId: s.taxId ?? null, email: s.email, website: s.website ?? null };
}
