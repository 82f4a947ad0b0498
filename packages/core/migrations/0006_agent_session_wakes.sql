CREATE TABLE "agent_session_wakes" (
	"kind" text PRIMARY KEY NOT NULL,
	"shards" integer NOT NULL
);
