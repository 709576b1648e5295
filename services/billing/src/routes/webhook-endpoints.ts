import { createRoute, z } from "@hono/zod-openapi";
import { cursorParam, errorResponses, jsonBody, jsonContent, limitParam, security, type ServiceApp } from "@core/kit";
import { auditRequest, callerKey, requireOperator } from "../access.js";
import type { BillingContext } from "../app.js";
import {
  enabledWebhookEndpoints,
  endpointJson,
  listDeliveries,
  MAX_ROTATION_GRACE_SECONDS,
  registerWebhookEndpoint,
  removeWebhookEndpoint,
  rotateWebhookEndpointSecret,
  ROTATION_GRACE_SECONDS,
} from "../webhooks/endpoints.js";
import { EVENT_TYPES } from "../webhooks/outbox.js";
import { keyedAnswer } from "./answers.js";
import { IdempotencyHeader, pathId } from "./schemas.js";

const EventType = z.enum(EVENT_TYPES);

const EndpointInput = z
  .object({
    url: z
      .string()
      .min(1)
      .max(2048)
      .refine((v) => /^https?:\/\/[^\s/?#]+/i.test(v) && URL.canParse(v), "An http(s) URL")
      .openapi({ description: "Where each event is POSTed; loopback and private addresses only with CORE_BILLING_WEBHOOK_ALLOW_PRIVATE=1" }),
    events: z
      .array(EventType)
      .min(1)
      .max(EVENT_TYPES.length)
      .refine((list) => new Set(list).size === list.length, "Each event type once")
      .optional()
      .openapi({ description: "The event types it takes; absent: all of them" }),
    description: z.string().min(1).max(500).optional(),
  })
  .strict()
  .openapi("WebhookEndpointInput");

const EndpointSchema = z
  .object({
    id: z.string(),
    url: z.string(),
    events: z.array(EventType).nullable().openapi({ description: "null: every event type" }),
    description: z.string().nullable(),
    createdAt: z.number().int(),
    previousSecretExpiresAt: z
      .number()
      .int()
      .nullable()
      .openapi({ description: "Unix seconds (wall-clock): when the secret before the last rotation stops signing deliveries; null when the secret was never rotated" }),
  })
  .openapi("WebhookEndpoint");

const CreatedEndpointSchema = EndpointSchema.extend({
  secret: z.string().openapi({ description: "whsec_…: what each delivery's Core-Signature is made with. Shown this once; keep it" }),
}).openapi("CreatedWebhookEndpoint");

const RotateInput = z
  .object({
    expiresInSeconds: z
      .number()
      .int()
      .min(0)
      .max(MAX_ROTATION_GRACE_SECONDS)
      .optional()
      .openapi({ description: `How long the old secret keeps signing deliveries beside the new one: 0 retires it now; default ${ROTATION_GRACE_SECONDS} (a day), at most ${MAX_ROTATION_GRACE_SECONDS} (7 days)` }),
  })
  .strict()
  .openapi("RotateWebhookSecretInput");

const AttemptSchema = z
  .object({
    attempt: z.number().int(),
    at: z.number().int(),
    status: z.number().int().nullable().openapi({ description: "the endpoint's HTTP status; null when it did not answer" }),
    response: z.string().openapi({ description: "the first 500 characters of the answer, or why there was none" }),
    durationMs: z.number().int(),
  })
  .openapi("WebhookAttempt");

const DeliverySchema = z
  .object({
    id: z.string(),
    eventId: z.string(),
    eventType: EventType,
    status: z.enum(["pending", "delivered", "failed"]),
    attempts: z.array(AttemptSchema),
    nextAttemptAt: z.number().int().nullable().openapi({ description: "when a pending delivery is tried next" }),
    createdAt: z.number().int(),
    finishedAt: z.number().int().nullable(),
  })
  .openapi("WebhookDelivery");

/**
 * `/operator/webhook-endpoints` (DESIGN §6.8): operators register where billing's events go, see
 * each delivery's attempts, and remove an endpoint. Every change is in the operator audit.
 */
export function webhookEndpointRoutes(app: ServiceApp, ctx: BillingContext) {
  const { engine } = ctx;

  app.openapi(
    createRoute({
      method: "post",
      path: "/operator/webhook-endpoints",
      summary: "Register an endpoint for billing's events; the answer shows its signing secret, once",
      security: security.anyCredential,
      request: { body: jsonBody(EndpointInput) },
      responses: { 201: jsonContent(CreatedEndpointSchema, "The endpoint, with its secret"), ...errorResponses(401, 403, 409) },
    }),
    async (c) => {
      const caller = await requireOperator(c, ctx.credentials);
      const input = c.req.valid("json");
      const row = await registerWebhookEndpoint(engine.db, engine.time.wallNow(), input, ctx.config.webhookAllowPrivate);
      await auditRequest(c, engine, caller, { action: "webhook_endpoint.create", targetType: "webhook_endpoint", targetId: row.id, after: endpointJson(row) });
      return c.json({ ...endpointJson(row), secret: row.secret }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/operator/webhook-endpoints",
      summary: "The endpoints registered now (their secrets are never shown again)",
      security: security.anyCredential,
      responses: { 200: jsonContent(z.object({ data: z.array(EndpointSchema) }).openapi("WebhookEndpointList"), "Every enabled endpoint, oldest first"), ...errorResponses(401, 403) },
    }),
    async (c) => {
      await requireOperator(c, ctx.credentials);
      return c.json({ data: (await enabledWebhookEndpoints(engine.db)).map(endpointJson) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "delete",
      path: "/operator/webhook-endpoints/{id}",
      summary: "Remove an endpoint: nothing more is sent to it, and its pending deliveries end as failed; its history stays readable",
      security: security.anyCredential,
      request: { params: z.object({ id: pathId("id") }) },
      responses: { 200: jsonContent(z.object({ id: z.string(), deleted: z.literal(true) }).openapi("DeletedWebhookEndpoint"), "Removed"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const caller = await requireOperator(c, ctx.credentials);
      const { id } = c.req.valid("param");
      const removed = await removeWebhookEndpoint(engine.db, engine.time.wallNow(), id);
      await auditRequest(c, engine, caller, { action: "webhook_endpoint.delete", targetType: "webhook_endpoint", targetId: id, before: endpointJson(removed) });
      return c.json({ id, deleted: true as const }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/operator/webhook-endpoints/{id}/rotate-secret",
      summary: "Give an endpoint a new signing secret, shown once; the old one keeps signing beside it for expiresInSeconds (default a day, 0: retired now, at most 7 days)",
      description:
        "DESIGN §6.8. While the old secret is active every delivery carries both signatures (Core-Signature: t=<unix>,v1=<new>,v1=<old>); after it expires only the new one. " +
        "Rotating again while a previous secret is active replaces that previous secret with the current one (at most two sign at once). A removed endpoint is 404. The body may be left out. " +
        "With an Idempotency-Key, a retry whose answer was lost answers the same secret again (Idempotent-Replayed: true) instead of rotating twice, which would retire the secret the receivers still have.",
      security: security.anyCredential,
      request: { params: z.object({ id: pathId("id") }), headers: IdempotencyHeader, body: { ...jsonBody(RotateInput), required: false } },
      responses: { 200: jsonContent(CreatedEndpointSchema, "The endpoint, with its new secret"), ...errorResponses(400, 401, 403, 404, 409, 422) },
    }),
    async (c) => {
      const caller = await requireOperator(c, ctx.credentials);
      const { id } = c.req.valid("param");
      const expiresInSeconds = (c.req.valid("json") as z.infer<typeof RotateInput> | undefined)?.expiresInSeconds ?? ROTATION_GRACE_SECONDS;
      const request = { id, expiresInSeconds };
      const keyed = await ctx.idempotency.run({ caller: callerKey(caller), route: "/operator/webhook-endpoints/{id}/rotate-secret", key: c.req.valid("header")["idempotency-key"], request }, async () => {
        const { before, after } = await rotateWebhookEndpointSecret(engine.db, engine.time.wallNow(), id, expiresInSeconds);
        // the audit names when the old secret stops, never a secret
        await auditRequest(c, engine, caller, { action: "webhook_endpoint.rotate_secret", targetType: "webhook_endpoint", targetId: id, before: endpointJson(before), after: endpointJson(after) });
        // the stored answer (kept 24 hours, as every keyed answer) holds the new secret, so that a retry can show it
        return { status: 200, body: { ...endpointJson(after), secret: after.secret } };
      });
      return keyedAnswer(c, keyed);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/operator/webhook-endpoints/{id}/deliveries",
      summary: "An endpoint's deliveries, newest first, each with every attempt and how the endpoint answered",
      security: security.anyCredential,
      request: { params: z.object({ id: pathId("id") }), query: z.object({ cursor: cursorParam(), limit: limitParam(20, 100) }) },
      responses: { 200: jsonContent(z.object({ data: z.array(DeliverySchema), cursor: z.string().nullable() }).openapi("WebhookDeliveryPage"), "A page of deliveries"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      await requireOperator(c, ctx.credentials);
      return c.json(await listDeliveries(engine.db, c.req.valid("param").id, c.req.valid("query")), 200);
    },
  );
}
