CREATE TABLE "billing"."credit_notes" (
	"id" text PRIMARY KEY NOT NULL,
	"number" text NOT NULL,
	"invoice_id" text NOT NULL,
	"customer_id" text NOT NULL,
	"currency" text NOT NULL,
	"amount_cents" bigint NOT NULL,
	"tax_cents" bigint NOT NULL,
	"reason" text NOT NULL,
	"refund_to" text NOT NULL,
	"status" text NOT NULL,
	"memo" text,
	"refund_id" text,
	"refund_state" text,
	"refund_attempts" integer DEFAULT 0 NOT NULL,
	"refund_next_check_at" timestamp with time zone,
	"refund_failure" text,
	"request_key" text,
	"actor_type" text NOT NULL,
	"actor_id" text,
	"created_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "billing"."mail_outbox" (
	"id" text PRIMARY KEY NOT NULL,
	"kind" text NOT NULL,
	"dedupe_key" text NOT NULL,
	"to" text NOT NULL,
	"subject" text NOT NULL,
	"text" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"sent_at" timestamp with time zone,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp with time zone NOT NULL,
	"lease_until" timestamp with time zone,
	"last_error" text
);
--> statement-breakpoint
CREATE TABLE "billing"."refunds" (
	"id" text PRIMARY KEY NOT NULL,
	"idempotency_key" text NOT NULL,
	"charge_id" text NOT NULL,
	"amount_cents" bigint NOT NULL,
	"currency" text NOT NULL,
	"status" text NOT NULL,
	"failure_code" text,
	"created_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
DROP INDEX "billing"."usage_alerts_unsent_idx";--> statement-breakpoint
ALTER TABLE "billing"."customers" ADD COLUMN "address" jsonb;--> statement-breakpoint
ALTER TABLE "billing"."customers" ADD COLUMN "tax_ids" jsonb DEFAULT '[]'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "billing"."customers" ADD COLUMN "tax_exempt" text DEFAULT 'none' NOT NULL;--> statement-breakpoint
ALTER TABLE "billing"."invoice_lines" ADD COLUMN "tax_rate_percent" numeric(9, 4);--> statement-breakpoint
ALTER TABLE "billing"."invoices" ADD COLUMN "seller" jsonb;--> statement-breakpoint
ALTER TABLE "billing"."invoices" ADD COLUMN "tax_rate_percent" numeric(9, 4);--> statement-breakpoint
ALTER TABLE "billing"."invoices" ADD COLUMN "tax_base_cents" bigint;--> statement-breakpoint
ALTER TABLE "billing"."invoices" ADD COLUMN "tax_treatment" text;--> statement-breakpoint
ALTER TABLE "billing"."invoices" ADD COLUMN "amount_refunded_cents" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "billing"."invoices" ADD COLUMN "amount_credited_cents" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "billing"."invoices" ADD COLUMN "credit_note_count" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "billing"."invoices" ADD COLUMN "disputed" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "billing"."webhook_endpoints" ADD COLUMN "previous_secret" text;--> statement-breakpoint
ALTER TABLE "billing"."webhook_endpoints" ADD COLUMN "previous_secret_expires_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "billing"."credit_notes" ADD CONSTRAINT "credit_notes_invoice_id_invoices_id_fk" FOREIGN KEY ("invoice_id") REFERENCES "billing"."invoices"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "billing"."credit_notes" ADD CONSTRAINT "credit_notes_customer_id_customers_id_fk" FOREIGN KEY ("customer_id") REFERENCES "billing"."customers"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "billing"."refunds" ADD CONSTRAINT "refunds_charge_id_charges_id_fk" FOREIGN KEY ("charge_id") REFERENCES "billing"."charges"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "credit_notes_number_key" ON "billing"."credit_notes" USING btree ("invoice_id","number");--> statement-breakpoint
CREATE UNIQUE INDEX "credit_notes_refund_key" ON "billing"."credit_notes" USING btree ("refund_id") WHERE "billing"."credit_notes"."refund_id" is not null;--> statement-breakpoint
CREATE UNIQUE INDEX "credit_notes_request_key" ON "billing"."credit_notes" USING btree ("request_key") WHERE "billing"."credit_notes"."request_key" is not null;--> statement-breakpoint
CREATE INDEX "credit_notes_customer_idx" ON "billing"."credit_notes" USING btree ("customer_id","created_at");--> statement-breakpoint
CREATE INDEX "credit_notes_refund_due_idx" ON "billing"."credit_notes" USING btree ("refund_next_check_at") WHERE "billing"."credit_notes"."refund_state" = 'pending';--> statement-breakpoint
CREATE UNIQUE INDEX "mail_outbox_dedupe_key" ON "billing"."mail_outbox" USING btree ("dedupe_key");--> statement-breakpoint
CREATE INDEX "mail_outbox_due_idx" ON "billing"."mail_outbox" USING btree ("next_attempt_at") WHERE "billing"."mail_outbox"."sent_at" is null;--> statement-breakpoint
CREATE UNIQUE INDEX "refunds_idempotency_key" ON "billing"."refunds" USING btree ("idempotency_key");--> statement-breakpoint
CREATE INDEX "refunds_charge_idx" ON "billing"."refunds" USING btree ("charge_id");--> statement-breakpoint
CREATE INDEX "customers_created_idx" ON "billing"."customers" USING btree ("created_at","id");--> statement-breakpoint
CREATE INDEX "customers_email_search_idx" ON "billing"."customers" USING btree (lower("email") text_pattern_ops);--> statement-breakpoint
CREATE INDEX "customers_email_domain_idx" ON "billing"."customers" USING btree (split_part(lower("email"), '@', 2) text_pattern_ops);--> statement-breakpoint
CREATE INDEX "subscriptions_created_idx" ON "billing"."subscriptions" USING btree ("created_at","id");--> statement-breakpoint
CREATE INDEX "subscriptions_status_created_idx" ON "billing"."subscriptions" USING btree ("status","created_at","id");--> statement-breakpoint
ALTER TABLE "billing"."usage_alerts" DROP COLUMN "notified_at";--> statement-breakpoint
ALTER TABLE "billing"."usage_alerts" DROP COLUMN "notify_attempts";--> statement-breakpoint
ALTER TABLE "billing"."usage_alerts" DROP COLUMN "next_notify_at";--> statement-breakpoint
ALTER TABLE "billing"."invoices" ADD CONSTRAINT "invoices_credit_within_paid" CHECK ("billing"."invoices"."amount_refunded_cents" + "billing"."invoices"."amount_credited_cents" <= "billing"."invoices"."amount_paid_cents");