import { createRoute, z } from "@hono/zod-openapi";
import { conflict, errorResponses, jsonBody, jsonContent, resourceNotFound, security, type ServiceApp } from "@core/kit";
import { auditRequest, callerKey, platformScope, requireOperator, type PlatformScope } from "../access.js";
import type { BillingContext } from "../app.js";
import { atProvider, cardOfCustomer, customerJson, customerOfPlatform, detachCard, ensurePlatformCustomer, findCustomer, setDefaultCard } from "../customers.js";
import type { CustomerRow } from "../db/schema.js";
import type { PaymentMethodView } from "../provider/types.js";
import { retryOpenInvoicesNow } from "../renewals.js";
import { bothPrefixes, keyedAnswer, withoutPrefix } from "./answers.js";
import { CustomerSchema, Id, IdempotencyHeader, pathId, PaymentMethodSchema, platformQuery } from "./schemas.js";

export const paymentMethodJson = (pm: PaymentMethodView, customer: Pick<CustomerRow, "defaultPaymentMethodId"> | null) => ({
  ...pm,
  isDefault: customer?.defaultPaymentMethodId === pm.id,
});

const SetupIntentSchema = z
  .object({ id: z.string(), clientSecret: z.string(), status: z.string(), customerId: z.string() })
  .openapi("SetupIntent");

/** Table A's payment-method rows (spec §4.4): the cards of the platform's customer, and a setup intent to add one. */
export function platformPaymentMethodRoutes(app: ServiceApp, ctx: BillingContext) {
  const { engine } = ctx;

  for (const path of bothPrefixes("/payment-methods")) {
    app.openapi(
      createRoute({
        method: "get",
        path,
        summary: "The payment methods of the platform's customer (none before its first upgrade)",
        security: security.anyCredential,
        request: { query: z.object({ platformId: platformQuery(false) }) },
        responses: { 200: jsonContent(z.object({ data: z.array(PaymentMethodSchema) }).openapi("PaymentMethodList"), "The payment methods"), ...errorResponses(401, 403, 404, 429, 503) },
      }),
      async (c) => {
        const { platformId } = await platformScope(c, ctx, "billing:read", c.req.valid("query").platformId);
        const customer = await customerOfPlatform(engine.db, platformId);
        const cards = customer ? await engine.provider.list(customer.id) : [];
        return c.json({ data: cards.map((pm) => paymentMethodJson(pm, customer)) }, 200);
      },
    );
  }

  for (const path of bothPrefixes("/setup-intent")) {
    app.openapi(
      createRoute({
        method: "post",
        path,
        summary: "A setup intent for collecting a payment method of the platform's customer (made with the caller's email when there is none yet)",
        security: security.anyCredential,
        request: { query: z.object({ platformId: platformQuery(false) }) },
        responses: { 201: jsonContent(SetupIntentSchema, "The setup intent"), ...errorResponses(401, 403, 404, 409, 429, 503) },
      }),
      async (c) => {
        const scope = await platformScope(c, ctx, "billing:manage", c.req.valid("query").platformId);
        const customer = await customerToHoldCards(ctx, scope);
        return c.json(await engine.provider.createSetupIntent(customer.id), 201);
      },
    );
  }
  tenantCardRoutes(app, ctx);
}

/**
 * The platform's customer, to hold a card: made with the caller's email when there is none yet. Only
 * someone of the platform's own organization becomes its customer; an operator's email never does.
 */
async function customerToHoldCards(ctx: BillingContext, scope: PlatformScope): Promise<CustomerRow> {
  const { engine } = ctx;
  const customer = await customerOfPlatform(engine.db, scope.platformId);
  if (customer) return customer;
  if (scope.caller.kind !== "principal" || scope.caller.principal.platformId !== scope.platformId || !scope.caller.principal.email) {
    throw conflict("NO_CUSTOMER", "The platform has no billing customer yet: its first upgrade makes one");
  }
  return atProvider(
    engine,
    await ensurePlatformCustomer(engine.db, await engine.time.now(), {
      platformId: scope.platformId,
      userId: scope.caller.principal.userId,
      email: scope.caller.principal.email,
      name: await ctx.platforms.nameOf(scope.platformId),
      currency: engine.catalogue.currency,
    }),
  );
}

