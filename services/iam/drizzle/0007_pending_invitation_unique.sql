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
CREATE UNIQUE INDEX "invitation_pending_unique" ON "iam"."invitation" USING btree ("organization_id",lower("email")) WHERE "iam"."invitation"."status" = 'pending';
