import { createRoute, z } from "@hono/zod-openapi";
import { ApiError, conflict, errorResponses, jsonBody, jsonContent, security, traceOf, type ServiceApp } from "@core/kit";
import { callerKey, platformScope } from "../access.js";
import type { BillingContext } from "../app.js";
import { cancelAtPeriodEnd, changePlan, previewJson, previewTierChange, upgrade } from "../changes.js";
import { invoiceJson, linesOf } from "../invoicing.js";
import { currentSubscription, subscriptionJson } from "../subscriptions.js";
import { bothPrefixes, keyedAnswer, withoutPrefix } from "./answers.js";
import { Email, IdempotencyHeader, InvoiceSchema, PaidTier, platformQuery, SubscriptionSchema } from "./schemas.js";

const ChangeTierInput = z
  .object({
    tier: PaidTier,
    prorationDate: z.number().int().min(0).max(99_999_999_999).optional().openapi({ description: "the preview's prorationDate: the charge is then the preview's" }),
    expectedAmountDueCents: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional().openapi({ description: "refused with 409 AMOUNT_CHANGED when the amount due differs" }),
  })
  .strict()
  .openapi("ChangeTierInput");

const UpgradeInput = z
  .object({
    planId: z.string().min(1).max(64),
    paymentMethodId: z.string().min(1).max(255),
    billingEmail: Email,
    idempotencyKey: z.uuid(),
  })
  .strict()
  .openapi("UpgradeInput");

const PreviewSchema = z
  .object({
    currentTier: z.string(),
    newTier: z.string(),
    effectiveAt: z.number().int(),
    prorationDate: z.number().int().nullable(),
    currency: z.string(),
    lines: z.array(z.object({ description: z.string(), amountCents: z.number().int(), periodStart: z.number().int(), periodEnd: z.number().int() })),
    subtotalCents: z.number().int(),
    taxCents: z.number().int(),
    creditAppliedCents: z.number().int(),
    amountDueCents: z.number().int(),
  })
  .openapi("ProrationPreview");

const ChangeAnswer = z.object({ subscription: SubscriptionSchema, invoice: InvoiceSchema.nullable() }).openapi("SubscriptionChange");

