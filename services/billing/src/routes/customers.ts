import { createRoute, z } from "@hono/zod-openapi";
import { badRequest, conflict, cursorParam, errorResponses, jsonBody, jsonContent, limitParam, notFound, resourceNotFound, security, type ServiceApp, traceOf } from "@core/kit";
import { isUniqueViolation } from "@core/storage";
import { isOperator, type Caller } from "@core/service-auth";
import { auditRequest, platformScope, requireOperator } from "../access.js";
import type { BillingContext } from "../app.js";
import { AddressInput, atProvider, BUYER_LIMITS, BuyerName, cardOfCustomer, createCustomer, customerJson, customerOfPlatform, ensurePlatformCustomer, findCustomer, listCustomers, TaxExemptInput, TaxExemptionRequestInput, TaxIdsInput, updateCustomer, type CustomerEditor } from "../customers.js";
import type { CustomerRow } from "../db/schema.js";
import { subscriptionJson, subscriptionsOfCustomer } from "../subscriptions.js";
import { paymentMethodJson } from "./payment-methods.js";
import { bothPrefixes } from "./answers.js";
import { CustomerSchema, Email, Id, Metadata, pathId, PaymentMethodSchema, platformQuery, SubscriptionSchema } from "./schemas.js";

const Name = z.string().min(1).max(200);

/** The buyer details of DESIGN §6.11, the same for the tenant, the portal's form and operators (docs/vault/concepts/invoices-and-tax.md). */
const buyerFields = {
  address: AddressInput.nullable().optional().openapi({ description: "the buyer's postal address, replaced whole; null removes it" }),
  taxIds: TaxIdsInput.optional().openapi({ description: "the buyer's tax ids (at most 5), replacing the list" }),
};

