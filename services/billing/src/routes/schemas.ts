import { z } from "@hono/zod-openapi";
import { METERS, PAID_TIERS, TIERS } from "../plans.js";

/** Ids in paths and bodies: min1 per spec, bounded so junk never reaches the database. */
export const Id = z.string().min(1).max(128);
export const pathId = (name: string) => Id.openapi({ param: { name, in: "path" } });
export const platformQuery = (required: boolean) =>
  required
    ? Id.openapi({ param: { name: "platformId", in: "query" }, description: "The platform (required, spec §4.4): a tenant names its own, an operator or a service any" })
    : Id.optional().openapi({ param: { name: "platformId", in: "query" }, description: "The platform; tenants may leave it out (their own), operators and services name it" });

export const Tier = z.enum(TIERS);
export const PaidTier = z.enum(PAID_TIERS);
const Seconds = z.number().int().openapi({ description: "Unix seconds" });
const NullableSeconds = Seconds.nullable();

export const PlanSchema = z
  .object({
    id: z.string(),
    tier: Tier,
    name: z.string(),
    currency: z.string(),
    priceCents: z.number().int(),
    interval: z.literal("month"),
    priceId: z.string(),
    included: z.record(z.enum(METERS), z.string()).openapi({ description: "included quantity of each meter per period, decimal strings" }),
    overageUnitCents: z.record(z.enum(METERS), z.string()).openapi({ description: "price of each unit beyond what is included, in cents, decimal strings (fractions of a cent allowed)" }),
  })
  .openapi("Plan");

export const SubscriptionSchema = z
  .object({
    id: z.string(),
    platformId: z.string(),
    customerId: z.string().nullable(),
    tier: Tier,
    planId: z.string(),
    status: z.enum(["active", "trialing", "past_due", "canceled"]),
    billingAnchor: Seconds,
    currentPeriodStart: Seconds,
    currentPeriodEnd: Seconds,
    cancelAtPeriodEnd: z.boolean(),
    canceledAt: NullableSeconds,
    trialEnd: NullableSeconds,
    pendingTier: Tier.nullable(),
    quantity: z.number().int().openapi({ description: "seats: the plan's price is charged this many times" }),
    pendingQuantity: z.number().int().nullable().openapi({ description: "a lower quantity that takes effect at the period's end" }),
    metadata: z.record(z.string(), z.unknown()),
    createdAt: Seconds,
  })
  .openapi("Subscription");

// the fields of an invoice line and of an invoice, unnamed: the upcoming invoice restates some of
// them (id null), and an extension of a named schema is described as allOf with it, which no
// upcoming invoice could satisfy (id both a string and null; found by test/services-conformance.test.ts)
const InvoiceLineFields = z
  .object({
    id: z.string(),
    kind: z.enum(["subscription", "proration", "usage", "credit", "carried", "manual"]),
    description: z.string(),
    meter: z.string().nullable(),
    quantity: z.string().nullable().openapi({ description: "a decimal string" }),
    unitAmountCents: z.string().nullable().openapi({ description: "a decimal string" }),
    amountCents: z.number().int(),
    taxRatePercent: z.string().nullable().openapi({ description: "the tax rate on this line, percent (a decimal string); null on a carried line (taxed on its own invoice) and on invoices made before rates by country" }),
    periodStart: NullableSeconds,
    periodEnd: NullableSeconds,
  });
export const InvoiceLineSchema = InvoiceLineFields.openapi("InvoiceLine");

export const AddressSchema = z
  .object({
    line1: z.string(),
    line2: z.string().nullable(),
    city: z.string(),
    postalCode: z.string().nullable(),
    state: z.string().nullable().openapi({ description: "the region's code (CA for California), as ISO 3166-2 names it" }),
    country: z.string().openapi({ description: "ISO 3166-1 alpha-2" }),
  })
  .openapi("Address");

export const TaxIdSchema = z.object({ type: z.string().openapi({ description: "Stripe's tax id type: eu_vat, gb_vat, us_ein, ch_vat, no_vat, au_abn, ca_bn …" }), value: z.string() }).openapi("TaxId");

