import { createRoute, z } from "@hono/zod-openapi";
import Stripe from "stripe";
import { ApiError, errorResponses, jsonContent, notFound, type ServiceApp } from "@core/kit";
import type { BillingContext } from "../app.js";
import { receiveStripeEvent } from "../stripe-webhooks.js";

/** Stripe's own tolerance for a signature's timestamp (DESIGN §6.1): 5 minutes either way. */
export const STRIPE_SIGNATURE_TOLERANCE_SECONDS = 300;

const ReceiptSchema = z
  .object({
    received: z.literal(true),
    duplicate: z.boolean().openapi({ description: "true when this event id was handled before: nothing was done again" }),
  })
  .openapi("StripeEventReceipt");

/**
 * `POST /webhooks/stripe` (DESIGN §6.1): Stripe's events, signed with STRIPE_WEBHOOK_SECRET
 * (`Stripe-Signature`, checked by the SDK against the raw body, 300 s tolerance on the injected
 * clock), each handled once by its id. Only with the stripe provider; on the local one it is 404.
 */
export function stripeWebhookRoutes(app: ServiceApp, ctx: BillingContext, stripe: { client: Stripe; webhookSecret: string } | null, now: () => Date) {
  app.openapi(
    createRoute({
      method: "post",
      path: "/webhooks/stripe",
      summary: "Receive an event from Stripe (signed with the webhook secret); each event id is handled once",
      request: { body: { content: { "application/json": { schema: z.object({}).passthrough().openapi({ description: "A Stripe Event object, exactly as Stripe sent it" }) } }, required: true } },
      responses: {
        200: jsonContent(ReceiptSchema, "Received: handled now, or before (duplicate)"),
        ...errorResponses(400, 404, 409, 503),
      },
    }),
    async (c) => {
      if (!stripe) throw notFound("This billing runs on the local provider: there are no Stripe events to receive (set STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET)");
      const signature = c.req.header("stripe-signature");
      if (!signature) throw new ApiError(400, "WEBHOOK_SIGNATURE_INVALID", "No Stripe-Signature header: only Stripe may send events here");
      const payload = await c.req.text();
      let event: Stripe.Event;
      try {
        event = stripe.client.webhooks.constructEvent(payload, signature, stripe.webhookSecret, STRIPE_SIGNATURE_TOLERANCE_SECONDS, undefined, now().getTime());
      } catch (err) {
        // the SDK's message says what was wrong (no matching signature, too old) and never the secret
        const why = err instanceof Stripe.errors.StripeSignatureVerificationError ? err.message.split("\n")[0] : "the body is not a Stripe event";
        throw new ApiError(400, "WEBHOOK_SIGNATURE_INVALID", `The Stripe-Signature does not verify: ${why}`);
      }
      const receipt = await receiveStripeEvent(ctx.engine, event, now());
      ctx.logger.info({ eventId: event.id, type: event.type, duplicate: receipt.duplicate, outcome: receipt.outcome }, "stripe event");
      return c.json({ received: true as const, duplicate: receipt.duplicate }, 200);
    },
  );
}