const CardInput = z
  .object({
    paymentMethodId: z
      .string()
      .min(1)
      .max(255)
      .openapi({ description: "a payment method id from a setup intent, or one of Stripe's test tokens (pm_card_visa) with the local provider" }),
    setAsDefault: z.boolean().optional().openapi({ description: "make it the default card: renewals charge it, and refused renewals are retried with it at once" }),
  })
  .strict()
  .openapi("CardInput");

const cardParam = z.object({ id: pathId("id") });

/**
 * The tenant's own card management (DESIGN §6.1, §6.3): what the portal's card forms and table B's
 * attach, detach and set-default do, for the platform's own customer, with `billing:manage` (operators
 * and services name the platform with `platformId`). These calls run the same domain functions
 * (`setDefaultCard`, `detachCard`, `retryOpenInvoicesNow`), so the three ways never differ.
 *
 * - `POST /payment-methods` `{ paymentMethodId, setAsDefault? }` attaches (201). The first card of a
 *   customer becomes its default, as the portal does. A new default retries refused renewals at once,
 *   so money may move: the route takes `Idempotency-Key` (a retried attach makes one card, not two).
 * - `DELETE /payment-methods/{id}` detaches (200, the card with customerId null). Removing the default
 *   card is allowed, also while a paid subscription runs (Stripe's rule): the customer then has no
 *   default until another is set, and the next renewal fails over to dunning unless one is added.
 * - `POST /payment-methods/{id}/default` makes an attached card the default (200, the card), with
 *   `Idempotency-Key`.
 * A card that is not the platform customer's (unknown, detached, another customer's) is 404, and the
 * answer names nothing of another customer. Like the other table A writes (cancel, change-tier) they are
 * not in the operator audit, which records table B and /operator/* only.
 */
function tenantCardRoutes(app: ServiceApp, ctx: BillingContext) {
  const { engine } = ctx;

  const setDefault = async (customer: CustomerRow, paymentMethodId: string): Promise<CustomerRow> => {
    const row = await setDefaultCard(engine, customer.id, paymentMethodId);
    await retryOpenInvoicesNow(engine, customer.id);
    return row;
  };

  /** The card `id` of the platform's customer, or 404 naming only the id asked for. */
  const ownCard = async (platformId: string, id: string) => {
    const customer = await customerOfPlatform(engine.db, platformId);
    const card = customer ? await engine.provider.find(id) : null;
    if (!customer || !card || card.customerId !== customer.id) throw resourceNotFound("payment method");
    return { customer, card };
  };

  for (const path of bothPrefixes("/payment-methods")) {
    app.openapi(
      createRoute({
        method: "post",
        path,
        summary: "Attach a card to the platform's customer (made with the caller's email when there is none yet); the first card becomes the default",
        description:
          "A test token (pm_card_visa) makes a new pm_…; a declining test card is refused with 402 PAYMENT_DECLINED and details { code, declineCode }, as Stripe verifies on attach. " +
          "With setAsDefault (or as the first card) it becomes the default and the customer's refused renewals are retried with it at once. Idempotency-Key: a retry attaches once.",
        security: security.anyCredential,
        request: { query: z.object({ platformId: platformQuery(false) }), headers: IdempotencyHeader, body: jsonBody(CardInput) },
        responses: { 201: jsonContent(PaymentMethodSchema, "The attached card"), ...errorResponses(400, 401, 402, 403, 404, 409, 422, 429, 503) },
      }),
      async (c) => {
        const input = c.req.valid("json");
        const scope = await platformScope(c, ctx, "billing:manage", c.req.valid("query").platformId);
        const keyed = await ctx.idempotency.run(
          { caller: callerKey(scope.caller), route: withoutPrefix(c.req.path), key: c.req.valid("header")["idempotency-key"], request: { ...input, platformId: scope.platformId } },
          async () => {
            let customer = await customerToHoldCards(ctx, scope);
            const pm = await engine.provider.attach(customer.id, input.paymentMethodId);
            if (input.setAsDefault || !customer.defaultPaymentMethodId) customer = await setDefault(customer, pm.id);
            return { status: 201, body: paymentMethodJson(pm, customer) };
          },
        );
        return keyedAnswer(c, keyed);
      },
    );
  }

  for (const path of bothPrefixes("/payment-methods/{id}")) {
    app.openapi(
      createRoute({
        method: "delete",
        path,
        summary: "Detach a card of the platform's customer; removing the default leaves none until another is set (allowed with a paid plan, as Stripe allows it)",
        security: security.anyCredential,
        request: { params: cardParam, query: z.object({ platformId: platformQuery(false) }) },
        responses: { 200: jsonContent(PaymentMethodSchema, "The detached card (customerId null)"), ...errorResponses(401, 403, 404, 429, 503) },
      }),
      async (c) => {
        const scope = await platformScope(c, ctx, "billing:manage", c.req.valid("query").platformId);
        const { customer, card } = await ownCard(scope.platformId, c.req.valid("param").id);
        const { card: detached, defaultCleared } = await detachCard(engine, customer.id, card.id);
        return c.json(paymentMethodJson(detached, defaultCleared ?? customer), 200);
      },
    );
  }

  for (const path of bothPrefixes("/payment-methods/{id}/default")) {
    app.openapi(
      createRoute({
        method: "post",
        path,
        summary: "Make a card of the platform's customer its default; refused renewals are retried with it at once",
        description: "Idempotency-Key: a retry answers the first result, and a refused renewal is retried once.",
        security: security.anyCredential,
        request: { params: cardParam, query: z.object({ platformId: platformQuery(false) }), headers: IdempotencyHeader },
        responses: { 200: jsonContent(PaymentMethodSchema, "The card, now the default"), ...errorResponses(401, 403, 404, 409, 422, 429, 503) },
      }),
      async (c) => {
        const id = c.req.valid("param").id;
        const scope = await platformScope(c, ctx, "billing:manage", c.req.valid("query").platformId);
        const keyed = await ctx.idempotency.run(
          { caller: callerKey(scope.caller), route: withoutPrefix(c.req.path), key: c.req.valid("header")["idempotency-key"], request: { id, platformId: scope.platformId } },
          async () => {
            const { customer, card } = await ownCard(scope.platformId, id);
            const after = await setDefault(customer, card.id);
            return { status: 200, body: paymentMethodJson(card, after) };
          },
        );
        return keyedAnswer(c, keyed);
      },
    );
  }
}

