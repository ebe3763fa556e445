CREATE TABLE `dashboard_sessions` (
	`id_hash` text PRIMARY KEY NOT NULL,
	`expires_at` integer NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `dashboard_sessions_expiry` ON `dashboard_sessions` (`expires_at`);--> statement-breakpoint
CREATE TABLE `domains` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`hostname` text NOT NULL,
	`region` text NOT NULL,
	`apex` integer NOT NULL,
	`status` text NOT NULL,
	`last_error_code` text,
	`last_error_message` text,
	`last_checked_at` integer,
	`next_check_at` integer NOT NULL,
	`auto_validation_ends_at` integer NOT NULL,
	`validated_at` integer,
	`certificate_status` text NOT NULL,
	`certificate_ref` text,
	`certificate_checked_at` integer,
	`challenge_path` text,
	`challenge_body` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade,
	CONSTRAINT "domains_status" CHECK("domains"."status" in ('pending', 'validated', 'failed')),
	CONSTRAINT "domains_certificate_status" CHECK("domains"."certificate_status" in ('none', 'pending', 'active', 'failed'))
);
--> statement-breakpoint
CREATE UNIQUE INDEX `domains_hostname` ON `domains` (`hostname`);--> statement-breakpoint
CREATE INDEX `domains_project` ON `domains` (`project_id`,`hostname`);--> statement-breakpoint
CREATE INDEX `domains_due` ON `domains` (`next_check_at`) WHERE "domains"."status" = 'pending';--> statement-breakpoint
CREATE INDEX `domains_certificates` ON `domains` (`certificate_checked_at`) WHERE "domains"."certificate_status" = 'pending';--> statement-breakpoint
CREATE TABLE `sign_in_attempts` (
	`ip` text PRIMARY KEY NOT NULL,
	`attempts` integer NOT NULL,
	`window_started_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `sign_in_attempts_window` ON `sign_in_attempts` (`window_started_at`);--> statement-breakpoint
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