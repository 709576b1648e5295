import { createRoute, z } from "@hono/zod-openapi";
import { errorResponses, jsonBody, jsonContent, security, traceOf, type ServiceApp } from "@core/kit";
import { requireOperator } from "../access.js";
import type { BillingContext } from "../app.js";
import { ingestBatch } from "../metering/ingest.js";
import { bothPrefixes } from "./answers.js";

/** At most this many events in one batch (DESIGN §6.5). */
export const MAX_BATCH = 1000;

// documents the event; the route checks each one on its own, so one bad event never refuses the batch
const UsageEventDoc = z
  .object({
    id: z.string().min(1).max(128).openapi({ description: "unique per platform: a re-sent event with the same content is a duplicate, never counted twice" }),
    platformId: z.string().min(1).max(128),
    tenantId: z.string().min(1).max(128).nullish(),
    stackId: z.string().min(1).max(128).nullish(),
    meter: z.string().min(1).max(64).openapi({ example: "api_requests" }),
    quantity: z.union([z.number().min(0), z.string()]).openapi({ description: "a decimal ≥ 0 with at most 12 decimal places, as a JSON number or a string (\"0.25\")" }),
    timestamp: z.union([z.number(), z.string()]).openapi({ description: "Unix seconds, or ISO 8601 with an offset; at most 5 minutes ahead and 35 days old" }),
  })
  .openapi("UsageEvent");

const BatchInput = z
  .object({
    events: z
      .array(z.unknown().openapi({ allOf: [{ $ref: "#/components/schemas/UsageEvent" }] }))
      .min(1)
      .max(MAX_BATCH)
      .openapi({ description: `1-${MAX_BATCH} events, each accepted, a duplicate or rejected on its own` }),
  })
  .strict()
  .openapi("UsageEventBatch");

const EventResult = z
  .object({
    index: z.number().int(),
    id: z.string().nullable(),
    status: z.enum(["accepted", "duplicate", "rejected"]),
    code: z.string().optional().openapi({ description: "why it was rejected: VALIDATION_ERROR, UNKNOWN_METER, UNKNOWN_PLATFORM, OUT_OF_WINDOW, PERIOD_CLOSED, ID_REUSED" }),
    message: z.string().optional(),
  })
  .openapi("UsageEventResult");

const BatchAnswer = z
  .object({ accepted: z.number().int(), duplicates: z.number().int(), rejected: z.number().int(), results: z.array(EventResult) })
  .openapi("UsageEventBatchResult");

/**
 * `POST /usage/events` (DESIGN §6.5): usage reported by the platform's own infrastructure, services
 * and operators only. Every event gets its own answer; the batch is one transaction, so an answered
 * batch is counted and an unanswered one can be sent again.
 */
export function usageEventRoutes(app: ServiceApp, ctx: BillingContext) {
  app.openAPIRegistry.register("UsageEvent", UsageEventDoc);
  for (const path of bothPrefixes("/usage/events")) {
    app.openapi(
      createRoute({
        method: "post",
        path,
        summary: "Report usage: 1-1000 events, each counted exactly once per (platform, id); re-sent events answer `duplicate`",
        security: security.anyCredential,
        request: { body: jsonBody(BatchInput) },
        responses: { 200: jsonContent(BatchAnswer, "Each event's fate, in the batch's order"), ...errorResponses(400, 401, 403, 413, 429, 503) },
      }),
      async (c) => {
        await requireOperator(c, ctx.credentials);
        const { events } = c.req.valid("json");
        const { alerts, ...answer } = await ingestBatch({ engine: ctx.engine, platforms: ctx.platforms, graceSeconds: ctx.config.usageGraceSeconds, trace: traceOf(c) }, events);
        if (alerts > 0) ctx.mail.kick();
        return c.json(answer, 200);
      },
    );
  }
}
