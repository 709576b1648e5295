import { sql } from "drizzle-orm";
import { bigint, boolean, check, date, index, integer, jsonb, numeric, pgSchema, primaryKey, text, timestamp, uniqueIndex } from "drizzle-orm/pg-core";
import { webhookTables } from "@core/webhooks";

/**
 * What an invoice makes true once it is paid (DESIGN §6.9), applied in the transaction that marks it
 * paid. `upgrade` moves a free subscription to a paid plan from the invoice's period start (its card
 * becomes the default); `change_tier` and `seats` apply a tier and/or quantity at the invoice's
 * proration date, adding what they charged and credited to the period's record, with what the same
 * request asked besides (a new default card, the cancellation flag, which waiting change it calls
 * off); `trial_end` starts the paid period the invoice charges; `renewal` (a period's base price, or a
 * usage invoice) and `manual` settle what is owed.
 */
export type Intent =
  | { kind: "upgrade"; tier: string; planId: string; quantity: number; paymentMethodId: string; metadata: Record<string, unknown> | null }
  | {
      kind: "change_tier" | "seats";
      tier: string;
      planId: string;
      quantity: number;
      chargedCents: number;
      creditedCents: number;
      clearPendingTier: boolean;
      clearPendingQuantity: boolean;
      defaultPaymentMethodId: string | null;
      cancelAtPeriodEnd: boolean | null;
    }
  | { kind: "trial_end"; tier: string; planId: string; quantity: number }
  /** a period's renewal names what it renews (invoices before intents named it did not); a usage invoice, like a renewal, names nothing */
  | { kind: "renewal"; tier?: string; planId?: string; quantity?: number }
  | { kind: "manual" };

/** A postal address as invoices print it (DESIGN §6.11); `country` is ISO 3166-1 alpha-2, `state` the region's code. */
export interface Address {
  line1: string;
  line2: string | null;
  city: string;
  postalCode: string | null;
  state: string | null;
  country: string;
}

/** A buyer's tax id (`eu_vat`, `gb_vat`, `us_ein`, …, Stripe's types) and its value as the buyer wrote it. */
export interface TaxId {
  type: string;
  value: string;
}

/** How tax applies to a buyer (Stripe's `tax_exempt`): `reverse` is an EU business taxed by its own country. */
export type TaxExempt = "none" | "exempt" | "reverse";

/** The seller an invoice names (`CORE_BILLING_SELLER`, DESIGN §6.11), copied onto it at finalization. */
export interface Seller {
  name: string;
  addressLines: string[];
  country: string | null;
  taxId: string | null;
  email: string | null;
  website: string | null;
}

/** The buyer as an invoice names it, copied from the customer at finalization (DESIGN §6.11). */
export interface CustomerSnapshot {
  email: string;
  name: string | null;
  address?: Address | null;
  taxIds?: TaxId[];
  taxExempt?: TaxExempt;
}

/** Billing's own Postgres schema (DESIGN §1, §6): the engine's records, whichever provider moves money. */
export const billing = pgSchema("billing");

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: "date" });
/** integer minor units (cents), never floats (DESIGN §2) */
const cents = (name: string) => bigint(name, { mode: "number" });

