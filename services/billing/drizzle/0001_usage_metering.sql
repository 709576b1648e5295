CREATE TABLE "billing"."usage_days" (
	"platform_id" text NOT NULL,
	"day" date NOT NULL,
	"meter" text NOT NULL,
	"period_start" timestamp with time zone NOT NULL,
	"quantity" numeric(38, 12) NOT NULL,
	CONSTRAINT "usage_days_platform_id_day_meter_period_start_pk" PRIMARY KEY("platform_id","day","meter","period_start")
);
--> statement-breakpoint
CREATE TABLE "billing"."usage_events" (
	"platform_id" text NOT NULL,
	"id" text NOT NULL,
	"tenant_id" text NOT NULL,
	"stack_id" text NOT NULL,
	"meter" text NOT NULL,
	"quantity" numeric(38, 12) NOT NULL,
	"occurred_at" timestamp with time zone NOT NULL,
	"period_start" timestamp with time zone NOT NULL,
	"received_at" timestamp with time zone NOT NULL,
	CONSTRAINT "usage_events_platform_id_id_pk" PRIMARY KEY("platform_id","id")
);
--> statement-breakpoint
CREATE TABLE "billing"."usage_periods" (
	"platform_id" text NOT NULL,
	"period_start" timestamp with time zone NOT NULL,
	"period_end" timestamp with time zone,
	"subscription_id" text,
	"customer_id" text,
	"tier" text NOT NULL,
	"status" text DEFAULT 'open' NOT NULL,
	"closed_at" timestamp with time zone,
	"invoice_id" text,
	"closed_totals" jsonb,
	CONSTRAINT "usage_periods_platform_id_period_start_pk" PRIMARY KEY("platform_id","period_start")
);
--> statement-breakpoint
CREATE TABLE "billing"."usage_pruned" (
	"platform_id" text NOT NULL,
	"period_start" timestamp with time zone NOT NULL,
	"meter" text NOT NULL,
	"quantity" numeric(38, 12) NOT NULL,
	"events" bigint NOT NULL,
	CONSTRAINT "usage_pruned_platform_id_period_start_meter_pk" PRIMARY KEY("platform_id","period_start","meter")
);
--> statement-breakpoint
CREATE TABLE "billing"."usage_totals" (
	"platform_id" text NOT NULL,
	"period_start" timestamp with time zone NOT NULL,
	"meter" text NOT NULL,
	"quantity" numeric(38, 12) NOT NULL,
	CONSTRAINT "usage_totals_platform_id_period_start_meter_pk" PRIMARY KEY("platform_id","period_start","meter")
);
--> statement-breakpoint
ALTER TABLE "billing"."usage_alerts" ADD COLUMN "notified_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "billing"."usage_alerts" ADD COLUMN "notify_attempts" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "billing"."usage_alerts" ADD COLUMN "next_notify_at" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "usage_events_period_idx" ON "billing"."usage_events" USING btree ("platform_id","period_start");--> statement-breakpoint
CREATE INDEX "usage_events_occurred_brin" ON "billing"."usage_events" USING brin ("occurred_at");--> statement-breakpoint
CREATE INDEX "usage_periods_closing_idx" ON "billing"."usage_periods" USING btree ("period_end") WHERE "billing"."usage_periods"."status" = 'open';--> statement-breakpoint
CREATE UNIQUE INDEX "invoices_one_usage_per_period_key" ON "billing"."invoices" USING btree ("platform_id","period_start") WHERE "billing"."invoices"."reason" = 'usage';--> statement-breakpoint
CREATE INDEX "usage_alerts_unsent_idx" ON "billing"."usage_alerts" USING btree ("next_notify_at") WHERE "billing"."usage_alerts"."notified_at" is null;--> statement-breakpoint
ALTER TABLE "billing"."usage_daily" DROP COLUMN "period_end";