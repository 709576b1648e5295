-- Issue 35, the security invariants (docs/vault/cross-cutting/security.md): CLI logins record the
-- session that approved them and its strength; a pending invitation is unique per organization and
-- address, and a membership per organization and person; every API key names the organization it
-- acts in.
ALTER TABLE "iam"."device_codes" ADD COLUMN "approved_by_session_id" text;--> statement-breakpoint
ALTER TABLE "iam"."device_codes" ADD COLUMN "approved_sign_in_method" text;--> statement-breakpoint
ALTER TABLE "iam"."device_codes" ADD COLUMN "approved_sso_provider_id" text;--> statement-breakpoint
ALTER TABLE "iam"."refresh_tokens" ADD COLUMN "made_by_session_id" text;--> statement-breakpoint
ALTER TABLE "iam"."refresh_tokens" ADD COLUMN "sign_in_method" text;--> statement-breakpoint
ALTER TABLE "iam"."refresh_tokens" ADD COLUMN "sso_provider_id" text;--> statement-breakpoint
-- One pending invitation per organization and address (docs/vault/services/iam.md#Invitations): the
-- unique index below holds it for IAM's route and the auth library's invite-member alike, where a
-- check before the insert let concurrent invitations of one address all through. A database that
-- race already reached holds such duplicates, and they would stop the index being built. So first,
-- of each organization's pending invitations of one address (in any letter case), the one that lasts
-- longest (the latest expiry, then the newest) stays pending and the others are canceled, as a
-- revoked invitation is: the invitee was mailed each of them and can still accept the one kept, and
-- the link of a canceled one says it was withdrawn. Nothing else changes; a lapsed invitation that
-- is alone stays pending until its address is invited again (the invitation is then marked expired).
UPDATE "iam"."invitation" SET "status" = 'canceled'
WHERE "id" IN (
  SELECT "id" FROM (
    SELECT "id", row_number() OVER (PARTITION BY "organization_id", lower("email") ORDER BY "expires_at" DESC, "created_at" DESC, "id" DESC) AS "place"
    FROM "iam"."invitation"
    WHERE "status" = 'pending'
  ) AS "ranked"
  WHERE "place" > 1
);--> statement-breakpoint
CREATE UNIQUE INDEX "invitation_pending_unique" ON "iam"."invitation" USING btree ("organization_id",lower("email")) WHERE "iam"."invitation"."status" = 'pending';--> statement-breakpoint
-- One membership per organization and person (routes/auth-library.ts): accepting an invitation to
-- an organization the person had joined meanwhile (its single sign-on provisions members) made a
-- second. Of such pairs the oldest membership stays, the role it gave the person first; the others
-- go, and with them nothing else (grants and overrides belong to the person and the organization,
-- not to a membership row).
DELETE FROM "iam"."member" WHERE "id" IN (
  SELECT "id" FROM (
    SELECT "id", row_number() OVER (PARTITION BY "organization_id", "user_id" ORDER BY "created_at", "id") AS "place"
    FROM "iam"."member"
  ) AS "ranked"
  WHERE "place" > 1
);--> statement-breakpoint
CREATE UNIQUE INDEX "member_organization_user_unique" ON "iam"."member" USING btree ("organization_id","user_id");--> statement-breakpoint
CREATE INDEX "refresh_tokens_made_by_session_idx" ON "iam"."refresh_tokens" USING btree ("made_by_session_id");
--> statement-breakpoint
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