/** One customer per platform (DESIGN §6.3); table B may create one before it has a platform. */
export const customers = billing.table(
  "customers",
  {
    id: text("id").primaryKey(),
    platformId: text("platform_id"),
    userId: text("user_id"),
    email: text("email").notNull(),
    name: text("name"),
    metadata: jsonb("metadata").$type<Record<string, unknown>>().notNull().default({}),
    /** signed: positive is credit the customer holds, negative a carried debit (DESIGN §6.3) */
    balanceCents: cents("balance_cents").notNull().default(0),
    currency: text("currency").notNull().default("usd"),
    defaultPaymentMethodId: text("default_payment_method_id"),
    /** buyer details (DESIGN §6.11), set by the tenant, the portal or an operator; copied onto each invoice */
    address: jsonb("address").$type<Address>(),
    taxIds: jsonb("tax_ids").$type<TaxId[]>().notNull().default([]),
    /** `exempt` is set by the seller only (docs/vault/concepts/invoices-and-tax.md); `reverse` the buyer may claim */
    taxExempt: text("tax_exempt", { enum: ["none", "exempt", "reverse"] }).notNull().default("none"),
    /** a buyer's pending request to be made tax exempt, with its note (why); the seller settles it by setting `taxExempt` */
    taxExemptionNote: text("tax_exemption_note"),
    taxExemptionRequestedAt: ts("tax_exemption_requested_at"),
    /** the customer at the payment provider (Stripe's `cus_…`); null on the local provider, or before the first call to Stripe */
    providerCustomerId: text("provider_customer_id"),
    /** the `<PREFIX>` of this customer's invoice numbers */
    invoicePrefix: text("invoice_prefix").notNull(),
    /** the next number to give at finalization: numbers are gapless per customer (DESIGN §6.4) */
    nextInvoiceNumber: integer("next_invoice_number").notNull().default(1),
    createdAt: ts("created_at").notNull(),
    updatedAt: ts("updated_at").notNull(),
  },
  (t) => [
    uniqueIndex("customers_platform_key").on(t.platformId).where(sql`${t.platformId} is not null`),
    index("customers_user_idx").on(t.userId),
    uniqueIndex("customers_invoice_prefix_key").on(t.invoicePrefix),
    uniqueIndex("customers_provider_customer_key").on(t.providerCustomerId).where(sql`${t.providerCustomerId} is not null`),
    // GET /customers (DESIGN §6.12): newest first, and the email search from the start of the address
    // or of its domain; text_pattern_ops so that LIKE 'acme%' uses the index under any collation
    index("customers_created_idx").on(t.createdAt, t.id),
    index("customers_email_search_idx").on(sql`lower(${t.email}) text_pattern_ops`),
    index("customers_email_domain_idx").on(sql`split_part(lower(${t.email}), '@', 2) text_pattern_ops`),
    // GET /customers?taxExemptionRequested=true: the few pending requests, newest first, without a scan of every customer
    index("customers_tax_exemption_requested_idx").on(t.createdAt, t.id).where(sql`${t.taxExemptionRequestedAt} is not null`),
    check("customers_tax_exemption_request_whole", sql`(${t.taxExemptionNote} is null) = (${t.taxExemptionRequestedAt} is null)`),
  ],
);

/** Payment methods as the provider knows them; the local provider keeps them here (DESIGN §6.1). */
export const paymentMethods = billing.table(
  "payment_methods",
  {
    id: text("id").primaryKey(),
    customerId: text("customer_id").references(() => customers.id),
    type: text("type").notNull().default("card"),
    brand: text("brand").notNull(),
    last4: text("last4").notNull(),
    expMonth: integer("exp_month").notNull(),
    expYear: integer("exp_year").notNull(),
    funding: text("funding").notNull().default("credit"),
    /** the local provider's behaviour of this card: `pm_card_chargeCustomerFail` attaches, then declines */
    failsCharges: boolean("fails_charges").notNull().default(false),
    /** `pm_card_core_answerLost`: its first charge is made and answered as unknown, as a provider that lost the answer */
    losesFirstAnswer: boolean("loses_first_answer").notNull().default(false),
    createdAt: ts("created_at").notNull(),
    detachedAt: ts("detached_at"),
  },
  (t) => [index("payment_methods_customer_idx").on(t.customerId)],
);

export const setupIntents = billing.table("setup_intents", {
  id: text("id").primaryKey(),
  customerId: text("customer_id")
    .notNull()
    .references(() => customers.id),
  clientSecret: text("client_secret").notNull(),
  status: text("status", { enum: ["requires_payment_method", "succeeded", "canceled"] }).notNull(),
  createdAt: ts("created_at").notNull(),
});

/** Customer portal sessions: one customer, one hour (DESIGN §6.1). */
export const portalSessions = billing.table("portal_sessions", {
  id: text("id").primaryKey(),
  customerId: text("customer_id")
    .notNull()
    .references(() => customers.id),
  platformId: text("platform_id").notNull(),
  returnUrl: text("return_url").notNull(),
  createdAt: ts("created_at").notNull(),
  expiresAt: ts("expires_at").notNull(),
});

/**
 * Subscriptions (DESIGN §6.3): one current row per platform (a unique partial index); a row that
 * ended keeps its id with status `canceled`, and a new free row becomes current.
 */
