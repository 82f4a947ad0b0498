ALTER TABLE "pki_batches" ADD COLUMN "rejected_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "pki_batches" ADD COLUMN "rejected_by" text;--> statement-breakpoint
ALTER TABLE "pki_batches" ADD COLUMN "reject_reason" text;--> statement-breakpoint
CREATE INDEX "pki_batches_tenant_idx" ON "pki_batches" USING btree ("tenant_id","created_at");