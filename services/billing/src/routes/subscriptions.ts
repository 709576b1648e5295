import { createRoute, z } from "@hono/zod-openapi";
import { badRequest, conflict, cursorParam, errorResponses, jsonBody, jsonContent, limitParam, security, type ServiceApp } from "@core/kit";
import { auditRequest, callerKey, requireOperator } from "../access.js";
import type { BillingContext } from "../app.js";
import { updateSubscription, upgrade } from "../changes.js";
import { customerOfUser } from "../customers.js";
import { cancelSubscription } from "../operator.js";
import type { PaidTier as PaidTierName } from "../plans.js";
import { findSubscription, listSubscriptions, SUBSCRIPTION_LIST_STATUSES, subscriptionJson } from "../subscriptions.js";
import { keyedAnswer } from "./answers.js";
import { Id, IdempotencyHeader, Metadata, pathId, SubscriptionSchema, Tier } from "./schemas.js";

const SubscriptionInput = z
  .object({
    userId: Id,
    priceId: Id.openapi({ description: "a plan's priceId, as GET /plans lists them (price_starter_monthly)" }),
    paymentMethodId: z.string().min(1).max(255),
    quantity: z.number().int().gt(0).max(10_000).optional(),
    metadata: Metadata.optional(),
  })
  .strict()
  .openapi("SubscriptionInput");

const SubscriptionPatch = z
  .object({
    priceId: Id.optional(),
    quantity: z.number().int().gt(0).max(10_000).optional(),
    paymentMethodId: z.string().min(1).max(255).optional(),
    cancelAtPeriodEnd: z.boolean().optional(),
  })
  .strict()
  .openapi("SubscriptionPatch");

/** `?immediately=`: Stripe's boolean query spelling, nothing else. */
const Immediately = z.enum(["true", "false"]).optional().openapi({ param: { name: "immediately", in: "query" }, description: "true: the subscription ends now, without a refund" });

/**
 * Table B's subscriptions (spec §4.4, DESIGN §6.3): the engine's subscription records in Stripe-like
 * shapes, for operators and services. A platform's own view of its subscription is table A's
 * `/subscription` (`subscription.ts`). Every write is audited.
 */
