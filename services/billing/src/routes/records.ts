import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { and, eq, or, sql } from "drizzle-orm";
import { badRequest, conflict, errorResponses, jsonBody, jsonContent, notFound, requestIdOf, security, type ServiceApp } from "@core/kit";
import { isUniqueViolation } from "@core/storage";
import type { Caller } from "@core/service-auth";
import { actorOf, callerKey, requireOperator } from "../access.js";
import type { BillingContext } from "../app.js";
import { updateSubscription, upgrade } from "../changes.js";
import { atProvider, createCustomer, customerJson, findCustomer, setDefaultCard } from "../customers.js";
import { customers, type CustomerRow } from "../db/schema.js";
import { auditOperatorAction, cancelSubscription } from "../operator.js";
import type { PaidTier as PaidTierName } from "../plans.js";
import { retryOpenInvoicesNow } from "../renewals.js";
import { findSubscription, subscriptionJson, subscriptionsOfCustomer } from "../subscriptions.js";
import { keyedAnswer } from "./answers.js";
import { paymentMethodJson } from "./payment-methods.js";
import { CustomerSchema, Email, Id, IdempotencyHeader, Metadata, pathId, PaymentMethodSchema, SubscriptionSchema } from "./schemas.js";

const Name = z.string().min(1).max(200);

const CustomerInput = z
  .object({
    email: Email,
    name: Name.optional(),
    metadata: Metadata.optional().openapi({ description: "free-form; `platformId` links the customer to a platform (one customer each), `userId` to the user POST /subscriptions names" }),
  })
  .strict()
  .openapi("CustomerInput");

const CustomerPatch = z
  .object({
    email: Email.optional(),
    name: Name.nullable().optional(),
    metadata: Metadata.optional().openapi({ description: "merged into the customer's metadata; a key set to null is removed" }),
  })
  .strict()
  .openapi("CustomerPatch");

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

const CustomerRef = z.object({ customerId: Id }).strict();

const list = <T extends z.ZodTypeAny>(item: T, name: string) => z.object({ data: z.array(item) }).openapi(name);

/** `?immediately=`: Stripe's boolean query spelling, nothing else. */
const Immediately = z.enum(["true", "false"]).optional().openapi({ param: { name: "immediately", in: "query" }, description: "true: the subscription ends now, without a refund" });

/**
 * Table B's customers, payment methods and subscriptions (spec §4.4, DESIGN §6.3): the engine's
 * records in Stripe-like shapes, for operators and services. Every write is audited.
 */
