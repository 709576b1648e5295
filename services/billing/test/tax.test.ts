import { mkdtempSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadCommonConfig } from "@core/kit";
import { loadBillingConfig } from "../src/config.js";
import { priceInvoice, type DraftLine } from "../src/invoicing.js";
import { decideTax, reverseChargeProblem, TaxRates, taxIdProblem } from "../src/tax.js";
import { TEST_SELLER } from "./support/billing.js";

const dir = mkdtempSync(join(tmpdir(), "billing-tax-"));
const file = (name: string, content: string) => {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
};
const load = (env: Record<string, string>) => loadBillingConfig(loadCommonConfig({}), env);

const RATES = '{ "default": 0, "DE": 19, "FR": 20, "US-CA": 7.25, "US": 1 }';
const address = (country: string, state: string | null = null) => ({ line1: "1 Main St", line2: null, city: "Town", postalCode: null, state, country });
const buyer = (country: string | null, extra: Partial<Parameters<typeof decideTax>[2] & object> = {}) => ({
  address: country ? address(country) : null,
  taxIds: [],
  taxExempt: "none" as const,
  ...extra,
});

describe("tax configuration (DESIGN §6.11)", () => {
  it("takes CORE_BILLING_TAX_RATES inline or from a file, and refuses bad tables at start with a clear message", () => {
    expect(load({ CORE_BILLING_TAX_RATES: RATES }).taxRates!.rateFor(address("US", "CA"))).toBe("7.25");
    expect(load({ CORE_BILLING_TAX_RATES: file("rates.json", RATES) }).taxRates!.rateFor(address("DE"))).toBe("19");
    expect(() => load({ CORE_BILLING_TAX_RATES: '{ "DE": 101 }' })).toThrow(/DE: must be a percentage from 0 to 100/);
    expect(() => load({ CORE_BILLING_TAX_RATES: '{ "DE": 19.12345 }' })).toThrow(/at most 4 decimals/);
    expect(() => load({ CORE_BILLING_TAX_RATES: '{ "XX": 5 }' })).toThrow(/keys are default, a country/);
    expect(() => load({ CORE_BILLING_TAX_RATES: '{ "DE": 19' })).toThrow(/CORE_BILLING_TAX_RATES \(inline JSON\): not JSON/);
    expect(() => load({ CORE_BILLING_TAX_RATES: join(dir, "missing.json") })).toThrow(/cannot read .*missing\.json \(ENOENT\)/);
    expect(() => load({ CORE_BILLING_TAX_RATES: '{ "default": 5 }', CORE_BILLING_TAX_PERCENT: "8" })).toThrow(/differs from CORE_BILLING_TAX_PERCENT 8/);
    expect(() => load({ CORE_BILLING_TAX_PERCENT: "100.5" })).toThrow(/CORE_BILLING_TAX_PERCENT must be a percentage/);
    // just inside the limits
    expect(load({ CORE_BILLING_TAX_RATES: '{ "DE": "100", "FR": 0.0001, "default": "8" }', CORE_BILLING_TAX_PERCENT: "8.0" }).taxRates!.rateFor(null)).toBe("8");
  });

  it("keeps CORE_BILLING_TAX_PERCENT as the default when the table names none", () => {
    const config = load({ CORE_BILLING_TAX_RATES: '{ "DE": 19 }', CORE_BILLING_TAX_PERCENT: "8.25" });
    expect(config.taxRates!.rateFor(address("FR"))).toBe("8.25");
    expect(config.taxRates!.rateFor(address("DE"))).toBe("19");
    expect(load({ CORE_BILLING_TAX_PERCENT: "8.25" }).taxRates).toBeNull();
  });

  it("reads a changed rates file again on the next use, and keeps the last good rates when the new file is broken", () => {
    const path = file("live.json", '{ "DE": 19 }');
    const rates = TaxRates.load(path, "0", false);
    const errors: string[] = [];
    rates.onReloadError = (m) => errors.push(m);
    expect(rates.rateFor(address("DE"))).toBe("19");
    writeFileSync(path, '{ "DE": 7 }');
    utimesSync(path, new Date(), new Date(Date.now() + 5_000));
    expect(rates.rateFor(address("DE"))).toBe("7");
    writeFileSync(path, '{ "DE": "lots" }');
    utimesSync(path, new Date(), new Date(Date.now() + 10_000));
    expect(rates.rateFor(address("DE"))).toBe("7");
    expect(rates.rateFor(address("DE"))).toBe("7");
    expect(errors).toEqual([expect.stringMatching(/DE: must be a percentage.*the rates read before stay in force/)]);
  });

  it("validates CORE_BILLING_SELLER at start; without it the seller is the name billing mails from", () => {
    const good = file("seller.json", JSON.stringify({ name: "Core Cloud GmbH", addressLines: ["Friedrichstraße 1", "10117 Berlin"], country: "DE", taxId: "DE123456789", email: "billing@core.example" }));
    expect(load({ CORE_BILLING_SELLER: good }).seller).toEqual({ name: "Core Cloud GmbH", addressLines: ["Friedrichstraße 1", "10117 Berlin"], country: "DE", taxId: "DE123456789", email: "billing@core.example", website: null });
    const bad = file("bad-seller.json", JSON.stringify({ name: "", addressLines: [], country: "Germany", email: "nope" }));
    expect(() => load({ CORE_BILLING_SELLER: bad })).toThrow(/CORE_BILLING_SELLER \(.*bad-seller\.json\): name: .*; country: an ISO 3166-1 alpha-2 country code/);
    expect(() => load({ CORE_BILLING_SELLER: file("extra.json", JSON.stringify({ name: "A", addressLines: [], country: "DE", email: "a@b.example", vat: "x" })) })).toThrow(/Unrecognized key/);
    expect(() => load({ CORE_BILLING_SELLER: join(dir, "nothing.json") })).toThrow(/CORE_BILLING_SELLER: cannot read .* \(ENOENT\)/);
    expect(load({ CORE_MAIL_FROM: "Acme Billing <invoices@acme.example>" }).seller).toMatchObject({ name: "Acme Billing", email: "invoices@acme.example", country: null });
  });
});

