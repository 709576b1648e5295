-- The usage period log (DESIGN §6.5; schema.ts, usagePeriods) follows the subscriptions here, in the
-- transaction of each change, so no code path that moves a period can forget it: a period appears when
-- a current subscription enters it, its end, tier and customer follow the subscription while it is
-- current, and a period cut short (an upgrade from free, a trial's start) ends where the next begins.
-- A closed period never changes.
CREATE FUNCTION "billing"."note_usage_period"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE "billing"."usage_periods" SET "period_end" = NEW."current_period_start"
   WHERE "platform_id" = NEW."platform_id" AND "status" = 'open' AND "period_start" < NEW."current_period_start"
     AND ("period_end" IS NULL OR "period_end" > NEW."current_period_start");
  INSERT INTO "billing"."usage_periods" ("platform_id", "period_start", "period_end", "subscription_id", "customer_id", "tier")
  VALUES (NEW."platform_id", NEW."current_period_start", NEW."current_period_end", NEW."id", NEW."customer_id", NEW."tier")
  ON CONFLICT ("platform_id", "period_start") DO UPDATE
     SET "period_end" = excluded."period_end", "subscription_id" = excluded."subscription_id",
         "customer_id" = excluded."customer_id", "tier" = excluded."tier"
   WHERE "billing"."usage_periods"."status" = 'open';
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE TRIGGER "subscriptions_usage_period_insert" AFTER INSERT ON "billing"."subscriptions"
  FOR EACH ROW WHEN (NEW."current") EXECUTE FUNCTION "billing"."note_usage_period"();
--> statement-breakpoint
CREATE TRIGGER "subscriptions_usage_period_update" AFTER UPDATE ON "billing"."subscriptions"
  FOR EACH ROW WHEN (NEW."current" AND (
    OLD."current" IS DISTINCT FROM NEW."current"
    OR OLD."current_period_start" IS DISTINCT FROM NEW."current_period_start"
    OR OLD."current_period_end" IS DISTINCT FROM NEW."current_period_end"
    OR OLD."tier" IS DISTINCT FROM NEW."tier"
    OR OLD."customer_id" IS DISTINCT FROM NEW."customer_id"))
  EXECUTE FUNCTION "billing"."note_usage_period"();
--> statement-breakpoint
-- the periods open now, for subscriptions made before this migration
INSERT INTO "billing"."usage_periods" ("platform_id", "period_start", "period_end", "subscription_id", "customer_id", "tier")
SELECT "platform_id", "current_period_start", "current_period_end", "id", "customer_id", "tier" FROM "billing"."subscriptions" WHERE "current"
ON CONFLICT DO NOTHING;
--> statement-breakpoint
-- rollups are updated in place by every batch: room on each page keeps those updates HOT (no new
-- index entries), so a busy platform's rows do not bloat their indexes
ALTER TABLE "billing"."usage_daily" SET (fillfactor = 70);
--> statement-breakpoint
ALTER TABLE "billing"."usage_days" SET (fillfactor = 70);
--> statement-breakpoint
ALTER TABLE "billing"."usage_totals" SET (fillfactor = 70);
