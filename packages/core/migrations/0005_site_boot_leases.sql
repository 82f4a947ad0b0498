CREATE TABLE "site_boot_leases" (
	"site_id" text PRIMARY KEY NOT NULL,
	"holder_node_id" text NOT NULL,
	"session_id" text NOT NULL,
	"acquired_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "site_boot_leases" ADD CONSTRAINT "site_boot_leases_site_id_sites_id_fk" FOREIGN KEY ("site_id") REFERENCES "public"."sites"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "site_boot_leases" ADD CONSTRAINT "site_boot_leases_holder_node_id_nodes_id_fk" FOREIGN KEY ("holder_node_id") REFERENCES "public"."nodes"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "site_boot_leases" ADD CONSTRAINT "site_boot_leases_session_id_agent_sessions_id_fk" FOREIGN KEY ("session_id") REFERENCES "public"."agent_sessions"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "site_boot_leases_session_idx" ON "site_boot_leases" USING btree ("session_id");