CREATE SCHEMA "stacks";
--> statement-breakpoint
CREATE TABLE "stacks"."templates" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"display_name" text NOT NULL,
	"description" text NOT NULL,
	"icon" text DEFAULT '' NOT NULL,
	"domain" text DEFAULT '' NOT NULL,
	"status" text DEFAULT 'active' NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "stacks"."versions" (
	"id" text PRIMARY KEY NOT NULL,
	"template_id" text NOT NULL,
	"version" text NOT NULL,
	"stack_definition" jsonb NOT NULL,
	"core_sdk_version" text NOT NULL,
	"status" text DEFAULT 'active' NOT NULL,
	"published_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "stacks"."versions" ADD CONSTRAINT "versions_template_id_templates_id_fk" FOREIGN KEY ("template_id") REFERENCES "stacks"."templates"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "templates_name_key" ON "stacks"."templates" USING btree ("name");--> statement-breakpoint
CREATE UNIQUE INDEX "versions_template_version_key" ON "stacks"."versions" USING btree ("template_id","version");--> statement-breakpoint
CREATE INDEX "versions_template_status_idx" ON "stacks"."versions" USING btree ("template_id","status");