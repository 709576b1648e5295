CREATE SCHEMA "billing";
--> statement-breakpoint
CREATE TABLE "billing"."balance_ledger" (
	"id" text PRIMARY KEY NOT NULL,
	"customer_id" text NOT NULL,
	"amount_cents" bigint NOT NULL,
	"currency" text NOT NULL,
	"kind" text NOT NULL,
	"description" text NOT NULL,
	"invoice_id" text,
	"balance_after_cents" bigint NOT NULL,
	"actor_type" text NOT NULL,
	"actor_id" text,
	"created_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "billing"."charges" (
	"id" text PRIMARY KEY NOT NULL,
	"idempotency_key" text NOT NULL,
	"customer_id" text NOT NULL,
	"invoice_id" text NOT NULL,
	"payment_method_id" text NOT NULL,
	"amount_cents" bigint NOT NULL,
	"currency" text NOT NULL,
	"status" text NOT NULL,
	"code" text,
	"decline_code" text,
	"created_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "billing"."clock_offset" (
	"id" integer PRIMARY KEY NOT NULL,
	"offset_seconds" bigint NOT NULL,
	"updated_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "billing"."customers" (
	"id" text PRIMARY KEY NOT NULL,
	"platform_id" text,
	"user_id" text,
	"email" text NOT NULL,
	"name" text,
	"metadata" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"balance_cents" bigint DEFAULT 0 NOT NULL,
	"currency" text DEFAULT 'usd' NOT NULL,
	"default_payment_method_id" text,
	"invoice_prefix" text NOT NULL,
	"next_invoice_number" integer DEFAULT 1 NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "billing"."idempotency_keys" (
	"caller" text NOT NULL,
	"route" text NOT NULL,
	"key" text NOT NULL,
	"request_hash" text NOT NULL,
	"state" text NOT NULL,
	"locked_until" timestamp with time zone NOT NULL,
	"provider_key" text NOT NULL,
	"response_status" integer,
	"response_body" jsonb,
	"created_at" timestamp with time zone NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	CONSTRAINT "idempotency_keys_caller_route_key_pk" PRIMARY KEY("caller","route","key")
);
--> statement-breakpoint
CREATE TABLE "billing"."invoice_lines" (
	"id" text PRIMARY KEY NOT NULL,
	"invoice_id" text NOT NULL,
	"position" integer NOT NULL,
	"kind" text NOT NULL,
	"description" text NOT NULL,
	"meter" text,
	"quantity" numeric(38, 12),
	"unit_amount_cents" numeric(38, 12),
	"amount_cents" bigint NOT NULL,
	"period_start" timestamp with time zone,
	"period_end" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "billing"."invoices" (
	"id" text PRIMARY KEY NOT NULL,
	"number" text,
	"platform_id" text NOT NULL,
	"customer_id" text NOT NULL,
	"subscription_id" text,
	"reason" text NOT NULL,
	"status" text NOT NULL,
	"currency" text NOT NULL,
	"subtotal_cents" bigint NOT NULL,
	"tax_cents" bigint NOT NULL,
	"credit_applied_cents" bigint NOT NULL,
	"total_cents" bigint NOT NULL,
	"amount_due_cents" bigint NOT NULL,
	"amount_paid_cents" bigint DEFAULT 0 NOT NULL,
	"amount_carried_cents" bigint DEFAULT 0 NOT NULL,
	"period_start" timestamp with time zone NOT NULL,
	"period_end" timestamp with time zone NOT NULL,
	"customer_snapshot" jsonb NOT NULL,
	"attempt_count" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp with time zone,
	"last_decline_code" text,
	"request_key" text,
	"created_at" timestamp with time zone NOT NULL,
	"finalized_at" timestamp with time zone,
	"paid_at" timestamp with time zone,
	"voided_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "billing"."operator_audit" (
	"id" text PRIMARY KEY NOT NULL,
	"seq" bigint GENERATED ALWAYS AS IDENTITY (sequence name "billing"."operator_audit_seq_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"at" timestamp with time zone NOT NULL,
	"actor_type" text NOT NULL,
	"actor_id" text,
	"action" text NOT NULL,
	"target_type" text NOT NULL,
	"target_id" text NOT NULL,
	"before" jsonb,
	"after" jsonb,
	"request_id" text
);
--> statement-breakpoint
CREATE TABLE "billing"."payment_methods" (
	"id" text PRIMARY KEY NOT NULL,
	"customer_id" text,
	"type" text DEFAULT 'card' NOT NULL,
	"brand" text NOT NULL,
	"last4" text NOT NULL,
	"exp_month" integer NOT NULL,
	"exp_year" integer NOT NULL,
	"funding" text DEFAULT 'credit' NOT NULL,
	"fails_charges" boolean DEFAULT false NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"detached_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "billing"."portal_sessions" (
	"id" text PRIMARY KEY NOT NULL,
	"customer_id" text NOT NULL,
	"platform_id" text NOT NULL,
	"return_url" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"expires_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "billing"."setup_intents" (
	"id" text PRIMARY KEY NOT NULL,
	"customer_id" text NOT NULL,
	"client_secret" text NOT NULL,
	"status" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "billing"."subscriptions" (
	"id" text PRIMARY KEY NOT NULL,
	"platform_id" text NOT NULL,
	"customer_id" text,
	"tier" text NOT NULL,
	"plan_id" text NOT NULL,
	"status" text NOT NULL,
	"current" boolean NOT NULL,
	"billing_anchor" timestamp with time zone NOT NULL,
	"current_period_start" timestamp with time zone NOT NULL,
	"current_period_end" timestamp with time zone NOT NULL,
	"cancel_at_period_end" boolean DEFAULT false NOT NULL,
	"canceled_at" timestamp with time zone,
	"trial_end" timestamp with time zone,
	"pending_tier" text,
	"quantity" integer DEFAULT 1 NOT NULL,
	"pending_quantity" integer,
	"metadata" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"period_paid_cents" bigint DEFAULT 0 NOT NULL,
	"period_credited_cents" bigint DEFAULT 0 NOT NULL,
	"lease_id" text,
	"lease_until" timestamp with time zone,
	"created_at" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "billing"."tier_sync" (
	"platform_id" text PRIMARY KEY NOT NULL,
	"tier" text NOT NULL,
	"version" integer NOT NULL,
	"synced_version" integer DEFAULT 0 NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp with time zone NOT NULL,
	"last_error" text,
	"updated_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "billing"."usage_alerts" (
	"id" text PRIMARY KEY NOT NULL,
	"platform_id" text NOT NULL,
	"meter" text NOT NULL,
	"period_start" timestamp with time zone NOT NULL,
	"threshold_percent" integer NOT NULL,
	"quantity" numeric(38, 12) NOT NULL,
	"included" numeric(38, 12) NOT NULL,
	"triggered_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "billing"."usage_daily" (
	"platform_id" text NOT NULL,
	"period_start" timestamp with time zone NOT NULL,
	"period_end" timestamp with time zone NOT NULL,
	"tenant_id" text DEFAULT '' NOT NULL,
	"stack_id" text DEFAULT '' NOT NULL,
	"meter" text NOT NULL,
	"day" date NOT NULL,
	"quantity" numeric(38, 12) NOT NULL,
	CONSTRAINT "usage_daily_platform_id_period_start_tenant_id_stack_id_meter_day_pk" PRIMARY KEY("platform_id","period_start","tenant_id","stack_id","meter","day")
);
--> statement-breakpoint
CREATE TABLE "billing"."usage_entities" (
	"platform_id" text NOT NULL,
	"tenant_id" text NOT NULL,
	"first_seen_at" timestamp with time zone NOT NULL,
	"last_seen_at" timestamp with time zone NOT NULL,
	CONSTRAINT "usage_entities_platform_id_tenant_id_pk" PRIMARY KEY("platform_id","tenant_id")
);
--> statement-breakpoint
ALTER TABLE "billing"."balance_ledger" ADD CONSTRAINT "balance_ledger_customer_id_customers_id_fk" FOREIGN KEY ("customer_id") REFERENCES "billing"."customers"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "billing"."balance_ledger" ADD CONSTRAINT "balance_ledger_invoice_id_invoices_id_fk" FOREIGN KEY ("invoice_id") REFERENCES "billing"."invoices"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "billing"."charges" ADD CONSTRAINT "charges_customer_id_customers_id_fk" FOREIGN KEY ("customer_id") REFERENCES "billing"."customers"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "billing"."invoice_lines" ADD CONSTRAINT "invoice_lines_invoice_id_invoices_id_fk" FOREIGN KEY ("invoice_id") REFERENCES "billing"."invoices"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "billing"."invoices" ADD CONSTRAINT "invoices_customer_id_customers_id_fk" FOREIGN KEY ("customer_id") REFERENCES "billing"."customers"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "billing"."invoices" ADD CONSTRAINT "invoices_subscription_id_subscriptions_id_fk" FOREIGN KEY ("subscription_id") REFERENCES "billing"."subscriptions"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "billing"."payment_methods" ADD CONSTRAINT "payment_methods_customer_id_customers_id_fk" FOREIGN KEY ("customer_id") REFERENCES "billing"."customers"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "billing"."portal_sessions" ADD CONSTRAINT "portal_sessions_customer_id_customers_id_fk" FOREIGN KEY ("customer_id") REFERENCES "billing"."customers"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "billing"."setup_intents" ADD CONSTRAINT "setup_intents_customer_id_customers_id_fk" FOREIGN KEY ("customer_id") REFERENCES "billing"."customers"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "billing"."subscriptions" ADD CONSTRAINT "subscriptions_customer_id_customers_id_fk" FOREIGN KEY ("customer_id") REFERENCES "billing"."customers"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "balance_ledger_customer_idx" ON "billing"."balance_ledger" USING btree ("customer_id","created_at");--> statement-breakpoint
CREATE UNIQUE INDEX "charges_idempotency_key" ON "billing"."charges" USING btree ("idempotency_key");--> statement-breakpoint
CREATE INDEX "charges_invoice_idx" ON "billing"."charges" USING btree ("invoice_id");--> statement-breakpoint
CREATE UNIQUE INDEX "customers_platform_key" ON "billing"."customers" USING btree ("platform_id") WHERE "billing"."customers"."platform_id" is not null;--> statement-breakpoint
CREATE INDEX "customers_user_idx" ON "billing"."customers" USING btree ("user_id");--> statement-breakpoint
CREATE UNIQUE INDEX "customers_invoice_prefix_key" ON "billing"."customers" USING btree ("invoice_prefix");--> statement-breakpoint
CREATE INDEX "idempotency_keys_expiry_idx" ON "billing"."idempotency_keys" USING btree ("expires_at");--> statement-breakpoint
CREATE UNIQUE INDEX "invoice_lines_position_key" ON "billing"."invoice_lines" USING btree ("invoice_id","position");--> statement-breakpoint
CREATE UNIQUE INDEX "invoices_number_key" ON "billing"."invoices" USING btree ("customer_id","number");--> statement-breakpoint
CREATE UNIQUE INDEX "invoices_request_key" ON "billing"."invoices" USING btree ("request_key");--> statement-breakpoint
CREATE INDEX "invoices_platform_page_idx" ON "billing"."invoices" USING btree ("platform_id","created_at","id");--> statement-breakpoint
CREATE INDEX "invoices_retry_idx" ON "billing"."invoices" USING btree ("next_attempt_at") WHERE "billing"."invoices"."status" = 'open';--> statement-breakpoint
CREATE UNIQUE INDEX "invoices_one_cycle_per_period_key" ON "billing"."invoices" USING btree ("subscription_id","period_start") WHERE "billing"."invoices"."reason" in ('subscription_cycle', 'trial_end');--> statement-breakpoint
CREATE INDEX "operator_audit_page_idx" ON "billing"."operator_audit" USING btree ("at","seq");--> statement-breakpoint
CREATE INDEX "payment_methods_customer_idx" ON "billing"."payment_methods" USING btree ("customer_id");--> statement-breakpoint
CREATE UNIQUE INDEX "subscriptions_current_key" ON "billing"."subscriptions" USING btree ("platform_id") WHERE "billing"."subscriptions"."current";--> statement-breakpoint
CREATE INDEX "subscriptions_platform_idx" ON "billing"."subscriptions" USING btree ("platform_id","created_at");--> statement-breakpoint
CREATE INDEX "subscriptions_customer_idx" ON "billing"."subscriptions" USING btree ("customer_id");--> statement-breakpoint
CREATE INDEX "subscriptions_due_idx" ON "billing"."subscriptions" USING btree ("current_period_end") WHERE "billing"."subscriptions"."current";--> statement-breakpoint
CREATE UNIQUE INDEX "usage_alerts_once_key" ON "billing"."usage_alerts" USING btree ("platform_id","meter","period_start","threshold_percent");--> statement-breakpoint
CREATE INDEX "usage_daily_day_idx" ON "billing"."usage_daily" USING btree ("platform_id","day");