CREATE TABLE "iam"."org_policies" (
	"org_id" text PRIMARY KEY NOT NULL,
	"require_two_factor" boolean DEFAULT false NOT NULL,
	"require_sso" boolean DEFAULT false NOT NULL,
	"updated_at" timestamp (3) with time zone NOT NULL,
	"updated_by" text
);
--> statement-breakpoint
CREATE TABLE "iam"."totp_steps" (
	"user_id" text PRIMARY KEY NOT NULL,
	"last_step" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "iam"."two_factor" (
	"id" text PRIMARY KEY NOT NULL,
	"secret" text NOT NULL,
	"backup_codes" text NOT NULL,
	"user_id" text NOT NULL,
	"verified" boolean DEFAULT true,
	"failed_verification_count" integer DEFAULT 0,
	"locked_until" timestamp (3) with time zone
);
--> statement-breakpoint
ALTER TABLE "iam"."session" ADD COLUMN "sign_in_method" text;--> statement-breakpoint
ALTER TABLE "iam"."session" ADD COLUMN "sso_provider_id" text;--> statement-breakpoint
ALTER TABLE "iam"."user" ADD COLUMN "two_factor_enabled" boolean DEFAULT false;--> statement-breakpoint
ALTER TABLE "iam"."org_policies" ADD CONSTRAINT "org_policies_org_id_organization_id_fk" FOREIGN KEY ("org_id") REFERENCES "iam"."organization"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "iam"."totp_steps" ADD CONSTRAINT "totp_steps_user_id_user_id_fk" FOREIGN KEY ("user_id") REFERENCES "iam"."user"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "iam"."two_factor" ADD CONSTRAINT "two_factor_user_id_user_id_fk" FOREIGN KEY ("user_id") REFERENCES "iam"."user"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "two_factor_user_id_idx" ON "iam"."two_factor" USING btree ("user_id");--> statement-breakpoint
CREATE INDEX "two_factor_secret_idx" ON "iam"."two_factor" USING btree ("secret");