describe("tax by the buyer (DESIGN §6.11)", () => {
  const rates = TaxRates.load(RATES, "0", false);

  it("picks the rate by country and state: US-CA before US before default", () => {
    expect(decideTax(rates, TEST_SELLER, buyer("DE"))).toEqual({ ratePercent: "19", treatment: "standard" });
    expect(decideTax(rates, TEST_SELLER, { ...buyer(null), address: address("US", "CA") })).toEqual({ ratePercent: "7.25", treatment: "standard" });
    expect(decideTax(rates, TEST_SELLER, { ...buyer(null), address: address("US", "NY") })).toEqual({ ratePercent: "1", treatment: "standard" });
    expect(decideTax(rates, TEST_SELLER, buyer("JP"))).toEqual({ ratePercent: "0", treatment: "standard" });
    expect(decideTax(rates, TEST_SELLER, buyer(null))).toEqual({ ratePercent: "0", treatment: "standard" });
    expect(decideTax(rates, TEST_SELLER, null)).toEqual({ ratePercent: "0", treatment: "standard" });
  });

  it("exempt pays none; reverse pays none while it holds, and the country's rate once the seller moved into the buyer's country", () => {
    expect(decideTax(rates, TEST_SELLER, buyer("DE", { taxExempt: "exempt" }))).toEqual({ ratePercent: "0", treatment: "exempt" });
    const french = buyer("FR", { taxExempt: "reverse", taxIds: [{ type: "eu_vat", value: "FR12345678901" }] });
    expect(decideTax(rates, TEST_SELLER, french)).toEqual({ ratePercent: "0", treatment: "reverse" });
    expect(decideTax(rates, { ...TEST_SELLER, country: "FR" }, french)).toEqual({ ratePercent: "20", treatment: "standard" });
    expect(decideTax(rates, { ...TEST_SELLER, country: null }, french)).toEqual({ ratePercent: "20", treatment: "standard" });
  });

  it("allows reverse charge only for an EU business with its own country's VAT id, in another EU country than the seller's", () => {
    const vat = (value: string) => [{ type: "eu_vat", value }];
    expect(reverseChargeProblem({ address: address("FR"), taxIds: vat("FR12345678901") }, TEST_SELLER)).toBeNull();
    expect(reverseChargeProblem({ address: address("GR"), taxIds: vat("EL123456789") }, TEST_SELLER)).toBeNull();
    expect(reverseChargeProblem({ address: address("DE"), taxIds: vat("DE123456789") }, TEST_SELLER)).toMatch(/across borders only: the seller is in Germany too/);
    expect(reverseChargeProblem({ address: address("FR"), taxIds: [] }, TEST_SELLER)).toMatch(/needs the buyer's EU VAT id of France/);
    expect(reverseChargeProblem({ address: address("FR"), taxIds: vat("IT12345678901") }, TEST_SELLER)).toMatch(/EU VAT id of France/);
    expect(reverseChargeProblem({ address: address("US"), taxIds: vat("FR12345678901") }, TEST_SELLER)).toMatch(/business in an EU country/);
    expect(reverseChargeProblem({ address: null, taxIds: vat("FR12345678901") }, TEST_SELLER)).toMatch(/business in an EU country/);
    expect(reverseChargeProblem({ address: address("FR"), taxIds: vat("FR12345678901") }, { country: null })).toMatch(/CORE_BILLING_SELLER/);
  });

  it("checks tax id formats of Stripe's types", () => {
    expect(taxIdProblem({ type: "eu_vat", value: "DE 123 456 789" })).toBeNull();
    expect(taxIdProblem({ type: "gb_vat", value: "GB123456789" })).toBeNull();
    expect(taxIdProblem({ type: "us_ein", value: "12-3456789" })).toBeNull();
    expect(taxIdProblem({ type: "ch_vat", value: "CHE-123.456.789 MWST" })).toBeNull();
    expect(taxIdProblem({ type: "no_vat", value: "123456789MVA" })).toBeNull();
    expect(taxIdProblem({ type: "au_abn", value: "12345678912" })).toBeNull();
    expect(taxIdProblem({ type: "ca_bn", value: "123456789" })).toBeNull();
    expect(taxIdProblem({ type: "eu_vat", value: "US123456789" })).toMatch(/not a valid eu_vat/);
    expect(taxIdProblem({ type: "us_ein", value: "12-345678" })).toMatch(/not a valid us_ein \(for example 12-3456789\)/);
    expect(taxIdProblem({ type: "xx_vat", value: "1" })).toMatch(/unknown tax id type/);
  });
});

describe("priceInvoice: one tax on the stated base (DESIGN §6.11)", () => {
  const line = (amountCents: number, kind: DraftLine["kind"] = "manual"): DraftLine => ({ kind, description: "x", amountCents });

  it("taxes the subtotal without carried lines, and states the base and the rate on the invoice and its lines", () => {
    const a = priceInvoice({ lines: [line(2900, "subscription")], tax: { ratePercent: "19", treatment: "standard" }, balanceCents: -1000 });
    expect(a.subtotalCents).toBe(3900);
    expect(a.taxBaseCents).toBe(2900);
    expect(a.taxCents).toBe(551);
    expect(a.totalCents).toBe(4451);
    expect(a.taxRatePercent).toBe("19");
    expect(a.lines.map((l) => [l.kind, l.quantity, l.unitAmountCents, l.taxRatePercent])).toEqual([
      ["subscription", "1", "2900", "19"],
      ["carried", "1", "1000", null],
    ]);
  });

  it("rounds once, half away from zero, exactly", () => {
    // 2950 × 7.25% = 213.875 → 214; 50 × 1% = 0.5 → 1; 3 × 0.0001% rounds to 0
    expect(priceInvoice({ lines: [line(2950)], tax: { ratePercent: "7.25", treatment: "standard" }, balanceCents: 0 }).taxCents).toBe(214);
    expect(priceInvoice({ lines: [line(50)], tax: { ratePercent: "1", treatment: "standard" }, balanceCents: 0 }).taxCents).toBe(1);
    expect(priceInvoice({ lines: [line(3)], tax: { ratePercent: "0.0001", treatment: "standard" }, balanceCents: 0 }).taxCents).toBe(0);
    // each line alone would round 0.5 up twice (2 cents); the one tax on the base is 1
    expect(priceInvoice({ lines: [line(25), line(25)], tax: { ratePercent: "2", treatment: "standard" }, balanceCents: 0 }).taxCents).toBe(1);
  });

  it("exempt and reverse charge pay no tax, and say why", () => {
    for (const treatment of ["exempt", "reverse"] as const) {
      const a = priceInvoice({ lines: [line(2900, "subscription")], tax: { ratePercent: "0", treatment }, balanceCents: 0 });
      expect(a).toMatchObject({ taxCents: 0, taxBaseCents: 2900, taxTreatment: treatment, totalCents: 2900 });
    }
  });
});
