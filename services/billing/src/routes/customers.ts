import { createRoute, z } from "@hono/zod-openapi";
import { badRequest, conflict, cursorParam, errorResponses, jsonBody, jsonContent, limitParam, notFound, security, traceOf, type ServiceApp } from "@core/kit";
import { isUniqueViolation } from "@core/storage";
import { auditRequest, requireOperator } from "../access.js";
import type { BillingContext } from "../app.js";
import { atProvider, cardOfCustomer, createCustomer, customerJson, findCustomer, updateCustomer } from "../customers.js";
import { listCustomers } from "../customers.js";
import type { CustomerRow } from "../db/schema.js";
import { subscriptionJson, subscriptionsOfCustomer } from "../subscriptions.js";
import { paymentMethodJson } from "./payment-methods.js";
import { CustomerSchema, Email, Id, Metadata, pathId, PaymentMethodSchema, SubscriptionSchema } from "./schemas.js";

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

const list = <T extends z.ZodTypeAny>(item: T, name: string) => z.object({ data: z.array(item) }).openapi(name);

/**
 * Table B's customers (spec §4.4, DESIGN §6.3): the engine's customer records in Stripe-like shapes,
 * with their subscriptions and cards, for operators and services. Every write is audited.
 */
export function customerRoutes(app: ServiceApp, ctx: BillingContext) {
  const { engine } = ctx;

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
      if (platformId && !(await ctx.platforms.exists(platformId, traceOf(c)))) throw notFound(`No platform ${platformId}`);
      let customer: CustomerRow;
      try {
        customer = await atProvider(engine, await createCustomer(engine.db, await engine.time.now(), { ...input, platformId, userId, currency: engine.catalogue.currency }));
      } catch (err) {
        if (isUniqueViolation(err, "customers_platform_key")) throw conflict("CUSTOMER_EXISTS", `Platform ${platformId} has a customer already: GET /subscription?platformId=${platformId} names it`);
        throw err;
      }
      await auditRequest(c, engine, caller, { action: "customer.create", targetType: "customer", targetId: customer.id, after: customerJson(customer) });
      return c.json(customerJson(customer), 201);
    },
  );

  // GET /customers (DESIGN §6.12): operators find a customer by email or platform
  app.openapi(
    createRoute({
      method: "get",
      path: "/customers",
      summary: "Find customers, newest first: by email (from the start of the address or of its domain, in any case) and platform; cursor is null on the last page",
      description:
        'email "acme" finds acme@example.com and billing@acme.com; "billing@acme" finds billing@acme.com; a string inside a word ("cme") finds nothing. ' +
        "Filters combine with AND. limit 1-100, default 25.",
      security: security.anyCredential,
      request: {
        query: z.object({
          email: z.string().min(1).max(320).optional().openapi({ param: { name: "email", in: "query" }, description: "the start of the address or of its domain, in any case" }),
          platformId: Id.optional().openapi({ param: { name: "platformId", in: "query" }, description: "the platform's customer" }),
          cursor: cursorParam(),
          limit: limitParam(25, 100),
        }),
      },
      responses: {
        200: jsonContent(z.object({ data: z.array(CustomerSchema), cursor: z.string().nullable() }).openapi("CustomerPage"), "A page of customers"),
        ...errorResponses(400, 401, 403),
      },
    }),
    async (c) => {
      await requireOperator(c, ctx.credentials);
      return c.json(await listCustomers(engine.db, c.req.valid("query")), 200);
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
      const { before, after } = await updateCustomer(engine, c.req.valid("param").id, c.req.valid("json"));
      await auditRequest(c, engine, caller, { action: "customer.update", targetType: "customer", targetId: before.id, before: customerJson(before), after: customerJson(after) });
      return c.json(customerJson(after), 200);
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
      return c.json(paymentMethodJson(await cardOfCustomer(engine, customer, customer.defaultPaymentMethodId), customer), 200);
    },
  );
}
