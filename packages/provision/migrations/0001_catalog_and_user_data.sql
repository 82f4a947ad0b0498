CREATE TABLE "images" (
	"id" text PRIMARY KEY NOT NULL,
	"tenant_id" text NOT NULL,
	"name" text NOT NULL,
	"version" text NOT NULL,
	"digest" text NOT NULL,
	"url" text,
	"public" boolean DEFAULT false NOT NULL,
	"signer_id" text NOT NULL,
	"signature" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "userdata_renders" (
	"step_key" text PRIMARY KEY NOT NULL,
	"workflow_id" text NOT NULL,
	"tenant_id" text NOT NULL,
	"kind" text NOT NULL,
	"user_data_ref" text NOT NULL,
	"join_token_id" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX "images_tenant_name_version_uq" ON "images" USING btree ("tenant_id","name","version");--> statement-breakpoint
CREATE INDEX "images_name_version_idx" ON "images" USING btree ("name","version");