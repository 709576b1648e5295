import Decimal from "decimal.js";
import { formatMoney, minorUnitsOf } from "../money.js";
import type { invoiceJson } from "../invoicing.js";
import { countryName } from "../tax.js";

export type InvoiceView = ReturnType<typeof invoiceJson>;

/**
 * What an invoice says, once, in words and formatted numbers (DESIGN §6.11): the HTML page and the
 * PDF both lay out this, so they cannot say different things. Amounts are formatted with the
 * currency's minor units; the tax line names its rate and base, so the tax can be recomputed from the
 * printed numbers.
 */
export interface InvoiceDocument {
  title: string;
  status: string;
  seller: string[];
  buyer: string[];
  facts: [label: string, value: string][];
  columns: string[];
  lines: { description: string; detail: string | null; quantity: string; unitPrice: string; taxRate: string; amount: string }[];
  totals: [label: string, value: string][];
  notes: string[];
}

const Exact = Decimal.clone({ precision: 60, rounding: Decimal.ROUND_HALF_UP, toExpNeg: -100, toExpPos: 100 });

const day = (seconds: number | null) => (seconds === null ? "—" : new Date(seconds * 1000).toISOString().slice(0, 10));

const STATUS_TEXT: Record<InvoiceView["status"], string> = {
  draft: "Draft",
  open: "Open: payment due",
  paid: "Paid",
  void: "Void",
  uncollectible: "Uncollectible",
};

/** The names of Stripe's tax id types on an invoice. */
const TAX_ID_LABELS: Record<string, string> = {
  eu_vat: "VAT",
  gb_vat: "GB VAT",
  us_ein: "EIN",
  ch_vat: "CH VAT",
  no_vat: "NO VAT",
  au_abn: "ABN",
  ca_bn: "BN",
  ca_gst_hst: "GST/HST",
  in_gst: "GSTIN",
  jp_cn: "Corporate number",
  nz_gst: "GST",
  sg_uen: "UEN",
  za_vat: "VAT",
  br_cnpj: "CNPJ",
  mx_rfc: "RFC",
  kr_brn: "BRN",
  li_uid: "UID",
  is_vat: "VSK",
};

/** A decimal with thousands separators, exactly as stored ("100000" → "100,000", "0.5" stays). */
export function groupedDecimal(value: string): string {
  const [whole, fraction] = new Exact(value).toFixed().split(".");
  const negative = whole!.startsWith("-");
  const digits = negative ? whole!.slice(1) : whole!;
  const grouped = digits.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return `${negative ? "-" : ""}${grouped}${fraction ? `.${fraction}` : ""}`;
}

/** A unit price in cents (a decimal, maybe a fraction of a cent) in major units: "$29.00", "$0.00004". */
export function formatUnitPrice(unitCents: string, currency: string): string {
  const digits = minorUnitsOf(currency) ?? 2;
  const major = new Exact(unitCents).dividedBy(new Exact(10).pow(digits));
  const places = Math.max(digits, major.decimalPlaces());
  if (places === digits) return formatMoney(new Exact(unitCents).toDecimalPlaces(0).toNumber(), currency);
  // more precision than the currency has (usage prices): the symbol of formatMoney, the exact digits
  const symbol = formatMoney(0, currency).replace(/[\d.,\s]/g, "");
  return `${major.isNegative() ? "-" : ""}${symbol}${groupedDecimal(major.abs().toFixed(places))}`;
}

export const percentText = (rate: string | null) => (rate === null ? "—" : `${new Exact(rate).toFixed()}%`);

function addressLines(address: NonNullable<InvoiceView["customerSnapshot"]["address"]>): string[] {
  const city = [address.postalCode, address.city].filter(Boolean).join(" ");
  return [address.line1, address.line2, [city, address.state].filter(Boolean).join(", "), countryName(address.country)].filter((line): line is string => Boolean(line));
}

export function invoiceDocument(i: InvoiceView): InvoiceDocument {
  const money = (cents: number) => formatMoney(cents, i.currency);
  const s = i.seller;
  const seller = s
    ? [s.name, ...s.addressLines, ...(s.country ? [countryName(s.country)] : []), ...(s.taxId ? [`VAT ID: ${s.taxId}`] : []), ...(s.email ? [s.email] : []), ...(s.website ? [s.website] : [])]
    : [];
  const b = i.customerSnapshot;
  const buyer = [
    ...(b.name ? [b.name] : []),
    ...(b.address ? addressLines(b.address) : []),
    ...b.taxIds.map((id) => `${TAX_ID_LABELS[id.type] ?? id.type}: ${id.value}`),
    b.email,
  ];
  const facts: [string, string][] = [
    ["Invoice number", i.number ?? "—"],
    ["Status", STATUS_TEXT[i.status]],
    ["Issued", day(i.finalizedAt)],
    ["Period", `${day(i.periodStart)} to ${day(i.periodEnd)}`],
    ...(i.paidAt ? ([["Paid", day(i.paidAt)]] as [string, string][]) : []),
  ];
  const lines = i.lines.map((line) => ({
    description: line.description,
    detail: line.periodStart ? `${day(line.periodStart)} to ${day(line.periodEnd)}` : null,
    quantity: line.quantity === null ? "1" : groupedDecimal(line.quantity),
    unitPrice: formatUnitPrice(line.unitAmountCents ?? String(line.amountCents), i.currency),
    taxRate: line.kind === "carried" ? "—" : percentText(line.taxRatePercent ?? i.taxRatePercent),
    amount: money(line.amountCents),
  }));
  const hasCarried = i.lines.some((line) => line.kind === "carried");
  const base = i.taxBaseCents ?? i.subtotalCents;
  const taxLabel =
    i.taxTreatment === "reverse"
      ? "Tax (reverse charge)"
      : i.taxTreatment === "exempt"
        ? "Tax (exempt)"
        : i.taxRatePercent !== null
          ? `Tax (${percentText(i.taxRatePercent)} of ${money(Math.max(base, 0))})`
          : "Tax";
  const totals: [string, string][] = [
    ["Subtotal", money(i.subtotalCents)],
    [hasCarried ? "Tax base (subtotal without carried balance)" : "Tax base", money(base)],
    [taxLabel, money(i.taxCents)],
    ["Total", money(i.totalCents)],
    ...(i.creditAppliedCents > 0 ? ([["Credit applied", money(-i.creditAppliedCents)]] as [string, string][]) : []),
    ["Amount due", money(i.amountDueCents)],
    ["Amount paid", money(i.amountPaidCents)],
  ];
  const notes: string[] = [];
  if (i.taxTreatment === "reverse") notes.push("Reverse charge: VAT is to be accounted for by the recipient (Article 196, Council Directive 2006/112/EC).");
  if (i.taxTreatment === "exempt") notes.push("Tax exempt: no tax is charged to this customer.");
  if (hasCarried) notes.push("The carried balance was taxed on the invoice it arose on, and is outside this invoice's tax base.");
  return {
    title: `Invoice ${i.number ?? i.id}`,
    status: STATUS_TEXT[i.status],
    seller,
    buyer,
    facts,
    columns: ["Description", "Qty", "Unit price", "Tax", "Amount"],
    lines,
    totals,
    notes,
  };
}
