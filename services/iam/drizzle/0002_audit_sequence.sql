DROP INDEX "iam"."audit_events_page_idx";--> statement-breakpoint
ALTER TABLE "iam"."audit_events" ADD COLUMN "seq" bigserial NOT NULL;--> statement-breakpoint
CREATE INDEX "audit_events_page_idx" ON "iam"."audit_events" USING btree ("at","seq");