export const subscriptions = billing.table(
  "subscriptions",
  {
    id: text("id").primaryKey(),
    platformId: text("platform_id").notNull(),
    customerId: text("customer_id").references(() => customers.id),
    tier: text("tier").notNull(),
    planId: text("plan_id").notNull(),
    status: text("status", { enum: ["active", "trialing", "past_due", "canceled"] }).notNull(),
    current: boolean("current").notNull(),
    billingAnchor: ts("billing_anchor").notNull(),
    currentPeriodStart: ts("current_period_start").notNull(),
    currentPeriodEnd: ts("current_period_end").notNull(),
    cancelAtPeriodEnd: boolean("cancel_at_period_end").notNull().default(false),
    canceledAt: ts("canceled_at"),
    trialEnd: ts("trial_end"),
    pendingTier: text("pending_tier"),
    quantity: integer("quantity").notNull().default(1),
    /** a lower quantity takes effect at the period's end, as a downgrade does */
    pendingQuantity: integer("pending_quantity"),
    /** the trial end a `subscription.trial_will_end` event was written for (DESIGN §6.8), so it is written once */
    trialWillEndNotedFor: ts("trial_will_end_noted_for"),
    metadata: jsonb("metadata").$type<Record<string, unknown>>().notNull().default({}),
    /** what was charged for the current period, and credited back from it: credit never exceeds the charge */
    periodPaidCents: cents("period_paid_cents").notNull().default(0),
    periodCreditedCents: cents("period_credited_cents").notNull().default(0),
    /**
     * A change in progress holds the subscription (DESIGN §6.3): a lease, not a database lock, since
     * the provider's charge happens between claiming and applying. Renewals and other changes wait.
     */
    leaseId: text("lease_id"),
    leaseUntil: ts("lease_until"),
    createdAt: ts("created_at").notNull(),
    updatedAt: ts("updated_at").notNull(),
  },
  (t) => [
    uniqueIndex("subscriptions_current_key").on(t.platformId).where(sql`${t.current}`),
    index("subscriptions_platform_idx").on(t.platformId, t.createdAt),
    index("subscriptions_customer_idx").on(t.customerId),
    // the renewal worker's scan: current subscriptions by the end of their period
    index("subscriptions_due_idx").on(t.currentPeriodEnd).where(sql`${t.current}`),
    // GET /subscriptions (DESIGN §6.12): newest first, by status (the default leaves out canceled ones)
    index("subscriptions_created_idx").on(t.createdAt, t.id),
    index("subscriptions_status_created_idx").on(t.status, t.createdAt, t.id),
  ],
);

/**
 * Invoices (DESIGN §6.4). Finalized ones never change but for their payment state. A renewal is
 * invoiced once per (subscription, period): the unique index is what makes racing workers safe.
 */