export function recordRoutes(app: ServiceApp, ctx: BillingContext) {
  const { engine } = ctx;
  const audit = (c: Context, caller: Caller, entry: { action: string; targetType: string; targetId: string; before?: unknown; after?: unknown }) =>
    auditOperatorAction(engine.db, { now: () => engine.time.wallNow() }, { ...actorOf(caller), ...entry, requestId: requestIdOf(c) });

  /** A payment method of this customer, or 404 (another customer's is as unknown as a made-up id). */
  const methodOf = async (customer: CustomerRow, paymentMethodId: string) => {
    const pm = await engine.provider.find(paymentMethodId);
    if (!pm || pm.customerId !== customer.id) throw notFound(`No payment method ${paymentMethodId} on customer ${customer.id}`);
    return pm;
  };

  /** Makes a card the customer's default, and retries its refused renewals with it at once (DESIGN §6.3). */
  const setDefault = async (customer: CustomerRow, paymentMethodId: string): Promise<CustomerRow> => {
    const row = await setDefaultCard(engine, customer.id, paymentMethodId);
    await retryOpenInvoicesNow(engine, customer.id);
    return row;
  };

  app.openapi(
    createRoute({
      method: "post",
      path: "/customers",
      summary: "Create a customer; metadata.platformId links it to a platform (one customer per platform), metadata.userId to a user",
      security: security.anyCredential,
      request: { body: jsonBody(CustomerInput) },
      responses: { 201: jsonContent(CustomerSchema, "The customer"), ...errorResponses(401, 403, 404, 409, 503) },
    }),
    async (c) => {
      const caller = await requireOperator(c, ctx.credentials);
      const input = c.req.valid("json");
      const link = (key: "platformId" | "userId") => {
        const value = input.metadata?.[key];
        if (value === undefined || value === null) return null;
        if (typeof value !== "string" || value.length === 0 || value.length > 128) throw badRequest(`metadata.${key} must be an id of 1 to 128 characters`, { path: `metadata.${key}` });
        return value;
      };
      const platformId = link("platformId");
      const userId = link("userId");
      if (platformId && !(await ctx.platforms.exists(platformId))) throw notFound(`No platform ${platformId}`);
      let customer: CustomerRow;
      try {
        customer = await atProvider(engine, await createCustomer(engine.db, await engine.time.now(), { ...input, platformId, userId, currency: engine.catalogue.currency }));
      } catch (err) {
        if (isUniqueViolation(err, "customers_platform_key")) throw conflict("CUSTOMER_EXISTS", `Platform ${platformId} has a customer already: GET /subscription?platformId=${platformId} names it`);
        throw err;
      }
      await audit(c, caller, { action: "customer.create", targetType: "customer", targetId: customer.id, after: customerJson(customer) });
      return c.json(customerJson(customer), 201);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/customers/{id}",
      summary: "A customer, with its balance and default payment method",
      security: security.anyCredential,
      request: { params: z.object({ id: pathId("id") }) },
      responses: { 200: jsonContent(CustomerSchema, "The customer"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      await requireOperator(c, ctx.credentials);
      return c.json(customerJson(await findCustomer(engine.db, c.req.valid("param").id)), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "patch",
      path: "/customers/{id}",
      summary: "Update a customer's email, name or metadata (merged; a key set to null is removed)",
      description: "Invoices already finalized keep the customer as it was (their customerSnapshot).",
      security: security.anyCredential,
      request: { params: z.object({ id: pathId("id") }), body: jsonBody(CustomerPatch) },
      responses: { 200: jsonContent(CustomerSchema, "The customer"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const caller = await requireOperator(c, ctx.credentials);
      const input = c.req.valid("json");
      const before = await findCustomer(engine.db, c.req.valid("param").id);
      const metadata = { ...before.metadata };
      for (const [key, value] of Object.entries(input.metadata ?? {})) {
        if (value === null) delete metadata[key];
        else metadata[key] = value;
      }
      if (Object.keys(metadata).length > 50) throw badRequest("metadata may hold at most 50 keys", { path: "metadata" });
      const [after] = await engine.db
        .update(customers)
        .set({
          ...(input.email !== undefined ? { email: input.email.toLowerCase() } : {}),
          ...(input.name !== undefined ? { name: input.name } : {}),
          metadata,
          updatedAt: await engine.time.now(),
        })
        .where(eq(customers.id, before.id))
        .returning();
      await atProvider(engine, after!);
      await audit(c, caller, { action: "customer.update", targetType: "customer", targetId: before.id, before: customerJson(before), after: customerJson(after!) });
      return c.json(customerJson(after!), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/customers/{id}/subscriptions",
      summary: "The customer's subscriptions, newest first, ended ones included",
      security: security.anyCredential,
      request: { params: z.object({ id: pathId("id") }) },
      responses: { 200: jsonContent(list(SubscriptionSchema, "SubscriptionList"), "The subscriptions"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      await requireOperator(c, ctx.credentials);
      const customer = await findCustomer(engine.db, c.req.valid("param").id);
      return c.json({ data: (await subscriptionsOfCustomer(engine.db, customer.id)).map(subscriptionJson) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/customers/{id}/payment-methods",
      summary: "The customer's payment methods (type card, the only type there is; others list nothing)",
      security: security.anyCredential,
      request: { params: z.object({ id: pathId("id") }), query: z.object({ type: z.string().min(1).max(40).optional().openapi({ param: { name: "type", in: "query" } }) }) },
      responses: { 200: jsonContent(list(PaymentMethodSchema, "CustomerPaymentMethodList"), "The payment methods"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      await requireOperator(c, ctx.credentials);
      const customer = await findCustomer(engine.db, c.req.valid("param").id);
      const type = c.req.valid("query").type;
      const cards = type === undefined || type === "card" ? await engine.provider.list(customer.id) : [];
      return c.json({ data: cards.map((pm) => paymentMethodJson(pm, customer)) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/customers/{id}/payment-methods/default",
      summary: "The customer's default payment method: what renewals charge (404 when there is none)",
      security: security.anyCredential,
      request: { params: z.object({ id: pathId("id") }) },
      responses: { 200: jsonContent(PaymentMethodSchema, "The default payment method"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      await requireOperator(c, ctx.credentials);
      const customer = await findCustomer(engine.db, c.req.valid("param").id);
      if (!customer.defaultPaymentMethodId) throw notFound(`Customer ${customer.id} has no default payment method`);
      return c.json(paymentMethodJson(await methodOf(customer, customer.defaultPaymentMethodId), customer), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/payment-methods/{id}/attach",
      summary: "Attach a card to a customer: a test token (pm_card_visa) makes a new pm_…; a declining test card is refused with 402, as Stripe verifies on attach",
      description: "With setAsDefault the card becomes the default and the customer's refused renewals are retried with it at once.",
      security: security.anyCredential,
      request: { params: z.object({ id: z.string().min(1).max(255).openapi({ param: { name: "id", in: "path" } }) }), body: jsonBody(z.object({ customerId: Id, setAsDefault: z.boolean().optional() }).strict().openapi("AttachInput")) },
      responses: { 200: jsonContent(PaymentMethodSchema, "The attached payment method"), ...errorResponses(400, 401, 402, 403, 404) },
    }),
    async (c) => {
      const caller = await requireOperator(c, ctx.credentials);
      const input = c.req.valid("json");
      let customer = await findCustomer(engine.db, input.customerId);
      const pm = await engine.provider.attach(customer.id, c.req.valid("param").id);
      if (input.setAsDefault) customer = await setDefault(customer, pm.id);
      await audit(c, caller, { action: "payment_method.attach", targetType: "customer", targetId: customer.id, after: { paymentMethodId: pm.id, isDefault: customer.defaultPaymentMethodId === pm.id } });
      return c.json(paymentMethodJson(pm, customer), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/payment-methods/{id}/detach",
      summary: "Detach a card from its customer; when it was the default, the customer has none until another is set",
      security: security.anyCredential,
      request: { params: z.object({ id: pathId("id") }) },
      responses: { 200: jsonContent(PaymentMethodSchema, "The detached payment method (customerId null)"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const caller = await requireOperator(c, ctx.credentials);
      const id = c.req.valid("param").id;
      const found = await engine.provider.find(id);
      if (!found?.customerId) throw notFound(`No attached payment method ${id}`);
      const customer = await findCustomer(engine.db, found.customerId);
      const pm = await engine.provider.detach(customer.id, id);
      const [after] = await engine.db
        .update(customers)
        .set({ defaultPaymentMethodId: null, updatedAt: await engine.time.now() })
        .where(and(eq(customers.id, customer.id), eq(customers.defaultPaymentMethodId, id)))
        .returning();
      await audit(c, caller, { action: "payment_method.detach", targetType: "customer", targetId: customer.id, before: { paymentMethodId: id }, after: { defaultCleared: Boolean(after) } });
      return c.json(paymentMethodJson(pm, after ?? customer), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/payment-methods/{id}",
      summary: "A payment method (a detached one too, with customerId null)",
      security: security.anyCredential,
      request: { params: z.object({ id: pathId("id") }) },
      responses: { 200: jsonContent(PaymentMethodSchema, "The payment method"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      await requireOperator(c, ctx.credentials);
      const id = c.req.valid("param").id;
      const pm = await engine.provider.find(id);
      if (!pm) throw notFound(`No payment method ${id}`);
      const customer = pm.customerId ? await findCustomer(engine.db, pm.customerId) : null;
      return c.json(paymentMethodJson(pm, customer), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/payment-methods/{id}/set-default",
      summary: "Make an attached card the customer's default; the customer's refused renewals are retried with it at once",
      security: security.anyCredential,
      request: { params: z.object({ id: pathId("id") }), body: jsonBody(CustomerRef.openapi("SetDefaultInput")) },
      responses: { 200: jsonContent(CustomerSchema, "The customer, with its new defaultPaymentMethodId"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const caller = await requireOperator(c, ctx.credentials);
      const customer = await findCustomer(engine.db, c.req.valid("json").customerId);
      const pm = await methodOf(customer, c.req.valid("param").id);
      const after = await setDefault(customer, pm.id);
      await audit(c, caller, { action: "payment_method.set_default", targetType: "customer", targetId: customer.id, before: { defaultPaymentMethodId: customer.defaultPaymentMethodId }, after: { defaultPaymentMethodId: pm.id } });
      return c.json(customerJson(after), 200);
    },
  );

  /** The one customer a user is linked to: the user who upgraded, or `metadata.userId` given at creation. */
  const customerOfUser = async (userId: string): Promise<CustomerRow> => {
    const rows = await engine.db
      .select()
      .from(customers)
      .where(or(eq(customers.userId, userId), sql`${customers.metadata} ->> 'userId' = ${userId}`));
    if (rows.length === 0) throw notFound(`No customer is linked to user ${userId}: create one with metadata.userId`);
    if (rows.length > 1) throw conflict("SEVERAL_CUSTOMERS", `User ${userId} is linked to ${rows.length} customers (${rows.map((r) => r.id).join(", ")}): subscribe one platform with POST /api/billing/upgrade`);
    return rows[0]!;
  };

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
        const customer = await customerOfUser(input.userId);
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
        await audit(c, caller, { action: "subscription.create", targetType: "subscription", targetId: result.subscription.id, after: { tier: result.subscription.tier, quantity: result.subscription.quantity, invoiceId: result.invoice.id } });
        return { status: 201, body: subscriptionJson(result.subscription) };
      });
      return keyedAnswer(c, keyed);
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
        await audit(c, caller, { action: "subscription.update", targetType: "subscription", targetId: id, before: subscriptionJson(before), after: subscriptionJson(after) });
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
      await audit(c, caller, { action: "subscription.cancel", targetType: "subscription", targetId: id, before: subscriptionJson(before), after: subscriptionJson(after) });
      return c.json(subscriptionJson(after), 200);
    },
  );
}
