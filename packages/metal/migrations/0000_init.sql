CREATE TABLE "metal_boot_leases" (
	"site_id" text PRIMARY KEY NOT NULL,
	"holder_node_id" text NOT NULL,
	"session_id" text NOT NULL,
	"acquired_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "metal_machines" (
	"node_id" text PRIMARY KEY NOT NULL,
	"tenant_id" text NOT NULL,
	"site_id" text NOT NULL,
	"pool" text,
	"phase" text,
	"enrolling" boolean DEFAULT false NOT NULL,
	"hold_after" text,
	"workflow_id" text,
	"last_error" jsonb,
	"deploy_request" jsonb,
	"bmc_address" text NOT NULL,
	"bmc_driver" text NOT NULL,
	"bmc_credential_ref" jsonb,
	"addresses" text[] DEFAULT '{}'::text[] NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "metal_macs" (
	"mac" text PRIMARY KEY NOT NULL,
	"node_id" text NOT NULL
);
--> statement-breakpoint
CREATE INDEX "metal_machines_tenant_idx" ON "metal_machines" USING btree ("tenant_id","created_at");--> statement-breakpoint
CREATE INDEX "metal_machines_site_idx" ON "metal_machines" USING btree ("site_id");--> statement-breakpoint
CREATE UNIQUE INDEX "metal_machines_bmc_uq" ON "metal_machines" USING btree ("site_id","bmc_address");--> statement-breakpoint
CREATE INDEX "metal_macs_node_idx" ON "metal_macs" USING btree ("node_id");