export const invoices = billing.table(
  "invoices",
  {
    id: text("id").primaryKey(),
    /** creation order: ties invoices made in the same second (listings are newest first) */
    seq: bigint("seq", { mode: "number" }).generatedAlwaysAsIdentity(),
    number: text("number"),
    platformId: text("platform_id").notNull(),
    customerId: text("customer_id")
      .notNull()
      .references(() => customers.id),
    subscriptionId: text("subscription_id").references(() => subscriptions.id),
    reason: text("reason", { enum: ["subscription_create", "subscription_cycle", "subscription_update", "trial_end", "manual", "usage"] }).notNull(),
    status: text("status", { enum: ["draft", "open", "paid", "void", "uncollectible"] }).notNull(),
    currency: text("currency").notNull(),
    subtotalCents: cents("subtotal_cents").notNull(),
    taxCents: cents("tax_cents").notNull(),
    creditAppliedCents: cents("credit_applied_cents").notNull(),
    totalCents: cents("total_cents").notNull(),
    amountDueCents: cents("amount_due_cents").notNull(),
    amountPaidCents: cents("amount_paid_cents").notNull().default(0),
    /** a due amount of 1 to 49 cents is carried to the next invoice instead of charged (DESIGN §6.3) */
    amountCarriedCents: cents("amount_carried_cents").notNull().default(0),
    periodStart: ts("period_start").notNull(),
    periodEnd: ts("period_end").notNull(),
    customerSnapshot: jsonb("customer_snapshot").$type<CustomerSnapshot>().notNull(),
    /** the seller at finalization (DESIGN §6.11); null on a draft and on invoices finalized before sellers were recorded */
    seller: jsonb("seller").$type<Seller>(),
    /**
     * Tax (DESIGN §6.11): the rate that applied (percent, exact), the amount it applied to (the
     * subtotal without `carried` lines) and why (`exempt` and `reverse` pay none). Null on invoices
     * made before rates by country.
     */
    taxRatePercent: numeric("tax_rate_percent", { precision: 9, scale: 4 }),
    taxBaseCents: cents("tax_base_cents"),
    taxTreatment: text("tax_treatment", { enum: ["standard", "exempt", "reverse"] }),
    /** what credit notes gave back (DESIGN §6.10): to the card, and to the balance; together never more than `amountPaidCents` */
    amountRefundedCents: cents("amount_refunded_cents").notNull().default(0),
    amountCreditedCents: cents("amount_credited_cents").notNull().default(0),
    /** the credit notes numbered so far: the next is `<number>-CN<creditNoteCount + 1>` */
    creditNoteCount: integer("credit_note_count").notNull().default(0),
    /** the payment was disputed at the provider (Stripe's `charge.dispute.created`) */
    disputed: boolean("disputed").notNull().default(false),
    /** dunning (DESIGN §6.3): attempts made, the next retry, the last refusal */
    attemptCount: integer("attempt_count").notNull().default(0),
    nextAttemptAt: ts("next_attempt_at"),
    lastDeclineCode: text("last_decline_code"),
    /** the request that made it: a retry of the request finds its invoice again instead of making another */
    requestKey: text("request_key"),
    /** what becomes true once it is paid (DESIGN §6.9): the upgrade's plan, the new tier, the seats, a renewal */
    intent: jsonb("intent").$type<Intent>(),
    /**
     * The charge attempt in flight (DESIGN §6.9): `charging` while a process waits for the provider's
     * answer (it has until `nextCheckAt`), `pending` once the outcome is unknown; null when no attempt
     * is in flight. The attempt's provider key is `<id>:<attemptCount>`.
     */
    collectionState: text("collection_state", { enum: ["charging", "pending"] }),
    /** wall-clock time the attempt in flight began */
    collectionSince: ts("collection_since"),
    /** wall-clock time the worker asks the provider about the attempt in flight */
    nextCheckAt: ts("next_check_at"),
    /** checks of the attempt in flight so far: its backoff (1, 2, 4 … minutes, at most an hour) */
    checkCount: integer("check_count").notNull().default(0),
    /** the request that began the last attempt (a payment asked for by hand): its retry answers that attempt's outcome */
    attemptRequestKey: text("attempt_request_key"),
    /** the card the attempt in flight charges: a check that sends it again sends the same request */
    chargePaymentMethodId: text("charge_payment_method_id"),
    /** the provider's payment that paid it (a PaymentIntent at Stripe, a charge on the local provider) */
    paymentId: text("payment_id"),
    /** the provider's code of the last refusal (`card_declined`), and its decline code (`insufficient_funds`, or null) */
    lastFailureCode: text("last_failure_code"),
    createdAt: ts("created_at").notNull(),
    finalizedAt: ts("finalized_at"),
    paidAt: ts("paid_at"),
    voidedAt: ts("voided_at"),
  },
  (t) => [
    uniqueIndex("invoices_number_key").on(t.customerId, t.number),
    uniqueIndex("invoices_request_key").on(t.requestKey),
    index("invoices_platform_page_idx").on(t.platformId, t.createdAt, t.seq),
    index("invoices_retry_idx").on(t.nextAttemptAt).where(sql`${t.status} = 'open'`),
    // the worker's checks of attempts in flight, and a subscription's "is a payment in flight?"
    index("invoices_check_idx").on(t.nextCheckAt).where(sql`${t.collectionState} is not null`),
    index("invoices_in_flight_idx").on(t.subscriptionId).where(sql`${t.collectionState} is not null`),
    uniqueIndex("invoices_one_cycle_per_period_key")
      .on(t.subscriptionId, t.periodStart)
      .where(sql`${t.reason} in ('subscription_cycle', 'trial_end')`),
    // a platform's period is invoiced for usage once (DESIGN §6.5), whatever races
    uniqueIndex("invoices_one_usage_per_period_key").on(t.platformId, t.periodStart).where(sql`${t.reason} = 'usage'`),
    // credit notes never give back more than was paid (DESIGN §6.10), whatever a writer does
    check("invoices_credit_within_paid", sql`${t.amountRefundedCents} + ${t.amountCreditedCents} <= ${t.amountPaidCents}`),
  ],
);

export const invoiceLines = billing.table(
  "invoice_lines",
  {
    id: text("id").primaryKey(),
    invoiceId: text("invoice_id")
      .notNull()
      .references(() => invoices.id),
    position: integer("position").notNull(),
    kind: text("kind", { enum: ["subscription", "proration", "usage", "credit", "carried", "manual"] }).notNull(),
    description: text("description").notNull(),
    meter: text("meter"),
    /** exact decimals (DESIGN §6.2): usage quantities and fractional unit prices */
    quantity: numeric("quantity", { precision: 38, scale: 12 }),
    unitAmountCents: numeric("unit_amount_cents", { precision: 38, scale: 12 }),
    amountCents: cents("amount_cents").notNull(),
    /** the tax rate on this line (percent); null when the line is outside the tax base (a `carried` line was taxed on its own invoice) */
    taxRatePercent: numeric("tax_rate_percent", { precision: 9, scale: 4 }),
    periodStart: ts("period_start"),
    periodEnd: ts("period_end"),
  },
  (t) => [uniqueIndex("invoice_lines_position_key").on(t.invoiceId, t.position)],
);

