import { createRoute, z } from "@hono/zod-openapi";
import { conflict, errorResponses, jsonBody, jsonContent, notFound, security, type ServiceApp } from "@core/kit";
import { auditRequest, platformScope, requireOperator } from "../access.js";
import type { BillingContext } from "../app.js";
import { atProvider, cardOfCustomer, customerJson, customerOfPlatform, detachCard, ensurePlatformCustomer, findCustomer, setDefaultCard } from "../customers.js";
import type { CustomerRow } from "../db/schema.js";
import type { PaymentMethodView } from "../provider/types.js";
import { retryOpenInvoicesNow } from "../renewals.js";
import { bothPrefixes } from "./answers.js";
import { CustomerSchema, Id, pathId, PaymentMethodSchema, platformQuery } from "./schemas.js";

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
        let customer = await customerOfPlatform(engine.db, scope.platformId);
        if (!customer) {
          // only someone of the platform's own organization becomes its customer; an operator's email never does
          if (scope.caller.kind !== "principal" || scope.caller.principal.platformId !== scope.platformId) {
            throw conflict("NO_CUSTOMER", "The platform has no billing customer yet: its first upgrade makes one");
          }
          customer = await atProvider(engine, await ensurePlatformCustomer(engine.db, await engine.time.now(), {
            platformId: scope.platformId,
            userId: scope.caller.principal.userId,
            email: scope.caller.principal.email,
            currency: engine.catalogue.currency,
          }));
        }
        return c.json(await engine.provider.createSetupIntent(customer.id), 201);
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
      if (!found?.customerId) throw notFound(`No attached payment method ${id}`);
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
