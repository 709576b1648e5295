CREATE INDEX "customers_created_idx" ON "billing"."customers" USING btree ("created_at","id");--> statement-breakpoint
CREATE INDEX "customers_email_search_idx" ON "billing"."customers" USING btree (lower("email") text_pattern_ops);--> statement-breakpoint
CREATE INDEX "customers_email_domain_idx" ON "billing"."customers" USING btree (split_part(lower("email"), '@', 2) text_pattern_ops);--> statement-breakpoint
CREATE INDEX "subscriptions_created_idx" ON "billing"."subscriptions" USING btree ("created_at","id");--> statement-breakpoint
CREATE INDEX "subscriptions_status_created_idx" ON "billing"."subscriptions" USING btree ("status","created_at","id");