/** Every movement of a customer's balance, never changed (DESIGN §6.3, §6.4). */
export const balanceLedger = billing.table(
  "balance_ledger",
  {
    id: text("id").primaryKey(),
    customerId: text("customer_id")
      .notNull()
      .references(() => customers.id),
    /** signed: positive raises the balance (credit), negative lowers it (applied, carried debit) */
    amountCents: cents("amount_cents").notNull(),
    currency: text("currency").notNull(),
    kind: text("kind", { enum: ["credit", "debit", "proration_credit", "trial_credit", "applied", "carried", "collected", "restored", "credit_note"] }).notNull(),
    description: text("description").notNull(),
    invoiceId: text("invoice_id").references(() => invoices.id),
    balanceAfterCents: cents("balance_after_cents").notNull(),
    actorType: text("actor_type").notNull(),
    actorId: text("actor_id"),
    createdAt: ts("created_at").notNull(),
  },
  (t) => [index("balance_ledger_customer_idx").on(t.customerId, t.createdAt)],
);

/**
 * Charges as the local provider records them (DESIGN §6.1). A charge carries the caller's
 * idempotency key: the same key answers the first outcome again and never charges twice.
 */
export const charges = billing.table(
  "charges",
  {
    id: text("id").primaryKey(),
    idempotencyKey: text("idempotency_key").notNull(),
    customerId: text("customer_id")
      .notNull()
      .references(() => customers.id),
    invoiceId: text("invoice_id").notNull(),
    paymentMethodId: text("payment_method_id").notNull(),
    amountCents: cents("amount_cents").notNull(),
    currency: text("currency").notNull(),
    status: text("status", { enum: ["succeeded", "failed"] }).notNull(),
    code: text("code"),
    declineCode: text("decline_code"),
    createdAt: ts("created_at").notNull(),
  },
  (t) => [uniqueIndex("charges_idempotency_key").on(t.idempotencyKey), index("charges_invoice_idx").on(t.invoiceId)],
);

/**
 * Credit notes (DESIGN §6.10): what was given back on a paid invoice, to the card through the
 * provider or to the customer's balance. A refund to the card is asked for with the provider key
 * `refund:<id>` after the note is written (`refundState` pending), so a crash or an unknown answer is
 * asked again with the same key and refunds once. `external` notes record a refund made at the
 * provider itself (Stripe's `charge.refunded`), found again by its `refundId`.
 */
export const creditNotes = billing.table(
  "credit_notes",
  {
    id: text("id").primaryKey(),
    number: text("number").notNull(),
    invoiceId: text("invoice_id")
      .notNull()
      .references(() => invoices.id),
    customerId: text("customer_id")
      .notNull()
      .references(() => customers.id),
    currency: text("currency").notNull(),
    /** everything given back, tax included */
    amountCents: cents("amount_cents").notNull(),
    /** the part of `amountCents` that was tax, in proportion to the invoice's */
    taxCents: cents("tax_cents").notNull(),
    reason: text("reason", { enum: ["duplicate", "fraudulent", "order_change", "product_unsatisfactory", "external"] }).notNull(),
    refundTo: text("refund_to", { enum: ["payment_method", "balance"] }).notNull(),
    status: text("status", { enum: ["issued"] }).notNull(),
    memo: text("memo"),
    /** the provider's refund (`re_…`); null for a balance note and until the provider answered */
    refundId: text("refund_id"),
    /** a refund to the card: pending until the provider answered, then succeeded or failed; null for a balance note */
    refundState: text("refund_state", { enum: ["pending", "succeeded", "failed"] }),
    refundAttempts: integer("refund_attempts").notNull().default(0),
    refundNextCheckAt: ts("refund_next_check_at"),
    refundFailure: text("refund_failure"),
    /** the request that made it: a retry of the request finds it again */
    requestKey: text("request_key"),
    actorType: text("actor_type").notNull(),
    actorId: text("actor_id"),
    createdAt: ts("created_at").notNull(),
  },
  (t) => [
    uniqueIndex("credit_notes_number_key").on(t.invoiceId, t.number),
    uniqueIndex("credit_notes_refund_key").on(t.refundId).where(sql`${t.refundId} is not null`),
    uniqueIndex("credit_notes_request_key").on(t.requestKey).where(sql`${t.requestKey} is not null`),
    index("credit_notes_customer_idx").on(t.customerId, t.createdAt),
    index("credit_notes_refund_due_idx").on(t.refundNextCheckAt).where(sql`${t.refundState} = 'pending'`),
  ],
);