export const TaxExemptSchema = z.enum(["none", "exempt", "reverse"]).openapi({ description: "none: the buyer's country's rate; exempt: no tax (set by the seller only); reverse: an EU business in another EU country than the seller's accounts for the VAT itself (reverse charge)" });

export const CustomerSnapshotSchema = z
  .object({ email: z.string(), name: z.string().nullable(), address: AddressSchema.nullable(), taxIds: z.array(TaxIdSchema), taxExempt: TaxExemptSchema })
  .openapi("CustomerSnapshot", { description: "the buyer as it was when the invoice was finalized (DESIGN §6.11)" });

export const SellerSchema = z
  .object({ name: z.string(), addressLines: z.array(z.string()), country: z.string().nullable(), taxId: z.string().nullable(), email: z.string().nullable(), website: z.string().nullable() })
  .openapi("Seller", { description: "the seller as it was when the invoice was finalized (CORE_BILLING_SELLER, DESIGN §6.11)" });

/** What an invoice makes true once it is paid (DESIGN §6.9), one shape in every answer and webhook that carries an invoice. */
export const IntentSchema = z
  .object({
    kind: z.enum(["upgrade", "change_tier", "seats", "trial_end", "renewal", "manual"]).openapi({
      description:
        "upgrade: a free platform's first paid period; change_tier: a higher tier now, prorated; seats: more seats now, prorated; trial_end: the first paid period after a trial; " +
        "renewal: a period's base price, or a closed period's usage; manual: what an operator invoiced (generate)",
    }),
    tier: Tier.optional().openapi({ description: "the tier it sets or renews" }),
    planId: z.string().optional().openapi({ description: "that tier's plan" }),
    quantity: z.number().int().optional().openapi({ description: "the seats it sets or renews" }),
  })
  .openapi("InvoiceIntent", { description: "what becomes true once the invoice is paid, like Stripe's billing_reason; tier, planId and quantity are left out where nothing is set (usage, manual)" });

const InvoiceFields = z
  .object({
    id: z.string(),
    number: z.string().nullable(),
    platformId: z.string(),
    customerId: z.string(),
    status: z.enum(["draft", "open", "paid", "void", "uncollectible"]),
    currency: z.string(),
    subtotalCents: z.number().int(),
    taxCents: z.number().int(),
    creditAppliedCents: z.number().int(),
    totalCents: z.number().int(),
    amountDueCents: z.number().int(),
    amountPaidCents: z.number().int(),
    amountRefundedCents: z.number().int().openapi({ description: "given back to the card by credit notes (DESIGN §6.10)" }),
    amountCreditedCents: z.number().int().openapi({ description: "given back to the customer's balance by credit notes" }),
    disputed: z.boolean().openapi({ description: "its payment was disputed at the provider" }),
    periodStart: Seconds,
    periodEnd: Seconds,
    createdAt: Seconds,
    finalizedAt: NullableSeconds,
    paidAt: NullableSeconds,
    customerSnapshot: CustomerSnapshotSchema,
    seller: SellerSchema.nullable().openapi({ description: "null on invoices finalized before sellers were recorded" }),
    taxRatePercent: z.string().nullable().openapi({ description: "the rate the tax is (percent, a decimal string): taxCents = taxBaseCents × taxRatePercent / 100, rounded once half away from zero" }),
    taxBaseCents: z.number().int().nullable().openapi({ description: "what the rate applies to: the subtotal without carried lines (taxed on their own invoice)" }),
    taxTreatment: z.enum(["standard", "exempt", "reverse"]).nullable().openapi({ description: "reverse: reverse charge, the buyer accounts for the VAT" }),
    attemptCount: z.number().int().openapi({ description: "charges refused so far (dunning, DESIGN §6.3)" }),
    nextPaymentAttempt: NullableSeconds.openapi({ description: "when the next retry of a refused charge is due (billing time), or null" }),
    collection: z
      .object({
        state: z.enum(["charging", "pending"]).openapi({ description: "charging: the provider was asked and its answer is awaited; pending: its answer is unknown, and billing asks again" }),
        since: NullableSeconds,
        nextCheckAt: NullableSeconds.openapi({ description: "when billing asks the provider about it next (wall-clock time)" }),
      })
      .nullable()
      .openapi({ description: "a payment in flight (DESIGN §6.9), or null" }),
    intent: IntentSchema,
    lines: z.array(InvoiceLineSchema),
  });
