DROP INDEX "metal_machines_bmc_uq";--> statement-breakpoint
ALTER TABLE "metal_machines" ADD COLUMN "retired_at" timestamp with time zone;--> statement-breakpoint
UPDATE "metal_machines" AS m SET "retired_at" = n."updated_at" FROM "nodes" AS n WHERE n."id" = m."node_id" AND n."provision_state" = 'retired';--> statement-breakpoint
CREATE UNIQUE INDEX "metal_machines_bmc_uq" ON "metal_machines" USING btree ("site_id","bmc_address") WHERE retired_at IS NULL;
