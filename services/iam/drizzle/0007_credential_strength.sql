ALTER TABLE "iam"."device_codes" ADD COLUMN "approved_by_session_id" text;--> statement-breakpoint
ALTER TABLE "iam"."device_codes" ADD COLUMN "approved_sign_in_method" text;--> statement-breakpoint
ALTER TABLE "iam"."device_codes" ADD COLUMN "approved_sso_provider_id" text;--> statement-breakpoint
ALTER TABLE "iam"."refresh_tokens" ADD COLUMN "made_by_session_id" text;--> statement-breakpoint
ALTER TABLE "iam"."refresh_tokens" ADD COLUMN "sign_in_method" text;--> statement-breakpoint
ALTER TABLE "iam"."refresh_tokens" ADD COLUMN "sso_provider_id" text;--> statement-breakpoint
CREATE INDEX "refresh_tokens_made_by_session_idx" ON "iam"."refresh_tokens" USING btree ("made_by_session_id");--> statement-breakpoint
-- An API key made without an organization used to act in its owner's default one when used (the
-- operators' organization first, else the oldest), so it could start acting in an organization its
-- owner joined later, one whose policy its maker never met. Every key is now made with the
-- organization it acts in (docs/vault/cross-cutting/security.md); the keys made before are pinned to
-- the one they act in today. A key whose owner is in no organization acts in none.
UPDATE "iam"."apikey" AS k
   SET "metadata" = (
         CASE WHEN jsonb_typeof(nullif(k."metadata", '')::jsonb) = 'object' THEN nullif(k."metadata", '')::jsonb ELSE '{}'::jsonb END
         || jsonb_build_object('orgId', d.org_id)
       )::text
  FROM (
    SELECT k2."id",
           (SELECT m."organization_id" FROM "iam"."member" m JOIN "iam"."organization" o ON o."id" = m."organization_id"
             WHERE m."user_id" = k2."reference_id" ORDER BY (o."org_type" = 'core-operator') DESC, m."created_at" LIMIT 1) AS org_id
      FROM "iam"."apikey" k2
  ) AS d
 WHERE d."id" = k."id"
   AND d.org_id IS NOT NULL
   AND (k."metadata" IS NULL OR k."metadata" = '' OR jsonb_typeof(k."metadata"::jsonb) <> 'object' OR NOT (k."metadata"::jsonb ? 'orgId'));
