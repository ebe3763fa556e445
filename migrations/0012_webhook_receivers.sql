CREATE TABLE `webhook_receivers` (
	`project_id` text NOT NULL,
	`origin` text NOT NULL,
	`concurrency` integer DEFAULT 6 NOT NULL,
	`state` text DEFAULT 'active' NOT NULL,
	`state_cause` text,
	`state_changed_at` integer,
	`updated_at` integer NOT NULL,
	PRIMARY KEY(`project_id`, `origin`),
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade,
	CONSTRAINT "webhook_receivers_state" CHECK("webhook_receivers"."state" in ('active', 'paused', 'disabled')),
	CONSTRAINT "webhook_receivers_concurrency" CHECK("webhook_receivers"."concurrency" >= 1)
);
