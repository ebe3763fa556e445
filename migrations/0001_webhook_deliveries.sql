CREATE TABLE `webhook_attempts` (
	`delivery_id` text NOT NULL,
	`attempt` integer NOT NULL,
	`at` integer NOT NULL,
	`status_code` integer,
	`error` text,
	`duration_ms` integer NOT NULL,
	PRIMARY KEY(`delivery_id`, `attempt`),
	FOREIGN KEY (`delivery_id`) REFERENCES `webhook_deliveries`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `webhook_deliveries` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`run_id` text NOT NULL,
	`endpoint` text NOT NULL,
	`signed` integer NOT NULL,
	`body_bytes` integer NOT NULL,
	`status` text NOT NULL,
	`attempt_count` integer DEFAULT 0 NOT NULL,
	`last_status_code` integer,
	`last_error` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`completed_at` integer,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade,
	CONSTRAINT "webhook_deliveries_status" CHECK("webhook_deliveries"."status" in ('pending', 'delivered', 'failed'))
);
--> statement-breakpoint
CREATE INDEX `webhook_deliveries_project` ON `webhook_deliveries` (`project_id`,`id`);--> statement-breakpoint
CREATE INDEX `webhook_deliveries_run` ON `webhook_deliveries` (`project_id`,`run_id`,`id`);