export const InvoiceSchema = InvoiceFields.openapi("Invoice");

export const UpcomingInvoiceSchema = InvoiceFields.extend({
  id: z.null(),
  number: z.null(),
  status: z.literal("upcoming"),
  nextChargeAt: Seconds.openapi({ description: "when the renewal charges it (billing time)" }),
  chargeCents: z.number().int().openapi({ description: "what the card will be charged: amountDueCents less an amount under the minimum charge, carried on" }),
  lines: z.array(InvoiceLineFields.extend({ id: z.null() })),
}).openapi("UpcomingInvoice");

export const PaymentMethodSchema = z
  .object({
    id: z.string(),
    type: z.literal("card"),
    customerId: z.string().nullable(),
    card: z.object({ brand: z.string(), last4: z.string(), expMonth: z.number().int(), expYear: z.number().int(), funding: z.string() }),
    createdAt: Seconds,
    isDefault: z.boolean(),
  })
  .openapi("PaymentMethod");

export const CustomerSchema = z
  .object({
    id: z.string(),
    email: z.string(),
    name: z.string().nullable(),
    metadata: z.record(z.string(), z.unknown()),
    platformId: z.string().nullable(),
    userId: z.string().nullable(),
    balanceCents: z.number().int().openapi({ description: "positive: credit the customer holds; negative: a debit carried to the next invoice" }),
    currency: z.string(),
    defaultPaymentMethodId: z.string().nullable(),
    address: AddressSchema.nullable(),
    taxIds: z.array(TaxIdSchema),
    taxExempt: TaxExemptSchema,
    taxExemptionRequested: z
      .object({ note: z.string().openapi({ description: "why the buyer asks, as it wrote it" }), requestedAt: Seconds })
      .nullable()
      .openapi({ description: "the buyer's pending request to be made tax exempt (only the seller sets exempt), or null; an operator's taxExempt answers and clears it" }),
    createdAt: Seconds,
  })
  .openapi("Customer");

/** Free-form metadata: string keys, at most 50, each value at most 500 characters when a string (Stripe's limits). */
export const Metadata = z
  .record(z.string().min(1).max(40), z.union([z.string().max(500), z.number(), z.boolean(), z.null()]))
  .refine((m) => Object.keys(m).length <= 50, "at most 50 keys");

export const Email = z.email().max(320);

/** The optional key of a money-moving POST (DESIGN §6.6): retries with the same key charge once. */
export const IdempotencyHeader = z.object({
  "idempotency-key": z
    .string()
    .min(1)
    .max(255)
    .optional()
    .openapi({ param: { name: "idempotency-key", in: "header" }, description: "Idempotency-Key: retries with the same key and body answer the first result and charge once (DESIGN §6.6)" }),
});

/** A credit note (DESIGN §6.10): what was given back on a paid invoice, to the card or to the balance. */
export const CreditNoteSchema = z
  .object({
    id: z.string().openapi({ example: "cn_…" }),
    number: z.string().openapi({ description: "<invoice number>-CN<n>" }),
    invoiceId: z.string(),
    customerId: z.string(),
    amountCents: z.number().int().openapi({ description: "everything given back, tax included" }),
    taxCents: z.number().int().openapi({ description: "the tax part, in proportion to the invoice's tax" }),
    currency: z.string(),
    reason: z.enum(["duplicate", "fraudulent", "order_change", "product_unsatisfactory", "external"]).openapi({ description: "external: a refund made at the payment provider itself" }),
    refundTo: z.enum(["payment_method", "balance"]),
    refundId: z.string().nullable().openapi({ description: "the provider's refund, once made" }),
    refundState: z
      .enum(["pending", "succeeded", "failed"])
      .nullable()
      .openapi({ description: "a refund to the card: pending until the provider's answer is known (billing asks again with the same key), then succeeded or failed; null for a balance note" }),
    status: z.literal("issued"),
    memo: z.string().nullable(),
    createdAt: Seconds,
  })
  .openapi("CreditNote");
