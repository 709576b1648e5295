CREATE TABLE "billing"."webhook_attempts" (
	"delivery_id" text NOT NULL,
	"attempt" integer NOT NULL,
	"at" timestamp with time zone NOT NULL,
	"status" integer,
	"response" text NOT NULL,
	"duration_ms" integer NOT NULL,
	CONSTRAINT "webhook_attempts_delivery_id_attempt_pk" PRIMARY KEY("delivery_id","attempt")
);
--> statement-breakpoint
CREATE TABLE "billing"."webhook_deliveries" (
	"id" text PRIMARY KEY NOT NULL,
	"event_id" text NOT NULL,
	"endpoint_id" text NOT NULL,
	"status" text NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp with time zone NOT NULL,
	"lease_until" timestamp with time zone,
	"created_at" timestamp with time zone NOT NULL,
	"finished_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "billing"."webhook_endpoints" (
	"id" text PRIMARY KEY NOT NULL,
	"url" text NOT NULL,
	"events" text[],
	"secret" text NOT NULL,
	"description" text,
	"created_at" timestamp with time zone NOT NULL,
	"disabled_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "billing"."webhook_events" (
	"id" text PRIMARY KEY NOT NULL,
	"type" text NOT NULL,
	"data" jsonb NOT NULL,
	"created_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "billing"."subscriptions" ADD COLUMN "trial_will_end_noted_for" timestamp with time zone;--> statement-breakpoint
CREATE UNIQUE INDEX "webhook_deliveries_event_endpoint_key" ON "billing"."webhook_deliveries" USING btree ("event_id","endpoint_id");--> statement-breakpoint
CREATE INDEX "webhook_deliveries_due_idx" ON "billing"."webhook_deliveries" USING btree ("next_attempt_at") WHERE "billing"."webhook_deliveries"."status" = 'pending';--> statement-breakpoint
CREATE INDEX "webhook_deliveries_endpoint_idx" ON "billing"."webhook_deliveries" USING btree ("endpoint_id","created_at");--> statement-breakpoint
CREATE INDEX "webhook_events_created_idx" ON "billing"."webhook_events" USING btree ("created_at");
--> statement-breakpoint
-- Whether any enabled endpoint takes events of this type: callers ask before building an event.
CREATE FUNCTION "billing"."webhook_wanted"(event_type text) RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM "billing"."webhook_endpoints"
                  WHERE "disabled_at" IS NULL AND ("events" IS NULL OR event_type = ANY ("events")))
$$;
--> statement-breakpoint
-- The outbox's one writer (DESIGN §6.8): an event, and a pending delivery for every enabled endpoint
-- that takes its type, in the caller's transaction. No endpoint takes it: nothing is written.
CREATE FUNCTION "billing"."emit_webhook_event"(event_type text, event_data jsonb, event_at timestamptz) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  event_id text;
BEGIN
  IF NOT "billing"."webhook_wanted"(event_type) THEN
    RETURN;
  END IF;
  event_id := 'evt_' || replace(gen_random_uuid()::text, '-', '');
  INSERT INTO "billing"."webhook_events" ("id", "type", "data", "created_at") VALUES (event_id, event_type, event_data, event_at);
  -- due at once: the dispatcher compares next_attempt_at with wall-clock time, event_at is billing time
  INSERT INTO "billing"."webhook_deliveries" ("id", "event_id", "endpoint_id", "status", "next_attempt_at", "created_at")
  SELECT 'whd_' || replace(gen_random_uuid()::text, '-', ''), event_id, "id", 'pending', 'epoch'::timestamptz, event_at
    FROM "billing"."webhook_endpoints"
   WHERE "disabled_at" IS NULL AND ("events" IS NULL OR event_type = ANY ("events"));
END
$$;
--> statement-breakpoint
-- A subscription as GET /subscription answers it (subscriptionJson in src/subscriptions.ts; a test
-- compares the two), for the subscription events the trigger below writes.
CREATE FUNCTION "billing"."subscription_json"(s "billing"."subscriptions") RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object(
    'id', s."id", 'platformId', s."platform_id", 'customerId', s."customer_id", 'tier', s."tier", 'planId', s."plan_id",
    'status', s."status", 'billingAnchor', floor(extract(epoch FROM s."billing_anchor"))::bigint,
    'currentPeriodStart', floor(extract(epoch FROM s."current_period_start"))::bigint,
    'currentPeriodEnd', floor(extract(epoch FROM s."current_period_end"))::bigint,
    'cancelAtPeriodEnd', s."cancel_at_period_end",
    'canceledAt', floor(extract(epoch FROM s."canceled_at"))::bigint,
    'trialEnd', floor(extract(epoch FROM s."trial_end"))::bigint,
    'pendingTier', s."pending_tier", 'quantity', s."quantity", 'pendingQuantity', s."pending_quantity",
    'metadata', s."metadata", 'createdAt', floor(extract(epoch FROM s."created_at"))::bigint)