/** Refunds as the local provider records them (DESIGN §6.1, §6.10): one per idempotency key, never more than the charge. */
export const refunds = billing.table(
  "refunds",
  {
    id: text("id").primaryKey(),
    idempotencyKey: text("idempotency_key").notNull(),
    chargeId: text("charge_id")
      .notNull()
      .references(() => charges.id),
    amountCents: cents("amount_cents").notNull(),
    currency: text("currency").notNull(),
    status: text("status", { enum: ["succeeded", "failed"] }).notNull(),
    failureCode: text("failure_code"),
    createdAt: ts("created_at").notNull(),
  },
  (t) => [uniqueIndex("refunds_idempotency_key").on(t.idempotencyKey), index("refunds_charge_idx").on(t.chargeId)],
);

/**
 * Billing's mail (DESIGN §6.5, §6.11): receipts, payment failures, trials ending, usage alerts. A mail
 * is written in the transaction of what it tells, rendered then, and sent by the worker (SMTP or the
 * outbox folder), so a crash never loses one and `dedupeKey` never writes one twice.
 */
export const mailOutbox = billing.table(
  "mail_outbox",
  {
    id: text("id").primaryKey(),
    kind: text("kind").notNull(),
    dedupeKey: text("dedupe_key").notNull(),
    to: text("to").notNull(),
    subject: text("subject").notNull(),
    text: text("text").notNull(),
    createdAt: ts("created_at").notNull(),
    sentAt: ts("sent_at"),
    attempts: integer("attempts").notNull().default(0),
    nextAttemptAt: ts("next_attempt_at").notNull(),
    leaseUntil: ts("lease_until"),
    lastError: text("last_error"),
  },
  (t) => [
    uniqueIndex("mail_outbox_dedupe_key").on(t.dedupeKey),
    index("mail_outbox_due_idx").on(t.nextAttemptAt).where(sql`${t.sentAt} is null`),
  ],
);

/**
 * Idempotency records (DESIGN §6.6): claimed with a lease before the effect, completed with the
 * answer, kept 24 hours. `requestKey` is drawn when the key is claimed and names what the request
 * made (its invoice), so a retry of the request finds it again, and a key claimed anew after 24
 * hours is a new request.
 */
