ALTER TABLE "work_items" ADD COLUMN "park_on" jsonb;--> statement-breakpoint
ALTER TABLE "work_items" ADD COLUMN "park_every_ms" integer;--> statement-breakpoint
ALTER TABLE "work_items" ADD COLUMN "park_until" timestamp with time zone;