$$;
--> statement-breakpoint
-- Every change of a paid subscription is an event, whichever code path made it (DESIGN §6.8):
-- created when a platform leaves free, canceled when one ends, updated for anything else that a
-- reader of the subscription would see. Free subscriptions rolling their periods are not events.
CREATE FUNCTION "billing"."note_subscription_event"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  event_type text;
BEGIN
  IF TG_OP = 'INSERT' THEN
    IF NEW."tier" = 'free' THEN RETURN NULL; END IF;
    event_type := 'subscription.created';
  ELSIF NEW."status" = 'canceled' AND OLD."status" <> 'canceled' THEN
    event_type := 'subscription.canceled';
  ELSIF OLD."tier" = 'free' AND NEW."tier" <> 'free' THEN
    event_type := 'subscription.created';
  ELSIF OLD."tier" = 'free' AND NEW."tier" = 'free' AND NEW."pending_tier" IS NOT DISTINCT FROM OLD."pending_tier" THEN
    RETURN NULL;
  ELSE
    event_type := 'subscription.updated';
  END IF;
  PERFORM "billing"."emit_webhook_event"(event_type, "billing"."subscription_json"(NEW),
    CASE WHEN TG_OP = 'INSERT' THEN NEW."created_at" ELSE NEW."updated_at" END);
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE TRIGGER "subscriptions_webhook_insert" AFTER INSERT ON "billing"."subscriptions"
  FOR EACH ROW EXECUTE FUNCTION "billing"."note_subscription_event"();
--> statement-breakpoint
CREATE TRIGGER "subscriptions_webhook_update" AFTER UPDATE ON "billing"."subscriptions"
  FOR EACH ROW WHEN (
    OLD."tier" IS DISTINCT FROM NEW."tier" OR OLD."plan_id" IS DISTINCT FROM NEW."plan_id"
    OR OLD."status" IS DISTINCT FROM NEW."status" OR OLD."quantity" IS DISTINCT FROM NEW."quantity"
    OR OLD."pending_tier" IS DISTINCT FROM NEW."pending_tier" OR OLD."pending_quantity" IS DISTINCT FROM NEW."pending_quantity"
    OR OLD."cancel_at_period_end" IS DISTINCT FROM NEW."cancel_at_period_end"
    OR OLD."current_period_start" IS DISTINCT FROM NEW."current_period_start"
    OR OLD."trial_end" IS DISTINCT FROM NEW."trial_end" OR OLD."canceled_at" IS DISTINCT FROM NEW."canceled_at"
    OR OLD."customer_id" IS DISTINCT FROM NEW."customer_id" OR OLD."metadata" IS DISTINCT FROM NEW."metadata")
  EXECUTE FUNCTION "billing"."note_subscription_event"();
--> statement-breakpoint
-- A usage threshold crossed (80 %, 100 %) is an event too, in the ingesting batch's transaction
-- (DESIGN §6.5, §6.8); quantities are the exact decimals, as strings.
CREATE FUNCTION "billing"."note_usage_alert_event"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM "billing"."emit_webhook_event"('usage.threshold_reached', jsonb_build_object(
    'id', NEW."id", 'platformId', NEW."platform_id", 'meter', NEW."meter",
    'periodStart', floor(extract(epoch FROM NEW."period_start"))::bigint,
    'thresholdPercent', NEW."threshold_percent", 'quantity', trim_scale(NEW."quantity")::text, 'included', trim_scale(NEW."included")::text,
    'triggeredAt', floor(extract(epoch FROM NEW."triggered_at"))::bigint), NEW."triggered_at");
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE TRIGGER "usage_alerts_webhook_insert" AFTER INSERT ON "billing"."usage_alerts"
  FOR EACH ROW EXECUTE FUNCTION "billing"."note_usage_alert_event"();
