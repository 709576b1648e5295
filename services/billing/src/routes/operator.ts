import { createRoute, z } from "@hono/zod-openapi";
import { badRequest, cursorParam, errorResponses, integerQuery, jsonBody, jsonContent, limitParam, resourceNotFound, security, type ServiceApp, traceOf } from "@core/kit";
import { actorOf, auditRequest, callerKey, requireOperator } from "../access.js";
import type { BillingContext } from "../app.js";
import { invoiceJson, linesOf } from "../invoicing.js";
import { reconcileUsage } from "../metering/reconcile.js";
import { CREDIT_NOTE_REASONS, creditNoteJson, issueCreditNote } from "../credit-notes.js";
import { generateInvoice, grantCredit, grantDebit, listOperatorAudit, overrideSubscription, overview, payInvoice, startTrial, voidByOperator } from "../operator.js";
import { DEFAULT_RECONCILE_DAYS, MAX_RECONCILE_DAYS, reconcilePayments } from "../payments-reconcile.js";
import { subscriptionJson } from "../subscriptions.js";
import { keyedAnswer } from "./answers.js";
import { CreditNoteSchema, IdempotencyHeader, Id, InvoiceSchema, pathId, SubscriptionSchema, Tier } from "./schemas.js";

const CreditInput = z
  .object({
    customerId: Id,
    amount: z
      .union([z.number().gt(0), z.string().min(1).max(40)])
      .openapi({ description: "in major units (12.5 is $12.50), parsed as a decimal; at most the currency's minor-unit precision" }),
    currency: z.string().length(3).optional().openapi({ description: "ISO 4217; default the customer's (usd)" }),
    description: z.string().min(1).max(500),
  })
  .strict()
  .openapi("CreditInput");

const PaymentReconcileAnswer = z
  .object({
    consistent: z.boolean(),
    payments: z.number().int(),
    paidInvoices: z.number().int(),
    unmatchedPayments: z.array(z.object({ providerPaymentId: z.string(), invoiceId: z.string(), amountCents: z.number().int() })),
    paidWithoutPayment: z.array(z.object({ invoiceId: z.string() })),
    duplicatePayments: z.array(z.object({ invoiceId: z.string(), providerPaymentIds: z.array(z.string()) })),
  })
  .openapi("PaymentReconciliation");

const CreditAnswer = z
  .object({ customerId: z.string(), amountCents: z.number().int(), currency: z.string(), description: z.string(), balanceCents: z.number().int() })
  .openapi("Credit");

const DebitAnswer = z
  .object({ customerId: z.string(), amountCents: z.number().int(), currency: z.string(), description: z.string(), balanceCents: z.number().int() })
  .openapi("Debit");

const CreditNoteInput = z
  .object({
    amountCents: z.number().int().gt(0).max(Number.MAX_SAFE_INTEGER).openapi({ description: "what is given back, tax included, in the invoice's minor units" }),
    reason: z.enum(CREDIT_NOTE_REASONS),
    refundTo: z.enum(["payment_method", "balance"]).openapi({ description: "payment_method: refunded to the card through the provider; balance: credited to the customer's balance" }),
    memo: z.string().min(1).max(500).optional(),
  })
  .strict()
  .openapi("CreditNoteInput");

const OverviewSchema = z
  .object({
    currency: z.string(),
    mrrCents: z.number().int(),
    activePlatforms: z.number().int(),
    paidPlatforms: z.number().int(),
    trialingPlatforms: z.number().int(),
    pastDuePlatforms: z.number().int(),
    platformsByTier: z.object({ free: z.number().int(), starter: z.number().int(), growth: z.number().int(), scale: z.number().int() }),
    revenueThisMonthCents: z.number().int(),
    platformCountsComplete: z.boolean().openapi({
      description:
        "true: the platform counts cover every platform the platform registry knows (those billing has not read yet are active and free). " +
        "false: the registry could not be asked, and they cover only the platforms billing has read; MRR and revenue are billing's own and complete either way",
    }),
  })
  .openapi("BillingOverview");

