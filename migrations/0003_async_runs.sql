CREATE TABLE `async_runs` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`app_name` text NOT NULL,
	`status` text NOT NULL,
	`method` text NOT NULL,
	`target` text NOT NULL,
	`request_headers` text NOT NULL,
	`request_body` text,
	`request_in_r2` integer DEFAULT false NOT NULL,
	`request_id` text NOT NULL,
	`idempotency_key` text,
	`request_hash` text NOT NULL,
	`webhook_endpoint` text,
	`webhook_secret` text,
	`delivery_id` text,
	`claimed_by` text,
	`result_status` integer,
	`result_type` text,
	`result_bytes` integer,
	`result` text,
	`result_in_r2` integer DEFAULT false NOT NULL,
	`error_code` text,
	`error_message` text,
	`created_at` integer NOT NULL,
	`started_at` integer,
	`finished_at` integer,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade,
	CONSTRAINT "async_runs_status" CHECK("async_runs"."status" in ('queued', 'running', 'succeeded', 'failed', 'cancelled'))
);
--> statement-breakpoint
CREATE INDEX `async_runs_project` ON `async_runs` (`project_id`,`id`);--> statement-breakpoint
CREATE UNIQUE INDEX `async_runs_idempotency` ON `async_runs` (`project_id`,`idempotency_key`) WHERE "async_runs"."idempotency_key" is not null;--> statement-breakpoint
CREATE INDEX `async_runs_open` ON `async_runs` (`status`,`created_at`) WHERE "async_runs"."status" in ('queued', 'running');--> statement-breakpoint
CREATE INDEX `async_runs_finished` ON `async_runs` (`finished_at`) WHERE "async_runs"."finished_at" is not null;--> statement-breakpoint
CREATE INDEX `async_runs_undelivered` ON `async_runs` (`finished_at`) WHERE "async_runs"."webhook_endpoint" is not null and "async_runs"."delivery_id" is null and "async_runs"."status" in ('succeeded', 'failed');