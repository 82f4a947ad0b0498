CREATE TABLE "profiles" (
	"tenant_id" text NOT NULL,
	"id" text NOT NULL,
	"version" integer NOT NULL,
	"public" boolean DEFAULT false NOT NULL,
	"document" jsonb NOT NULL,
	"used_at" timestamp with time zone,
	"created_at" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone NOT NULL,
	CONSTRAINT "profiles_tenant_id_id_version_pk" PRIMARY KEY("tenant_id","id","version")
);
--> statement-breakpoint
CREATE TABLE "workflow_steps" (
	"workflow_id" text NOT NULL,
	"step_id" text NOT NULL,
	"position" integer NOT NULL,
	"phase" text NOT NULL,
	"parent_step_id" text,
	"action" text NOT NULL,
	"resolution" text NOT NULL,
	"runs_on" text NOT NULL,
	"spec" jsonb NOT NULL,
	"timeout_ms" integer NOT NULL,
	"retries" integer NOT NULL,
	"on_failure" text NOT NULL,
	"await" text,
	"command_kind" text,
	"state" text NOT NULL,
	"attempt" integer DEFAULT 0 NOT NULL,
	"attempt_base" integer DEFAULT 0 NOT NULL,
	"command_id" text,
	"deadline" timestamp with time zone,
	"started_at" timestamp with time zone,
	"first_started_at" timestamp with time zone,
	"finished_at" timestamp with time zone,
	"result" jsonb,
	"error" jsonb,
	"rejoin" jsonb,
	"updated_at" timestamp with time zone NOT NULL,
	CONSTRAINT "workflow_steps_workflow_id_step_id_pk" PRIMARY KEY("workflow_id","step_id")
);
--> statement-breakpoint
CREATE TABLE "workflows" (
	"id" text PRIMARY KEY NOT NULL,
	"tenant_id" text NOT NULL,
	"node_id" text,
	"instance_id" text,
	"key" text NOT NULL,
	"profile_id" text NOT NULL,
	"profile_version" integer NOT NULL,
	"profile_tenant_id" text NOT NULL,
	"document" jsonb NOT NULL,
	"state" text NOT NULL,
	"error" jsonb,
	"owner" text,
	"command_kinds" jsonb NOT NULL,
	"batch_id" text,
	"cancel_reason" text,
	"created_at" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone NOT NULL,
	"started_at" timestamp with time zone,
	"finished_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "workflow_steps" ADD CONSTRAINT "workflow_steps_workflow_id_workflows_id_fk" FOREIGN KEY ("workflow_id") REFERENCES "public"."workflows"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "workflow_steps_order_idx" ON "workflow_steps" USING btree ("workflow_id","position");--> statement-breakpoint
CREATE INDEX "workflow_steps_action_idx" ON "workflow_steps" USING btree ("workflow_id","action","state");--> statement-breakpoint
CREATE UNIQUE INDEX "workflows_active_node_uq" ON "workflows" USING btree ("node_id") WHERE state IN ('pending', 'running', 'paused', 'failing', 'cancelling');--> statement-breakpoint
CREATE UNIQUE INDEX "workflows_active_instance_uq" ON "workflows" USING btree ("instance_id") WHERE state IN ('pending', 'running', 'paused', 'failing', 'cancelling');--> statement-breakpoint
CREATE INDEX "workflows_key_idx" ON "workflows" USING btree ("key","state");--> statement-breakpoint
CREATE INDEX "workflows_node_idx" ON "workflows" USING btree ("tenant_id","node_id","created_at");--> statement-breakpoint
CREATE INDEX "workflows_state_idx" ON "workflows" USING btree ("state","updated_at");