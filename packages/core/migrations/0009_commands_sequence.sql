ALTER TABLE "commands" ADD COLUMN "wake_on" text;--> statement-breakpoint
ALTER TABLE "commands" ADD COLUMN "after_key" text;--> statement-breakpoint
CREATE INDEX "commands_after_idx" ON "commands" USING btree ("node_id","after_key") WHERE after_key IS NOT NULL;