/**
 * Table B's payment-method rows (spec §4.4, DESIGN §6.3): attaching, detaching and reading a card,
 * and making one a customer's default, for operators and services. Every write is audited.
 */
export function paymentMethodRoutes(app: ServiceApp, ctx: BillingContext) {
  const { engine } = ctx;

  /** Makes a card the customer's default, and retries its refused renewals with it at once (DESIGN §6.3). */
  const setDefault = async (customer: CustomerRow, paymentMethodId: string): Promise<CustomerRow> => {
    const row = await setDefaultCard(engine, customer.id, paymentMethodId);
    await retryOpenInvoicesNow(engine, customer.id);
    return row;
  };

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
      await auditRequest(c, engine, caller, { action: "payment_method.attach", targetType: "customer", targetId: customer.id, after: { paymentMethodId: pm.id, isDefault: customer.defaultPaymentMethodId === pm.id } });
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
      if (!found?.customerId) throw resourceNotFound("payment method", "it is not attached to a customer");
      const customer = await findCustomer(engine.db, found.customerId);
      const { card, defaultCleared } = await detachCard(engine, customer.id, id);
      await auditRequest(c, engine, caller, { action: "payment_method.detach", targetType: "customer", targetId: customer.id, before: { paymentMethodId: id }, after: { defaultCleared: Boolean(defaultCleared) } });
      return c.json(paymentMethodJson(card, defaultCleared ?? customer), 200);
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
      if (!pm) throw resourceNotFound("payment method");
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
      request: { params: z.object({ id: pathId("id") }), body: jsonBody(z.object({ customerId: Id }).strict().openapi("SetDefaultInput")) },
      responses: { 200: jsonContent(CustomerSchema, "The customer, with its new defaultPaymentMethodId"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const caller = await requireOperator(c, ctx.credentials);
      const customer = await findCustomer(engine.db, c.req.valid("json").customerId);
      const pm = await cardOfCustomer(engine, customer, c.req.valid("param").id);
      const after = await setDefault(customer, pm.id);
      await auditRequest(c, engine, caller, { action: "payment_method.set_default", targetType: "customer", targetId: customer.id, before: { defaultPaymentMethodId: customer.defaultPaymentMethodId }, after: { defaultPaymentMethodId: pm.id } });
      return c.json(customerJson(after), 200);
    },
  );
}
