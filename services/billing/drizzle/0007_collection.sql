CREATE TABLE "billing"."work_backoff" (
	"item" text PRIMARY KEY NOT NULL,
	"not_before" timestamp with time zone NOT NULL,
	"failures" integer NOT NULL,
	"last_error" text NOT NULL
);
--> statement-breakpoint
-- a record's request key was its provider key: the invoices its request made carry it
ALTER TABLE "billing"."idempotency_keys" ADD COLUMN "request_key" text;--> statement-breakpoint
UPDATE "billing"."idempotency_keys" SET "request_key" = "provider_key";--> statement-breakpoint
ALTER TABLE "billing"."idempotency_keys" ALTER COLUMN "request_key" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "billing"."invoices" ADD COLUMN "intent" jsonb;--> statement-breakpoint
ALTER TABLE "billing"."invoices" ADD COLUMN "collection_state" text;--> statement-breakpoint
ALTER TABLE "billing"."invoices" ADD COLUMN "collection_since" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "billing"."invoices" ADD COLUMN "next_check_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "billing"."invoices" ADD COLUMN "check_count" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "billing"."invoices" ADD COLUMN "charge_payment_method_id" text;--> statement-breakpoint
ALTER TABLE "billing"."invoices" ADD COLUMN "payment_id" text;--> statement-breakpoint
ALTER TABLE "billing"."invoices" ADD COLUMN "last_failure_code" text;--> statement-breakpoint
CREATE INDEX "invoices_check_idx" ON "billing"."invoices" USING btree ("next_check_at") WHERE "billing"."invoices"."collection_state" is not null;--> statement-breakpoint
CREATE INDEX "invoices_in_flight_idx" ON "billing"."invoices" USING btree ("subscription_id") WHERE "billing"."invoices"."collection_state" is not null;--> statement-breakpoint
ALTER TABLE "billing"."idempotency_keys" DROP COLUMN "provider_key";--> statement-breakpoint
-- invoices made before intents: renewals and usage invoices settle what is owed, manual ones too
UPDATE "billing"."invoices" SET "intent" = '{"kind":"renewal"}'::jsonb WHERE "intent" IS NULL AND "reason" IN ('subscription_cycle', 'usage');--> statement-breakpoint
UPDATE "billing"."invoices" SET "intent" = '{"kind":"manual"}'::jsonb WHERE "intent" IS NULL AND "reason" = 'manual';--> statement-breakpoint
ALTER TABLE "billing"."payment_methods" ADD COLUMN "loses_first_answer" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "billing"."invoices" ADD COLUMN "attempt_request_key" text;--> statement-breakpoint
-- subscription events are written by the engine's one subscription writer now (writeSubscription in
-- src/subscriptions.ts), in the shape the API answers: one definition of it, not a second in SQL
DROP TRIGGER "subscriptions_webhook_insert" ON "billing"."subscriptions";--> statement-breakpoint
DROP TRIGGER "subscriptions_webhook_update" ON "billing"."subscriptions";--> statement-breakpoint
DROP FUNCTION "billing"."note_subscription_event"();--> statement-breakpoint
DROP FUNCTION "billing"."subscription_json"("billing"."subscriptions");