const AuditEntrySchema = z
  .object({
    id: z.string(),
    at: z.number().int(),
    actorType: z.string(),
    actorId: z.string().nullable(),
    action: z.string(),
    targetType: z.string(),
    targetId: z.string(),
    before: z.unknown(),
    after: z.unknown(),
    requestId: z.string().nullable(),
  })
  .openapi("BillingAuditEntry");

const ReconcileAnswer = z
  .object({
    platformId: z.string(),
    periodStart: z.number().int(),
    periodEnd: z.number().int().nullable(),
    status: z.enum(["open", "closed"]),
    invoiceId: z.string().nullable().openapi({ description: "the period's usage invoice, once closed with an overage" }),
    consistent: z.boolean().openapi({ description: "raw events = rollups = totals, and once closed = what was invoiced, line for line" }),
    meters: z.array(
      z.object({
        meter: z.string(),
        events: z.string().openapi({ description: "the raw events' sum (with what retention pruned), a decimal string" }),
        rollups: z.string(),
        invoiced: z.string().nullable().openapi({ description: "what the close counted; null while the period is open" }),
      }),
    ),
  })
  .openapi("UsageReconciliation");

/** The operator routes of table B (spec §4.4; DESIGN §6.3, §6.4): every action audited. */
export function operatorRoutes(app: ServiceApp, ctx: BillingContext) {
  const { engine } = ctx;

  // a credit and a debit are one movement of the balance ledger, in opposite directions (DESIGN §6.4, §6.10)
  const adjustments = [
    {
      kind: "credit" as const,
      path: "/operator/credits",
      summary: "Credit a customer: an amount in major units, kept as integer minor units in the balance ledger and applied to the next invoices",
      description: undefined,
      answer: jsonContent(CreditAnswer, "The credit and the balance after it"),
      grant: grantCredit,
    },
    {
      kind: "debit" as const,
      path: "/operator/debits",
      summary: "Debit a customer: the body of a credit, lowering the balance through the same ledger; the debt is added to the next invoice as a carried line",
      description: "DESIGN §6.10: takes back a credit given by mistake, or charges for something outside the plan. Another currency than the customer's is 409 CURRENCY_MISMATCH.",
      answer: jsonContent(DebitAnswer, "The debit and the balance after it"),
      grant: grantDebit,
    },
  ];
  for (const adjustment of adjustments) {
    app.openapi(
      createRoute({
        method: "post",
        path: adjustment.path,
        summary: adjustment.summary,
        ...(adjustment.description && { description: adjustment.description }),
        security: security.anyCredential,
        request: { headers: IdempotencyHeader, body: jsonBody(CreditInput) },
        responses: { 201: adjustment.answer, ...errorResponses(400, 401, 403, 404, 409, 422) },
      }),
      async (c) => {
        const caller = await requireOperator(c, ctx.credentials);
        const input = c.req.valid("json");
        const keyed = await ctx.idempotency.run({ caller: callerKey(caller), route: adjustment.path, key: c.req.valid("header")["idempotency-key"], request: input }, async () => {
          const result = await adjustment.grant(engine, input, actorOf(caller));
          await auditRequest(c, engine, caller, {
            action: `${adjustment.kind}.grant`,
            targetType: "customer",
            targetId: input.customerId,
            before: result.before,
            after: { ...result.after, amountCents: result.amountCents },
          });
          return {
            status: 201,
            body: { customerId: input.customerId, amountCents: result.amountCents, currency: result.currency, description: input.description, balanceCents: result.after.balanceCents },
          };
        });
        return keyedAnswer(c, keyed);
      },
    );
  }

  app.openapi(
    createRoute({
      method: "post",
      path: "/operator/invoices/{id}/credit-notes",
      summary: "Issue a credit note on a paid invoice: refunded to the card through the payment provider, or credited to the customer's balance; never more than was paid",
      description:
        "DESIGN §6.10. 409 INVOICE_NOT_PAID for an invoice that is not paid; 409 CREDIT_EXCEEDS_PAID (details: amountPaidCents, amountRefundedCents, amountCreditedCents, remainingCents) when the notes would give back more than was paid; " +
        "409 NO_PAYMENT_TO_REFUND for a refund to the card of an invoice no provider payment paid. The tax part is credited in proportion. " +
        "A refund is asked of the provider with the key refund:<creditNoteId>; an unknown outcome answers the note with refundState pending, and billing asks again with the same key until it knows; a refusal is 402 REFUND_FAILED (nothing refunded). " +
        "Retried with the same Idempotency-Key it answers the first note and refunds once.",
      security: security.anyCredential,
      request: { params: z.object({ id: pathId("id") }), headers: IdempotencyHeader, body: jsonBody(CreditNoteInput) },
      responses: { 201: jsonContent(CreditNoteSchema, "The credit note"), ...errorResponses(400, 401, 402, 403, 404, 409, 422) },
    }),
    async (c) => {
      const caller = await requireOperator(c, ctx.credentials);
      const id = c.req.valid("param").id;
      const input = c.req.valid("json");
      const keyed = await ctx.idempotency.run(
        { caller: callerKey(caller), route: "/operator/invoices/{id}/credit-notes", key: c.req.valid("header")["idempotency-key"], request: { id, ...input } },
        async (requestKey) => {
          const note = await issueCreditNote(engine, id, input, actorOf(caller), requestKey, ctx.logger);
          await auditRequest(c, engine, caller, {
            action: "credit_note.create",
            targetType: "credit_note",
            targetId: note.id,
            after: { invoiceId: note.invoiceId, number: note.number, amountCents: note.amountCents, taxCents: note.taxCents, refundTo: note.refundTo, refundState: note.refundState, reason: note.reason },
          });
          return { status: 201, body: creditNoteJson(note) };
        },
      );
      return keyedAnswer(c, keyed);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/operator/invoices/generate",
      summary: "Invoice what is pending for a customer (carried balance, usage so far), finalize it and charge it; nothing pending is 409 NOTHING_TO_INVOICE",
      security: security.anyCredential,
      request: { headers: IdempotencyHeader, body: jsonBody(z.object({ customerId: Id, description: z.string().min(1).max(500).optional() }).strict().openapi("GenerateInvoiceInput")) },
      responses: { 201: jsonContent(InvoiceSchema, "The finalized invoice"), ...errorResponses(401, 403, 404, 409, 422) },
    }),
    async (c) => {
      const caller = await requireOperator(c, ctx.credentials);
      const input = c.req.valid("json");
      const keyed = await ctx.idempotency.run({ caller: callerKey(caller), route: "/operator/invoices/generate", key: c.req.valid("header")["idempotency-key"], request: input }, async (requestKey) => {
        const invoice = await generateInvoice(engine, input, requestKey);
        await auditRequest(c, engine, caller, { action: "invoice.generate", targetType: "invoice", targetId: invoice.id, after: { status: invoice.status, amountDueCents: invoice.amountDueCents } });
        return { status: 201, body: invoiceJson(invoice, await linesOf(engine.db, invoice.id)) };
      });
      return keyedAnswer(c, keyed);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/operator/invoices/{id}/pay",
      summary: "Collect an open invoice now, with the customer's default card or the one given: paid (200), refused (402, a dunning attempt), or unknown (503 PAYMENT_PENDING)",
      description:
        "DESIGN §6.9: the invoice's next attempt, through the one collection path. Retried with the same Idempotency-Key, it answers what that attempt came to and never begins another. " +
        "An uncollectible invoice can be paid too (ADR 0021): it becomes paid and nothing is restored; a refusal leaves it uncollectible. " +
        "409 INVOICE_NOT_OPEN for an invoice that is neither open nor uncollectible, PAYMENT_PENDING while a payment of it is in flight.",
      security: security.anyCredential,
      request: {
        params: z.object({ id: pathId("id") }),
        headers: IdempotencyHeader,
        body: jsonBody(z.object({ paymentMethodId: Id.optional().openapi({ description: "a card of the invoice's customer; default its default card" }) }).strict().openapi("PayInvoiceInput")),
      },
      responses: { 200: jsonContent(InvoiceSchema, "The paid invoice"), ...errorResponses(400, 401, 402, 403, 404, 409, 422, 503) },
    }),
    async (c) => {
      const caller = await requireOperator(c, ctx.credentials);
      const id = c.req.valid("param").id;
      const input = c.req.valid("json");
      const keyed = await ctx.idempotency.run({ caller: callerKey(caller), route: "/operator/invoices/{id}/pay", key: c.req.valid("header")["idempotency-key"], request: { id, ...input } }, async (requestKey) => {
        const invoice = await payInvoice(engine, id, input, requestKey);
        await auditRequest(c, engine, caller, { action: "invoice.pay", targetType: "invoice", targetId: invoice.id, after: { status: invoice.status, amountPaidCents: invoice.amountPaidCents } });
        return { status: 200, body: invoiceJson(invoice, await linesOf(engine.db, invoice.id)) };
      });
      return keyedAnswer(c, keyed);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/operator/payments/reconcile",
      summary: "The payment provider's payments for billing against the invoices: consistent when every payment paid one invoice, by its amount, and every invoice paid with money has exactly one payment",
      description:
        "DESIGN §6.9. `from` and `to` are Unix seconds of wall-clock time, the provider's (when a payment was made, when an invoice's paying attempt began); default the last 35 days, at most 400 days at once. " +
        "unmatchedPayments: money taken for an invoice that is not paid, or for another amount; paidWithoutPayment: a paid invoice the provider has no payment for; duplicatePayments: an invoice paid more than once.",
      security: security.anyCredential,
      request: {
        query: z.object({
          from: integerQuery(0, 253_402_300_799).optional().openapi({ param: { name: "from", in: "query" }, description: "Unix seconds; default `to` less 35 days" }),
          to: integerQuery(0, 253_402_300_799).optional().openapi({ param: { name: "to", in: "query" }, description: "Unix seconds; default now" }),
        }),
      },
      responses: { 200: jsonContent(PaymentReconcileAnswer, "The reconciliation"), ...errorResponses(400, 401, 403, 429, 503) },
    }),
    async (c) => {
      await requireOperator(c, ctx.credentials);
      const query = c.req.valid("query");
      const to = query.to ?? Math.floor(engine.time.wallNow().getTime() / 1000);
      const from = query.from ?? to - DEFAULT_RECONCILE_DAYS * 86_400;
      if (from > to) throw badRequest("`from` must not come after `to`", { path: "from" });
      if (to - from > MAX_RECONCILE_DAYS * 86_400) throw badRequest(`At most ${MAX_RECONCILE_DAYS} days at once`, { path: "to" });
      return c.json(await reconcilePayments(engine, { from: new Date(from * 1000), to: new Date(to * 1000) }), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/operator/invoices/{id}/void",
      summary: "Void an open invoice and give back the balance it applied; a paid invoice cannot be voided (409)",
      security: security.anyCredential,
      request: { params: z.object({ id: pathId("id") }) },
      responses: { 200: jsonContent(InvoiceSchema, "The voided invoice"), ...errorResponses(401, 403, 404, 409) },
    }),
    async (c) => {
      const caller = await requireOperator(c, ctx.credentials);
      const { before, after } = await voidByOperator(engine, c.req.valid("param").id, actorOf(caller));
      await auditRequest(c, engine, caller, { action: "invoice.void", targetType: "invoice", targetId: after.id, before: { status: before.status }, after: { status: after.status } });
      return c.json(invoiceJson(after, await linesOf(engine.db, after.id)), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "patch",
      path: "/operator/subscriptions/{id}/override",
      summary: "Set the tier or the trial's end directly, without proration; a trialEnd in the past ends the trial now",
      security: security.anyCredential,
      request: {
        params: z.object({ id: pathId("id") }),
        body: jsonBody(
          z
            .object({ planTier: Tier.optional(), trialEnd: z.number().int().min(0).max(99_999_999_999).optional().openapi({ description: "Unix seconds" }) })
            .strict()
            .refine((v) => v.planTier !== undefined || v.trialEnd !== undefined, "Give planTier, trialEnd or both")
            .openapi({ minProperties: 1 })
            .openapi("OverrideInput"),
        ),
      },
      responses: { 200: jsonContent(SubscriptionSchema, "The subscription"), ...errorResponses(401, 403, 404, 409) },
    }),
    async (c) => {
      const caller = await requireOperator(c, ctx.credentials);
      const { before, after } = await overrideSubscription(engine, c.req.valid("param").id, c.req.valid("json"));
      await auditRequest(c, engine, caller, { action: "subscription.override", targetType: "subscription", targetId: after.id, before: subscriptionJson(before), after: subscriptionJson(after) });
      return c.json(subscriptionJson(after), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/operator/subscriptions/{id}/trial",
      summary: "Start a trial of trialDays (1-365): nothing is charged until it ends; unused paid time is credited; on free it is a trial of starter",
      security: security.anyCredential,
      request: { params: z.object({ id: pathId("id") }), body: jsonBody(z.object({ trialDays: z.number().int().gt(0).max(365) }).strict().openapi("TrialInput")) },
      responses: { 200: jsonContent(SubscriptionSchema, "The trialing subscription"), ...errorResponses(401, 403, 404, 409) },
    }),
    async (c) => {
      const caller = await requireOperator(c, ctx.credentials);
      const { before, after } = await startTrial(engine, c.req.valid("param").id, c.req.valid("json").trialDays);
      await auditRequest(c, engine, caller, { action: "subscription.trial", targetType: "subscription", targetId: after.id, before: subscriptionJson(before), after: subscriptionJson(after) });
      return c.json(subscriptionJson(after), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/operator/overview",
      summary: "Monthly recurring revenue, platforms by state and tier (every platform the registry knows), revenue collected this month",
      description:
        "DESIGN §6.12. When the platform registry cannot be asked the answer is still 200, with platformCountsComplete false: the platform counts are then those billing has read.",
      security: security.anyCredential,
      responses: { 200: jsonContent(OverviewSchema, "The overview"), ...errorResponses(401, 403) },
    }),
    async (c) => {
      await requireOperator(c, ctx.credentials);
      return c.json(await overview(engine, () => ctx.platforms.platformIdPages(traceOf(c))), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/operator/audit",
      summary: "Every operator action, newest first: who, what, before and after",
      security: security.anyCredential,
      request: { query: z.object({ cursor: cursorParam(), limit: limitParam(50, 100) }) },
      responses: { 200: jsonContent(z.object({ data: z.array(AuditEntrySchema), cursor: z.string().nullable() }).openapi("BillingAuditPage"), "A page of the audit"), ...errorResponses(401, 403) },
    }),
    async (c) => {
      await requireOperator(c, ctx.credentials);
      return c.json(await listOperatorAudit(engine.db, c.req.valid("query")), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/operator/usage/reconcile",
      summary: "Recount a period's raw events against its rollups and, once closed, its invoice: proof that nothing was lost or counted twice",
      security: security.anyCredential,
      request: {
        query: z.object({
          platformId: Id.openapi({ param: { name: "platformId", in: "query" } }),
          periodStart: z.coerce
            .number()
            .int()
            .min(0)
            .max(253_402_300_799)
            .optional()
            .openapi({ param: { name: "periodStart", in: "query" }, description: "Unix seconds of the period's start; default the current period" }),
        }),
      },
      responses: { 200: jsonContent(ReconcileAnswer, "The recount"), ...errorResponses(400, 401, 403, 404, 429, 503) },
    }),
    async (c) => {
      await requireOperator(c, ctx.credentials);
      const query = c.req.valid("query");
      if (!(await ctx.platforms.exists(query.platformId, traceOf(c)))) throw resourceNotFound("platform");
      return c.json(await reconcileUsage(ctx.engine, query.platformId, query.periodStart), 200);
    },
  );
}
