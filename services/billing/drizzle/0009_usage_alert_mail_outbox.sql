DROP INDEX "billing"."usage_alerts_unsent_idx";--> statement-breakpoint
ALTER TABLE "billing"."usage_alerts" DROP COLUMN "notified_at";--> statement-breakpoint
ALTER TABLE "billing"."usage_alerts" DROP COLUMN "notify_attempts";--> statement-breakpoint
ALTER TABLE "billing"."usage_alerts" DROP COLUMN "next_notify_at";