CREATE TABLE "iam"."org_setups" (
	"org_id" text PRIMARY KEY NOT NULL,
	"started_at" timestamp (3) with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "iam"."org_setups" ADD CONSTRAINT "org_setups_org_id_organization_id_fk" FOREIGN KEY ("org_id") REFERENCES "iam"."organization"("id") ON DELETE cascade ON UPDATE no action;