CREATE SCHEMA "registry";
--> statement-breakpoint
CREATE TABLE "registry"."platforms" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"slug" text NOT NULL,
	"status" text DEFAULT 'active' NOT NULL,
	"tier" text NOT NULL,
	"host_account_id" text,
	"repo_name" text,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "registry"."stacks" (
	"id" text PRIMARY KEY NOT NULL,
	"platform_id" text NOT NULL,
	"tenant_id" text NOT NULL,
	"name" text NOT NULL,
	"is_default" boolean DEFAULT false NOT NULL,
	"template_id" text,
	"repo_name" text,
	"status" text DEFAULT 'active' NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "registry"."stacks" ADD CONSTRAINT "stacks_platform_id_platforms_id_fk" FOREIGN KEY ("platform_id") REFERENCES "registry"."platforms"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "platforms_slug_key" ON "registry"."platforms" USING btree ("slug");--> statement-breakpoint
CREATE INDEX "platforms_page_idx" ON "registry"."platforms" USING btree ("created_at","id");--> statement-breakpoint
CREATE UNIQUE INDEX "stacks_one_default_per_platform" ON "registry"."stacks" USING btree ("platform_id") WHERE "registry"."stacks"."is_default";--> statement-breakpoint
CREATE UNIQUE INDEX "stacks_name_per_tenant" ON "registry"."stacks" USING btree ("platform_id","tenant_id","name");--> statement-breakpoint
CREATE INDEX "stacks_page_idx" ON "registry"."stacks" USING btree ("platform_id","created_at","id");