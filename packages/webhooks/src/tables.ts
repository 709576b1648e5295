import { sql } from "drizzle-orm";
import { index, integer, jsonb, primaryKey, text, timestamp, uniqueIndex, type PgColumnBuilderBase, type PgSchema } from "drizzle-orm/pg-core";

// billing's columns as its migrations made them (timestamptz, no precision): the shape is shared, so IAM's are alike
const ts = (name: string) => timestamp(name, { withTimezone: true, mode: "date" });

/** The columns every service's endpoints table has; a service may add its own (IAM's organization scope). */
const endpointColumns = () => ({
  id: text("id").primaryKey(),
  url: text("url").notNull(),
  events: text("events").array(),
  secret: text("secret").notNull(),
  /** the secret before the last rotation: deliveries are signed with both until it expires */
  previousSecret: text("previous_secret"),
  previousSecretExpiresAt: ts("previous_secret_expires_at"),
  description: text("description"),
  createdAt: ts("created_at").notNull(),
  disabledAt: ts("disabled_at"),
});

/**
 * The four tables of webhooks out (DESIGN §6.8, ADR 0027) in a service's own Postgres schema:
 * billing's in `billing`, IAM's in `iam`, the same shape, so one dispatcher and one set of endpoint
 * operations serve both. `extraEndpointColumns` are the service's own columns on its endpoints (IAM:
 * the organization an endpoint is scoped to); the shared code never reads them.
 *
 * - `webhook_endpoints`: where events go, the event types each takes (null: all) and the secret
 *   every delivery is signed with (shown once, at creation). Deleting one disables it and ends its
 *   pending deliveries; its history stays readable.
 * - `webhook_events`: the outbox, each event written in the transaction of what it reports.
 * - `webhook_deliveries`: one event for one endpoint, pending until an attempt is answered 2xx
 *   (delivered) or three days of retries pass (failed); leased by a dispatcher before it sends.
 * - `webhook_attempts`: every attempt of a delivery and how the endpoint answered (or why it did not).
 */
export function webhookTables<S extends string, X extends Record<string, PgColumnBuilderBase> = Record<never, never>>(schema: PgSchema<S>, extraEndpointColumns?: X) {
  const webhookEndpoints = schema.table("webhook_endpoints", { ...endpointColumns(), ...(extraEndpointColumns ?? ({} as X)) });
  const webhookEvents = schema.table(
    "webhook_events",
    {
      id: text("id").primaryKey(),
      type: text("type").notNull(),
      data: jsonb("data").$type<Record<string, unknown>>().notNull(),
      createdAt: ts("created_at").notNull(),
    },
    (t) => [index("webhook_events_created_idx").on(t.createdAt)],
  );
  const webhookDeliveries = schema.table(
    "webhook_deliveries",
    {
      id: text("id").primaryKey(),
      eventId: text("event_id").notNull(),
      endpointId: text("endpoint_id").notNull(),
      status: text("status", { enum: ["pending", "delivered", "failed"] }).notNull(),
      attempts: integer("attempts").notNull().default(0),
      nextAttemptAt: ts("next_attempt_at").notNull(),
      leaseUntil: ts("lease_until"),
      createdAt: ts("created_at").notNull(),
      finishedAt: ts("finished_at"),
    },
    (t) => [
      uniqueIndex("webhook_deliveries_event_endpoint_key").on(t.eventId, t.endpointId),
      index("webhook_deliveries_due_idx").on(t.nextAttemptAt).where(sql`${t.status} = 'pending'`),
      index("webhook_deliveries_endpoint_idx").on(t.endpointId, t.createdAt),
    ],
  );
  const webhookAttempts = schema.table(
    "webhook_attempts",
    {
      deliveryId: text("delivery_id").notNull(),
      attempt: integer("attempt").notNull(),
      at: ts("at").notNull(),
      /** the HTTP status, null when there was no answer */
      status: integer("status"),
      /** the first 500 characters of the answer, or why there was none */
      response: text("response").notNull(),
      durationMs: integer("duration_ms").notNull(),
    },
    (t) => [primaryKey({ columns: [t.deliveryId, t.attempt] })],
  );
  return { webhookEndpoints, webhookEvents, webhookDeliveries, webhookAttempts };
}

/** A service's webhook tables as the shared code sees them: the common columns only. */
export type WebhookTables = ReturnType<typeof webhookTables<string>>;
export type WebhookEndpointRow = WebhookTables["webhookEndpoints"]["$inferSelect"];
export type WebhookEventRow = WebhookTables["webhookEvents"]["$inferSelect"];