export function subscriptionRoutes(app: ServiceApp, ctx: BillingContext) {
  const { engine } = ctx;

  const planOfPrice = (priceId: string) => {
    const plan = engine.catalogue.byPriceId(priceId);
    if (!plan) throw badRequest(`No price "${priceId}": see the priceId of each plan at GET /plans`, { path: "priceId" });
    if (plan.tier === "free") throw badRequest("The free plan is not subscribed to: a platform is on it until it subscribes, and returns to it when a subscription is canceled", { path: "priceId" });
    return plan;
  };

  app.openapi(
    createRoute({
      method: "post",
      path: "/subscriptions",
      summary: "Subscribe the customer linked to userId to the plan of priceId, charging the first period as upgrade does",
      description: "The customer must be linked to a platform on free (else 409 ALREADY_SUBSCRIBED or NO_PLATFORM). A refused card: 402, nothing changes.",
      security: security.anyCredential,
      request: { headers: IdempotencyHeader, body: jsonBody(SubscriptionInput) },
      responses: { 201: jsonContent(SubscriptionSchema, "The paid subscription"), ...errorResponses(400, 401, 402, 403, 404, 409, 422, 503) },
    }),
    async (c) => {
      const caller = await requireOperator(c, ctx.credentials);
      const input = c.req.valid("json");
      const keyed = await ctx.idempotency.run({ caller: callerKey(caller), route: "/subscriptions", key: c.req.valid("header")["idempotency-key"], request: input }, async (requestKey) => {
        const plan = planOfPrice(input.priceId);
        const customer = await customerOfUser(engine.db, input.userId);
        if (!customer.platformId) throw conflict("NO_PLATFORM", `Customer ${customer.id} is not linked to a platform: give metadata.platformId when creating it`);
        const result = await upgrade(engine, {
          platformId: customer.platformId,
          userId: input.userId,
          planId: plan.id,
          paymentMethodId: input.paymentMethodId,
          billingEmail: customer.email,
          quantity: input.quantity,
          metadata: input.metadata,
          requestKey,
        });
        await auditRequest(c, engine, caller, { action: "subscription.create", targetType: "subscription", targetId: result.subscription.id, after: { tier: result.subscription.tier, quantity: result.subscription.quantity, invoiceId: result.invoice.id } });
        return { status: 201, body: subscriptionJson(result.subscription) };
      });
      return keyedAnswer(c, keyed);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/subscriptions",
      summary: "Find subscriptions, newest first, by status, tier and platform; cursor is null on the last page",
      description:
        "Without status, the subscriptions that have not ended (Stripe's default); status=canceled lists the ended ones, status=all every one. " +
        "Filters combine with AND. limit 1-100, default 25.",
      security: security.anyCredential,
      request: {
        query: z.object({
          status: z.enum(SUBSCRIPTION_LIST_STATUSES).optional().openapi({ param: { name: "status", in: "query" }, description: "active, trialing, past_due, canceled, or all; default every status but canceled" }),
          tier: Tier.optional().openapi({ param: { name: "tier", in: "query" } }),
          platformId: Id.optional().openapi({ param: { name: "platformId", in: "query" }, description: "the platform's subscriptions (with status=all its ended ones too)" }),
          cursor: cursorParam(),
          limit: limitParam(25, 100),
        }),
      },
      responses: {
        200: jsonContent(z.object({ data: z.array(SubscriptionSchema), cursor: z.string().nullable() }).openapi("SubscriptionPage"), "A page of subscriptions"),
        ...errorResponses(400, 401, 403),
      },
    }),
    async (c) => {
      await requireOperator(c, ctx.credentials);
      return c.json(await listSubscriptions(engine.db, c.req.valid("query")), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/subscriptions/{id}",
      summary: "A subscription, an ended one too (status canceled)",
      security: security.anyCredential,
      request: { params: z.object({ id: pathId("id") }) },
      responses: { 200: jsonContent(SubscriptionSchema, "The subscription"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      await requireOperator(c, ctx.credentials);
      return c.json(subscriptionJson(await findSubscription(engine.db, c.req.valid("param").id)), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "patch",
      path: "/subscriptions/{id}",
      summary: "Update a current subscription: its default card, its plan or quantity (more is prorated and charged now, less waits for the period's end), cancel or resume at the period's end",
      description: "Applied in that order; a refused charge (402) leaves the plan and quantity as they were.",
      security: security.anyCredential,
      request: { params: z.object({ id: pathId("id") }), headers: IdempotencyHeader, body: jsonBody(SubscriptionPatch) },
      responses: { 200: jsonContent(SubscriptionSchema, "The subscription"), ...errorResponses(400, 401, 402, 403, 404, 409, 422, 503) },
    }),
    async (c) => {
      const caller = await requireOperator(c, ctx.credentials);
      const id = c.req.valid("param").id;
      const input = c.req.valid("json");
      const keyed = await ctx.idempotency.run({ caller: callerKey(caller), route: "/subscriptions/{id}", key: c.req.valid("header")["idempotency-key"], request: { id, ...input } }, async (requestKey) => {
        const tier = input.priceId === undefined ? undefined : (planOfPrice(input.priceId).tier as PaidTierName);
        const customerId = (await findSubscription(engine.db, id)).customerId;
        // the card is attached first (a retry gets the same one); it becomes the default only with the rest of the change
        const card = input.paymentMethodId !== undefined && customerId ? await engine.provider.attach(customerId, input.paymentMethodId, { idempotencyKey: `${requestKey}:attach` }) : null;
        const { before } = await updateSubscription(engine, id, {
          tier,
          quantity: input.quantity,
          cancelAtPeriodEnd: input.cancelAtPeriodEnd,
          defaultPaymentMethodId: input.paymentMethodId === undefined ? undefined : (card?.id ?? input.paymentMethodId),
          requestKey,
        });
        const after = await findSubscription(engine.db, id);
        await auditRequest(c, engine, caller, { action: "subscription.update", targetType: "subscription", targetId: id, before: subscriptionJson(before), after: subscriptionJson(after) });
        return { status: 200, body: subscriptionJson(after) };
      });
      return keyedAnswer(c, keyed);
    },
  );

  app.openapi(
    createRoute({
      method: "delete",
      path: "/subscriptions/{id}",
      summary: "Cancel a subscription at its period's end, or now with immediately=true (no refund); the platform returns to free",
      security: security.anyCredential,
      request: { params: z.object({ id: pathId("id") }), query: z.object({ immediately: Immediately }) },
      responses: { 200: jsonContent(SubscriptionSchema, "The subscription: canceled, or cancelAtPeriodEnd true"), ...errorResponses(400, 401, 403, 404, 409, 503) },
    }),
    async (c) => {
      const caller = await requireOperator(c, ctx.credentials);
      const id = c.req.valid("param").id;
      const found = await findSubscription(engine.db, id);
      // cancelling what has ended answers it as it is, as a repeated DELETE should
      if (!found.current && found.status === "canceled") return c.json(subscriptionJson(found), 200);
      const { before, after } = await cancelSubscription(engine, id, c.req.valid("query").immediately === "true");
      await auditRequest(c, engine, caller, { action: "subscription.cancel", targetType: "subscription", targetId: id, before: subscriptionJson(before), after: subscriptionJson(after) });
      return c.json(subscriptionJson(after), 200);
    },
  );
}