export const idempotencyKeys = billing.table(
  "idempotency_keys",
  {
    caller: text("caller").notNull(),
    route: text("route").notNull(),
    key: text("key").notNull(),
    requestHash: text("request_hash").notNull(),
    state: text("state", { enum: ["in_progress", "completed"] }).notNull(),
    lockedUntil: ts("locked_until").notNull(),
    requestKey: text("request_key").notNull(),
    responseStatus: integer("response_status"),
    responseBody: jsonb("response_body"),
    createdAt: ts("created_at").notNull(),
    expiresAt: ts("expires_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.caller, t.route, t.key] }), index("idempotency_keys_expiry_idx").on(t.expiresAt)],
);

/**
 * The worker's backoff (DESIGN §6.9 fairness): a due item (`subscription:<id>`, `retry:<id>`,
 * `check:<id>`, `close:<platform>@<start>`) whose work failed waits until `notBefore` (wall-clock
 * time), longer after each failure, while every other item goes on. Cleared when it succeeds.
 */
export const workBackoff = billing.table("work_backoff", {
  item: text("item").primaryKey(),
  notBefore: ts("not_before").notNull(),
  failures: integer("failures").notNull(),
  lastError: text("last_error").notNull(),
});

/** Every operator action (DESIGN §6.4): who, what, before and after. */
export const operatorAudit = billing.table(
  "operator_audit",
  {
    id: text("id").primaryKey(),
    seq: bigint("seq", { mode: "number" }).generatedAlwaysAsIdentity(),
    at: ts("at").notNull(),
    actorType: text("actor_type").notNull(),
    actorId: text("actor_id"),
    action: text("action").notNull(),
    targetType: text("target_type").notNull(),
    targetId: text("target_id").notNull(),
    before: jsonb("before"),
    after: jsonb("after"),
    requestId: text("request_id"),
  },
  (t) => [index("operator_audit_page_idx").on(t.at, t.seq)],
);

/**
 * The platform registry's `tier` follows billing (DESIGN §6.3): the latest tier of each platform,
 * written in the change's transaction and pushed until the registry accepts it.
 */
export const tierSync = billing.table("tier_sync", {
  platformId: text("platform_id").primaryKey(),
  tier: text("tier").notNull(),
  version: integer("version").notNull(),
  syncedVersion: integer("synced_version").notNull().default(0),
  attempts: integer("attempts").notNull().default(0),
  nextAttemptAt: ts("next_attempt_at").notNull(),
  lastError: text("last_error"),
  updatedAt: ts("updated_at").notNull(),
});

/** The test clock's offset (DESIGN §6.3): in the database, so every replica shares it. */
export const clockOffset = billing.table("clock_offset", {
  id: integer("id").primaryKey(),
  offsetSeconds: bigint("offset_seconds", { mode: "number" }).notNull(),
  updatedAt: ts("updated_at").notNull(),
});

/** Exact usage quantities (DESIGN §6.5): up to 12 decimal places, never floats. */
const quantity = (name: string) => numeric(name, { precision: 38, scale: 12 });

/**
 * Raw usage events (DESIGN §6.5), which are also their own dedupe records: the first write of a
 * (platform, id) wins, a re-sent one meets the primary key. `occurredAt` is the event's timestamp;
 * `periodStart` names the billing period it was counted in (a row of `usage_periods`). Pruned once
 * the id need not be remembered: the timestamp + 35 days + 5 minutes.
 */
export const usageEvents = billing.table(
  "usage_events",
  {
    platformId: text("platform_id").notNull(),
    id: text("id").notNull(),
    tenantId: text("tenant_id").notNull(),
    stackId: text("stack_id").notNull(),
    meter: text("meter").notNull(),
    quantity: quantity("quantity").notNull(),
    occurredAt: ts("occurred_at").notNull(),
    periodStart: ts("period_start").notNull(),
    receivedAt: ts("received_at").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.platformId, t.id] }),
    // reconcile and the close recount read one period's events
    index("usage_events_period_idx").on(t.platformId, t.periodStart),
    // retention deletes by age; a BRIN index stays tiny on a table written in time order
    index("usage_events_occurred_brin").using("brin", t.occurredAt),
  ],
);

/**
 * The billing periods of each platform, for usage (DESIGN §6.5): a platform's periods follow one
 * another without gaps, each named by its start. The database keeps this log from
 * `billing.subscriptions` (a trigger, migration 0002): a period appears when a subscription enters
 * it, its end and tier follow the subscription while it is current, and a period cut short (an
 * upgrade from free, a trial's start) ends where the next begins. `tier` is the plan in force at the
 * period's end, the one its overage is priced with. Ingestion holds a period `FOR SHARE` while it
 * counts into it; the close takes it `FOR UPDATE`, so no event is counted after its period was invoiced.
 */
export const usagePeriods = billing.table(
  "usage_periods",
  {
    platformId: text("platform_id").notNull(),
    periodStart: ts("period_start").notNull(),
    /** null while unknown: an event arrived after the period's start, before the renewal that opens it */
    periodEnd: ts("period_end"),
    subscriptionId: text("subscription_id"),
    customerId: text("customer_id"),
    tier: text("tier").notNull(),
    status: text("status", { enum: ["open", "closed"] }).notNull().default("open"),
    closedAt: ts("closed_at"),
    invoiceId: text("invoice_id"),
    /** what each meter counted when the period closed: what its usage invoice was priced from */
    closedTotals: jsonb("closed_totals").$type<Record<string, string>>(),
  },
  (t) => [
    primaryKey({ columns: [t.platformId, t.periodStart] }),
    // the close's scan: open periods by their end
    index("usage_periods_closing_idx").on(t.periodEnd).where(sql`${t.status} = 'open'`),
  ],
);

/**
 * What retention pruned of each platform's period and meter: raw events are deleted once their ids
 * need not be remembered, and their sums move here in the same transaction, so `reconcile` can still
 * recount a period whose events are gone.
 */
export const usagePruned = billing.table(
  "usage_pruned",
  {
    platformId: text("platform_id").notNull(),
    periodStart: ts("period_start").notNull(),
    meter: text("meter").notNull(),
    quantity: quantity("quantity").notNull(),
    events: bigint("events", { mode: "number" }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.platformId, t.periodStart, t.meter] })],
);

/**
 * Usage per platform, billing period, tenant, stack, meter and UTC day (DESIGN §6.5): written by
 * ingestion in the event's transaction, read by the usage routes. A period starts and ends inside a
 * day (at the anchor's time), so the day of a period's end holds rows of two periods: a period's
 * usage is the sum of its own rows, a day's the sum over periods. `tenantId` and `stackId` are ""
 * when not given.
 */