/** Table A's subscription rows (spec §4.4) and the upgrade route of table B (DESIGN §6.3). */
export function platformSubscriptionRoutes(app: ServiceApp, ctx: BillingContext) {
  const { engine } = ctx;
  const invoiceOut = async (invoice: Parameters<typeof invoiceJson>[0] | null) => (invoice ? invoiceJson(invoice, await linesOf(engine.db, invoice.id)) : null);

  for (const path of bothPrefixes("/subscription")) {
    app.openapi(
      createRoute({
        method: "get",
        path,
        summary: "The platform's current subscription; a platform billing has not seen yet is on free",
        security: security.anyCredential,
        request: { query: z.object({ platformId: platformQuery(true) }) },
        responses: { 200: jsonContent(SubscriptionSchema, "The current subscription"), ...errorResponses(401, 403, 404, 429, 503) },
      }),
      async (c) => {
        const { platformId } = await platformScope(c, ctx, "billing:read", c.req.valid("query").platformId);
        return c.json(subscriptionJson(await currentSubscription(engine.db, engine.catalogue, platformId, await engine.time.now())), 200);
      },
    );

    app.openapi(
      createRoute({
        method: "post",
        path,
        summary: "Reserved (spec §4.4): answers 501; use POST /api/billing/upgrade or POST /subscription/change-tier",
        security: security.anyCredential,
        responses: { ...errorResponses(401, 403, 501) },
      }),
      async (c) => {
        await platformScope(c, ctx, "billing:manage", c.req.query("platformId"));
        throw new ApiError(501, "NOT_IMPLEMENTED", "This route is reserved. Move a free platform to a paid plan with POST /api/billing/upgrade, and a paid one to another tier with POST /subscription/change-tier");
      },
    );
  }

  for (const path of bothPrefixes("/subscription/cancel")) {
    app.openapi(
      createRoute({
        method: "post",
        path,
        summary: "Cancel at the period's end: the platform returns to free then; cancelling twice answers the same",
        security: security.anyCredential,
        request: { query: z.object({ platformId: platformQuery(false) }) },
        responses: { 200: jsonContent(SubscriptionSchema, "The subscription, cancelAtPeriodEnd true"), ...errorResponses(401, 403, 404, 409, 429, 503) },
      }),
      async (c) => {
        const { platformId } = await platformScope(c, ctx, "billing:manage", c.req.valid("query").platformId);
        return c.json(subscriptionJson(await cancelAtPeriodEnd(engine, platformId, true)), 200);
      },
    );
  }

  for (const path of bothPrefixes("/subscription/resume")) {
    app.openapi(
      createRoute({
        method: "post",
        path,
        summary: "Resume: call off a cancellation at the period's end, so the plan renews; resuming twice, or with nothing to resume, answers the same",
        description: "What PATCH /subscriptions/{id} with cancelAtPeriodEnd false and the portal's Resume do (DESIGN §6.3), for the platform's own subscription. Nothing is charged now.",
        security: security.anyCredential,
        request: { query: z.object({ platformId: platformQuery(false) }) },
        responses: { 200: jsonContent(SubscriptionSchema, "The subscription, cancelAtPeriodEnd false"), ...errorResponses(401, 403, 404, 409, 429, 503) },
      }),
      async (c) => {
        const { platformId } = await platformScope(c, ctx, "billing:manage", c.req.valid("query").platformId);
        try {
          return c.json(subscriptionJson(await cancelAtPeriodEnd(engine, platformId, false)), 200);
        } catch (err) {
          // the domain's refusal speaks of cancelling; here nothing was asked to be cancelled
          if (err instanceof ApiError && err.code === "NOT_SUBSCRIBED") {
            throw conflict("NOT_SUBSCRIBED", "The platform is on free: there is no paid subscription to resume (a cancelled one that has ended starts again with POST /api/billing/upgrade)");
          }
          throw err;
        }
      },
    );
  }

  for (const path of bothPrefixes("/subscription/change-tier")) {
    app.openapi(
      createRoute({
        method: "post",
        path,
        summary: "Change tier: an upgrade applies now and charges the prorated difference; a downgrade waits for the period's end",
        description:
          "With the preview's prorationDate (within 5 minutes) the charge is exactly the preview's amountDueCents; with expectedAmountDueCents " +
          "that no longer holds, 409 AMOUNT_CHANGED with details.amountDueCents and nothing changes. A refused card: 402 PAYMENT_DECLINED, the tier stays.",
        security: security.anyCredential,
        request: { query: z.object({ platformId: platformQuery(false) }), headers: IdempotencyHeader, body: jsonBody(ChangeTierInput) },
        responses: { 200: jsonContent(ChangeAnswer, "The subscription, and the proration invoice of an upgrade"), ...errorResponses(401, 402, 403, 404, 409, 422, 429, 503) },
      }),
      async (c) => {
        const input = c.req.valid("json");
        const scope = await platformScope(c, ctx, "billing:manage", c.req.valid("query").platformId);
        const keyed = await ctx.idempotency.run(
          { caller: callerKey(scope.caller), route: withoutPrefix(c.req.path), key: c.req.valid("header")["idempotency-key"], request: { ...input, platformId: scope.platformId } },
          async (requestKey) => {
            const result = await changePlan(engine, { platformId: scope.platformId, ...input, requestKey });
            return { status: 200, body: { subscription: subscriptionJson(result.subscription), invoice: await invoiceOut(result.invoice) } };
          },
        );
        return keyedAnswer(c, keyed);
      },
    );
  }

  for (const path of bothPrefixes("/subscription/proration-preview")) {
    app.openapi(
      createRoute({
        method: "get",
        path,
        summary: "What a tier change would charge: the same computation as the change, so the preview never differs from the charge",
        security: security.anyCredential,
        request: { query: z.object({ tier: PaidTier.openapi({ param: { name: "tier", in: "query" } }), platformId: platformQuery(false) }) },
        responses: { 200: jsonContent(PreviewSchema, "The proration preview"), ...errorResponses(401, 403, 404, 409, 429, 503) },
      }),
      async (c) => {
        const query = c.req.valid("query");
        const { platformId } = await platformScope(c, ctx, "billing:read", query.platformId);
        return c.json(previewJson(await previewTierChange(engine, platformId, query.tier)), 200);
      },
    );
  }

  app.openapi(
    createRoute({
      method: "post",
      path: "/api/billing/upgrade",
      summary: "Upgrade a free platform to a paid plan: attach the card, charge the first period, then switch; a refused card changes nothing",
      description: "Idempotent by idempotencyKey (DESIGN §6.6). Errors carry no details (spec §2.3): a decline names its code and decline code in the message.",
      security: security.anyCredential,
      request: { query: z.object({ platformId: platformQuery(false) }), body: jsonBody(UpgradeInput) },
      responses: {
        200: jsonContent(z.object({ subscription: SubscriptionSchema, invoice: InvoiceSchema }).openapi("UpgradeAnswer"), "The paid subscription and its first invoice, paid"),
        ...errorResponses(401, 402, 403, 404, 409, 422, 429, 503),
      },
    }),
    async (c) => {
      const input = c.req.valid("json");
      const scope = await platformScope(c, ctx, "billing:manage", c.req.valid("query").platformId);
      const userId = scope.caller.kind === "principal" ? scope.caller.principal.userId : null;
      const keyed = await ctx.idempotency.run(
        { caller: callerKey(scope.caller), route: "/upgrade", key: input.idempotencyKey, request: { ...input, platformId: scope.platformId } },
        async (requestKey) => {
          const customerName = await ctx.platforms.nameOf(scope.platformId, traceOf(c));
          const result = await upgrade(engine, { platformId: scope.platformId, userId, ...input, requestKey, customerName });
          return { status: 200, body: { subscription: subscriptionJson(result.subscription), invoice: await invoiceOut(result.invoice) } };
        },
      );
      return keyedAnswer(c, keyed);
    },
  );
}
