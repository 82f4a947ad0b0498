CREATE TABLE "pki_batch_approvals" (
	"batch_id" text NOT NULL,
	"approver_id" text NOT NULL,
	"signature" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	CONSTRAINT "pki_batch_approvals_batch_id_approver_id_pk" PRIMARY KEY("batch_id","approver_id")
);
--> statement-breakpoint
CREATE TABLE "pki_batches" (
	"id" text PRIMARY KEY NOT NULL,
	"tenant_id" text NOT NULL,
	"node_ids" jsonb NOT NULL,
	"command_kinds" jsonb NOT NULL,
	"not_after" timestamp with time zone NOT NULL,
	"created_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "pki_ca" (
	"id" text PRIMARY KEY NOT NULL,
	"algorithm" text NOT NULL,
	"certificate_pem" text NOT NULL,
	"sealed_key" text NOT NULL,
	"not_after" timestamp with time zone NOT NULL,
	"created_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "pki_certificates" (
	"serial" text PRIMARY KEY NOT NULL,
	"node_id" text NOT NULL,
	"tenant_id" text NOT NULL,
	"site_id" text,
	"role" text NOT NULL,
	"join_token_id" text,
	"certificate_pem" text NOT NULL,
	"not_before" timestamp with time zone NOT NULL,
	"not_after" timestamp with time zone NOT NULL,
	"revoked_at" timestamp with time zone,
	"revoked_reason" text,
	"created_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "pki_image_signers" (
	"id" text PRIMARY KEY NOT NULL,
	"tenant_id" text,
	"public" boolean DEFAULT false NOT NULL,
	"name" text NOT NULL,
	"algorithm" text NOT NULL,
	"public_key_pem" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"revoked_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "pki_join_tokens" (
	"id" text PRIMARY KEY NOT NULL,
	"tenant_id" text NOT NULL,
	"role" text NOT NULL,
	"pool_id" text,
	"site_id" text,
	"node_id" text,
	"secret_hash" text NOT NULL,
	"expect" jsonb,
	"max_uses" integer,
	"uses" integer DEFAULT 0 NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"revoked_at" timestamp with time zone,
	"last_used_at" timestamp with time zone,
	"created_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "pki_secrets" (
	"id" text PRIMARY KEY NOT NULL,
	"tenant_id" text NOT NULL,
	"sealed_value" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "pki_batch_approvals" ADD CONSTRAINT "pki_batch_approvals_batch_id_pki_batches_id_fk" FOREIGN KEY ("batch_id") REFERENCES "public"."pki_batches"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "pki_certificates_node_idx" ON "pki_certificates" USING btree ("node_id","not_after");--> statement-breakpoint
CREATE INDEX "pki_image_signers_tenant_idx" ON "pki_image_signers" USING btree ("tenant_id");--> statement-breakpoint
CREATE INDEX "pki_secrets_tenant_idx" ON "pki_secrets" USING btree ("tenant_id");