/** What the tenant may change of its own customer (`PATCH /api/billing/customer`, the portal's form): no metadata, which is the operators', and no exemption, which is the seller's. */
export const BuyerPatch = z
  .object({
    email: Email.optional(),
    name: BuyerName.nullable().optional(),
    ...buyerFields,
    taxExempt: TaxExemptInput.optional().openapi({
      description:
        "none: the buyer's country's rate; reverse: reverse charge, only for an EU business (an eu_vat id of its own country) in another EU country than the seller's (else 400). " +
        "exempt is the seller's to set: a tenant asking for it gets 403 (a customer exempt already may send it unchanged) and records taxExemptionRequested instead.",
    }),
    taxExemptionRequested: TaxExemptionRequestInput.nullable().optional().openapi({
      description: `ask the seller to make this customer tax exempt, saying why in note (1-${BUYER_LIMITS.taxExemptionNote} characters, one line); operators see it in GET /customers?taxExemptionRequested=true and answer by setting taxExempt. null withdraws it; 409 ALREADY_TAX_EXEMPT when exempt already.`,
    }),
  })
  .strict()
  .openapi("BuyerPatch");

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
    ...buyerFields,
    taxExempt: TaxExemptInput.optional().openapi({
      description:
        "none: the buyer's country's rate; exempt: no tax (the seller's decision); reverse: reverse charge, only for an EU business (an eu_vat id of its own country) in another EU country than the seller's (else 400). " +
        "Setting it answers the buyer's pending taxExemptionRequested, which is cleared.",
    }),
    taxExemptionRequested: z.null().optional().openapi({ description: "null dismisses the buyer's pending request for tax exemption without changing taxExempt" }),
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
      if (platformId && !(await ctx.platforms.exists(platformId, traceOf(c)))) throw resourceNotFound("platform");
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
      summary: "Find customers, newest first: by email (from the start of the address or of its domain, in any case), platform, and a pending request for tax exemption; cursor is null on the last page",
      description:
        'email "acme" finds acme@example.com and billing@acme.com; "billing@acme" finds billing@acme.com; a string inside a word ("cme") finds nothing. ' +
        "taxExemptionRequested=true lists the customers whose request for tax exemption waits for an answer (PATCH /customers/{id} with taxExempt answers it). " +
        "Filters combine with AND. limit 1-100, default 25.",
      security: security.anyCredential,
      request: {
        query: z.object({
          email: z.string().min(1).max(320).optional().openapi({ param: { name: "email", in: "query" }, description: "the start of the address or of its domain, in any case" }),
          platformId: Id.optional().openapi({ param: { name: "platformId", in: "query" }, description: "the platform's customer" }),
          taxExemptionRequested: z
            .enum(["true", "false"])
            .optional()
            .transform((v) => (v === undefined ? undefined : v === "true"))
            .openapi({ param: { name: "taxExemptionRequested", in: "query" }, description: "true: only customers with a pending request for tax exemption; false: only those without" }),
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
      summary: "Update a customer's email, name or metadata (merged; a key set to null is removed), and its buyer details (address, tax ids, tax exemption)",
      description:
        "Invoices already finalized keep the customer as it was (their customerSnapshot). address, taxIds and taxExempt are DESIGN §6.11's additions to the spec's fields. " +
        "Only operators and services make a customer tax exempt; setting taxExempt answers the buyer's pending taxExemptionRequested.",
      security: security.anyCredential,
      request: { params: z.object({ id: pathId("id") }), body: jsonBody(CustomerPatch) },
      responses: { 200: jsonContent(CustomerSchema, "The customer"), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const caller = await requireOperator(c, ctx.credentials);
      const { before, after } = await updateCustomer(engine, c.req.valid("param").id, c.req.valid("json"), "seller");
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
      if (!customer.defaultPaymentMethodId) throw resourceNotFound("payment method", "the customer has no default payment method");
      return c.json(paymentMethodJson(await cardOfCustomer(engine, customer, customer.defaultPaymentMethodId), customer), 200);
    },
  );

  for (const path of bothPrefixes("/customer")) {
    app.openapi(
      createRoute({
        method: "get",
        path,
        summary: "The platform's billing customer: email, name, address, tax ids and tax exemption, as its invoices name the buyer",
        security: security.anyCredential,
        request: { query: z.object({ platformId: platformQuery(false) }) },
        responses: { 200: jsonContent(CustomerSchema, "The customer"), ...errorResponses(401, 403, 404, 429, 503) },
      }),
      async (c) => {
        const { platformId } = await platformScope(c, ctx, "billing:read", c.req.valid("query").platformId);
        const customer = await customerOfPlatform(engine.db, platformId);
        if (!customer) throw notFound("The platform has no billing customer yet: its first upgrade or billing details make one");
        return c.json(customerJson(customer), 200);
      },
    );

    app.openapi(
      createRoute({
        method: "patch",
        path,
        summary: "Change the platform's billing details: email, name, address, tax ids, reverse charge, a request for tax exemption (copied onto each invoice when it is finalized)",
        description:
          "DESIGN §6.11. billing:manage. A platform without a customer gets one, billed to the caller's email. Invoices already finalized keep the buyer as it was. " +
          "taxExempt reverse is refused (400) unless the buyer is an EU business (an eu_vat id of its own country) in another EU country than the seller's. " +
          "taxExempt exempt is the seller's decision: a tenant asking for it gets 403 and records taxExemptionRequested with a note instead; an operator or a service calling this route may set it.",
        security: security.anyCredential,
        request: { query: z.object({ platformId: platformQuery(false) }), body: jsonBody(BuyerPatch) },
        responses: { 200: jsonContent(CustomerSchema, "The customer"), ...errorResponses(400, 401, 403, 404, 409, 429, 503) },
      }),
      async (c) => {
        const scope = await platformScope(c, ctx, "billing:manage", c.req.valid("query").platformId);
        const customer = await platformCustomer(ctx, scope);
        const { before, after } = await updateCustomer(engine, customer.id, c.req.valid("json"), editorOf(scope.caller));
        await auditRequest(c, engine, scope.caller, { action: "customer.update", targetType: "customer", targetId: before.id, before: customerJson(before), after: customerJson(after) });
        return c.json(customerJson(after), 200);
      },
    );
  }
}

/** Who changes a customer through Table A: a tenant's member is the buyer; an operator or a service acts for the seller. */
const editorOf = (caller: Caller): CustomerEditor => (caller.kind === "service" || isOperator(caller.principal) ? "seller" : "buyer");

/**
 * The platform's customer for a change of its billing details: made when there is none yet, billed
 * to the caller (only a member of the platform's own organization becomes its customer; an
 * operator's or a service's address never does: 409 NO_CUSTOMER).
 */
export async function platformCustomer(ctx: BillingContext, scope: Awaited<ReturnType<typeof platformScope>>): Promise<CustomerRow> {
  const { engine } = ctx;
  const existing = await customerOfPlatform(engine.db, scope.platformId);
  if (existing) return existing;
  if (scope.caller.kind !== "principal" || scope.caller.principal.platformId !== scope.platformId || !scope.caller.principal.email) {
    throw conflict("NO_CUSTOMER", "The platform has no billing customer yet: its first upgrade makes one");
  }
  const principal = scope.caller.principal;
  const name = await ctx.platforms.nameOf(scope.platformId);
  return atProvider(engine, await ensurePlatformCustomer(engine.db, await engine.time.now(), { platformId: scope.platformId, userId: principal.userId, email: principal.email, name, currency: engine.catalogue.currency }));
}
