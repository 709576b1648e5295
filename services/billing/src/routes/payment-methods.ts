import { createRoute, z } from "@hono/zod-openapi";
import { conflict, errorResponses, jsonContent, security, type ServiceApp } from "@core/kit";
import { platformScope } from "../access.js";
import type { BillingContext } from "../app.js";
import { atProvider, customerOfPlatform, ensurePlatformCustomer } from "../customers.js";
import type { CustomerRow } from "../db/schema.js";
import type { PaymentMethodView } from "../provider/types.js";
import { bothPrefixes } from "./answers.js";
import { PaymentMethodSchema, platformQuery } from "./schemas.js";

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
