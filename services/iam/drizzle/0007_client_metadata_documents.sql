CREATE TABLE "iam"."client_metadata_documents" (
	"client_id" text PRIMARY KEY NOT NULL,
	"fetched_at" timestamp (3) with time zone NOT NULL,
	"refresh_at" timestamp (3) with time zone NOT NULL,
	"expires_at" timestamp (3) with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "iam"."client_metadata_documents" ADD CONSTRAINT "client_metadata_documents_client_id_oauth_client_client_id_fk" FOREIGN KEY ("client_id") REFERENCES "iam"."oauth_client"("client_id") ON DELETE cascade ON UPDATE no action;