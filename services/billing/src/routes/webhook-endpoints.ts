import { randomBytes } from "node:crypto";
import { isIP } from "node:net";
import { createRoute, z } from "@hono/zod-openapi";
import { and, eq, inArray, isNull } from "drizzle-orm";
import { ApiError, cursorParam, decodeCursor, errorResponses, jsonBody, jsonContent, limitParam, newId, notFound, requestIdOf, security, toPage, unixSeconds, type ServiceApp } from "@core/kit";
import { keysetAfter, keysetOrder, type KeysetColumns } from "@core/storage";
import { actorOf, requireOperator } from "../access.js";
import type { BillingContext } from "../app.js";
import { webhookAttempts, webhookDeliveries, webhookEndpoints, webhookEvents, type WebhookEndpointRow } from "../db/schema.js";
import { auditOperatorAction } from "../operator.js";
import { isPrivateAddress } from "../webhooks/dispatcher.js";
import { EVENT_TYPES } from "../webhooks/outbox.js";
import { pathId } from "./schemas.js";

/** How many endpoints billing keeps enabled at once: each event is one delivery per endpoint. */
export const MAX_ENDPOINTS = 50;

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
  })
  .openapi("WebhookEndpoint");

const CreatedEndpointSchema = EndpointSchema.extend({
  secret: z.string().openapi({ description: "whsec_…: what each delivery's Core-Signature is made with. Shown this once; keep it" }),
}).openapi("CreatedWebhookEndpoint");

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

const endpointJson = (row: WebhookEndpointRow) => ({
  id: row.id,
  url: row.url,
  events: (row.events as (typeof EVENT_TYPES)[number][] | null) ?? null,
  description: row.description,
  createdAt: unixSeconds(row.createdAt),
});

const NEWEST_FIRST: KeysetColumns = { key: webhookDeliveries.createdAt, tie: webhookDeliveries.id, direction: "desc" };

/**
 * `/operator/webhook-endpoints` (DESIGN §6.8): operators register where billing's events go, see
 * each delivery's attempts, and remove an endpoint. Every change is in the operator audit.
 */
export function webhookEndpointRoutes(app: ServiceApp, ctx: BillingContext) {
  const { engine } = ctx;
  const wallNow = () => engine.time.wallNow();

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
      refusePrivate(input.url, ctx.config.webhookAllowPrivate);
      const enabled = await engine.db.select({ id: webhookEndpoints.id }).from(webhookEndpoints).where(isNull(webhookEndpoints.disabledAt));
      if (enabled.length >= MAX_ENDPOINTS) throw new ApiError(409, "TOO_MANY_ENDPOINTS", `At most ${MAX_ENDPOINTS} endpoints: delete one first`);
      const [row] = await engine.db
        .insert(webhookEndpoints)
        .values({ id: newId("we"), url: input.url, events: input.events ?? null, description: input.description ?? null, secret: `whsec_${randomBytes(32).toString("base64url")}`, createdAt: wallNow() })
        .returning();
      await auditOperatorAction(engine.db, { now: wallNow }, { ...actorOf(caller), action: "webhook_endpoint.create", targetType: "webhook_endpoint", targetId: row!.id, after: endpointJson(row!), requestId: requestIdOf(c) });
      return c.json({ ...endpointJson(row!), secret: row!.secret }, 201);
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
      const rows = await engine.db.select().from(webhookEndpoints).where(isNull(webhookEndpoints.disabledAt)).orderBy(webhookEndpoints.createdAt, webhookEndpoints.id);
      return c.json({ data: rows.map(endpointJson) }, 200);
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
      const now = wallNow();
      const removed = await engine.db.transaction(async (tx) => {
        const [row] = await tx.update(webhookEndpoints).set({ disabledAt: now }).where(and(eq(webhookEndpoints.id, id), isNull(webhookEndpoints.disabledAt))).returning();
        if (!row) return null;
        await tx
          .update(webhookDeliveries)
          .set({ status: "failed", finishedAt: now, leaseUntil: null })
          .where(and(eq(webhookDeliveries.endpointId, id), eq(webhookDeliveries.status, "pending")));
        return row;
      });
      if (!removed) throw notFound(`No webhook endpoint ${id}`);
      await auditOperatorAction(engine.db, { now: wallNow }, { ...actorOf(caller), action: "webhook_endpoint.delete", targetType: "webhook_endpoint", targetId: id, before: endpointJson(removed), requestId: requestIdOf(c) });
      return c.json({ id, deleted: true as const }, 200);
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
      const { id } = c.req.valid("param");
      const query = c.req.valid("query");
      const [endpoint] = await engine.db.select({ id: webhookEndpoints.id }).from(webhookEndpoints).where(eq(webhookEndpoints.id, id));
      if (!endpoint) throw notFound(`No webhook endpoint ${id}`);
      const rows = await engine.db
        .select({ delivery: webhookDeliveries, eventType: webhookEvents.type })
        .from(webhookDeliveries)
        .innerJoin(webhookEvents, eq(webhookEvents.id, webhookDeliveries.eventId))
        .where(and(eq(webhookDeliveries.endpointId, id), keysetAfter(NEWEST_FIRST, decodeCursor(query.cursor, { key: "timestamp", tie: "id" }))))
        .orderBy(...keysetOrder(NEWEST_FIRST))
        .limit(query.limit + 1);
      const page = toPage(rows, query.limit, (r) => ({ k: r.delivery.createdAt, id: r.delivery.id }));
      const ids = page.data.map((r) => r.delivery.id);
      const attempts = ids.length ? await engine.db.select().from(webhookAttempts).where(inArray(webhookAttempts.deliveryId, ids)).orderBy(webhookAttempts.deliveryId, webhookAttempts.attempt) : [];
      const data = page.data.map(({ delivery: d, eventType }) => ({
        id: d.id,
        eventId: d.eventId,
        eventType: eventType as (typeof EVENT_TYPES)[number],
        status: d.status,
        attempts: attempts.filter((a) => a.deliveryId === d.id).map((a) => ({ attempt: a.attempt, at: unixSeconds(a.at), status: a.status, response: a.response, durationMs: a.durationMs })),
        nextAttemptAt: d.status === "pending" ? Math.max(unixSeconds(d.nextAttemptAt), 0) : null,
        createdAt: unixSeconds(d.createdAt),
        finishedAt: d.finishedAt ? unixSeconds(d.finishedAt) : null,
      }));
      return c.json({ data, cursor: page.cursor }, 200);
    },
  );
}

/** Loopback and private addresses are refused at registration when named directly (DESIGN §6.8); names are checked at each delivery. */
function refusePrivate(url: string, allowPrivate: boolean) {
  if (allowPrivate) return;
  const host = new URL(url).hostname.replace(/^\[|\]$/g, "").toLowerCase();
  if (host === "localhost" || host.endsWith(".localhost") || (isIP(host) && isPrivateAddress(host))) {
    throw new ApiError(400, "VALIDATION_ERROR", "The URL names a loopback or private address; billing only sends there with CORE_BILLING_WEBHOOK_ALLOW_PRIVATE=1", [
      { path: "url", message: "a loopback or private address", code: "custom" },
    ]);
  }
}