export const usageDaily = billing.table(
  "usage_daily",
  {
    platformId: text("platform_id").notNull(),
    periodStart: ts("period_start").notNull(),
    tenantId: text("tenant_id").notNull().default(""),
    stackId: text("stack_id").notNull().default(""),
    meter: text("meter").notNull(),
    day: date("day", { mode: "string" }).notNull(),
    quantity: quantity("quantity").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.platformId, t.periodStart, t.tenantId, t.stackId, t.meter, t.day] }),
    index("usage_daily_day_idx").on(t.platformId, t.day),
  ],
);

/**
 * Each meter's usage per platform, UTC day and period, across tenants and stacks: `usage/daily`
 * reads at most a row per day, meter and period (366 × 3 × 2) whatever the number of tenants.
 */
export const usageDays = billing.table(
  "usage_days",
  {
    platformId: text("platform_id").notNull(),
    day: date("day", { mode: "string" }).notNull(),
    meter: text("meter").notNull(),
    periodStart: ts("period_start").notNull(),
    quantity: quantity("quantity").notNull(),
  },
  (t) => [primaryKey({ columns: [t.platformId, t.day, t.meter, t.periodStart] })],
);

/**
 * Each meter's total per platform and period: `usage/current` reads three rows whatever the volume,
 * and ingestion learns from its own upsert whether it crossed an alert's threshold.
 */
export const usageTotals = billing.table(
  "usage_totals",
  {
    platformId: text("platform_id").notNull(),
    periodStart: ts("period_start").notNull(),
    meter: text("meter").notNull(),
    quantity: quantity("quantity").notNull(),
  },
  (t) => [primaryKey({ columns: [t.platformId, t.periodStart, t.meter] })],
);

/** Tenants that have usage, for `usage/entities`. */
export const usageEntities = billing.table(
  "usage_entities",
  {
    platformId: text("platform_id").notNull(),
    tenantId: text("tenant_id").notNull(),
    firstSeenAt: ts("first_seen_at").notNull(),
    lastSeenAt: ts("last_seen_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.platformId, t.tenantId] })],
);

/**
 * Thresholds crossed (80 % and 100 % of a meter's included quantity), once per platform, meter and
 * period, written by the ingestion that crossed them. Its mail to the billing email is written to
 * the mail outbox (`mail_outbox`) in the same transaction.
 */
export const usageAlerts = billing.table(
  "usage_alerts",
  {
    id: text("id").primaryKey(),
    platformId: text("platform_id").notNull(),
    meter: text("meter").notNull(),
    periodStart: ts("period_start").notNull(),
    thresholdPercent: integer("threshold_percent").notNull(),
    quantity: quantity("quantity").notNull(),
    included: quantity("included").notNull(),
    triggeredAt: ts("triggered_at").notNull(),
  },
  (t) => [uniqueIndex("usage_alerts_once_key").on(t.platformId, t.meter, t.periodStart, t.thresholdPercent)],
);

export type CustomerRow = typeof customers.$inferSelect;
export type SubscriptionRow = typeof subscriptions.$inferSelect;
export type InvoiceRow = typeof invoices.$inferSelect;
export type InvoiceLineRow = typeof invoiceLines.$inferSelect;
export type PaymentMethodRow = typeof paymentMethods.$inferSelect;
export type CreditNoteRow = typeof creditNotes.$inferSelect;
export type MailRow = typeof mailOutbox.$inferSelect;
export type UsagePeriodRow = typeof usagePeriods.$inferSelect;

/**
 * Events the payment provider sent us (Stripe webhooks, DESIGN §6.1): each is handled once, by its
 * id, in the transaction of its effect; `outcome` says what it did (or why nothing).
 */
export const providerEvents = billing.table("provider_events", {
  id: text("id").primaryKey(),
  type: text("type").notNull(),
  outcome: text("outcome").notNull(),
  receivedAt: ts("received_at").notNull(),
});

/**
 * Billing's webhooks out (DESIGN §6.8): where operators want billing's events, the outbox, each
 * event's delivery to each endpoint and every attempt. The tables are the shared ones
 * (packages/webhooks, ADR 0027) in schema `billing`, as migration 0006 and 0008 made them.
 */
export const { webhookEndpoints, webhookEvents, webhookDeliveries, webhookAttempts } = webhookTables(billing);
export type { WebhookEndpointRow, WebhookEventRow } from "@core/webhooks";
