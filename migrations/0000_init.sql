CREATE TABLE `apps` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`name` text NOT NULL,
	`region` text NOT NULL,
	`runtime` text NOT NULL,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade,
	CONSTRAINT "apps_runtime" CHECK("apps"."runtime" in ('cortex', 'custom'))
);
--> statement-breakpoint
CREATE UNIQUE INDEX `apps_project_name` ON `apps` (`project_id`,`name`);--> statement-breakpoint
CREATE TABLE `builds` (
	`id` text PRIMARY KEY NOT NULL,
	`app_id` text NOT NULL,
	`project_id` text NOT NULL,
	`status` text NOT NULL,
	`origin_url` text,
	`error` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`started_at` integer,
	`finished_at` integer,
	`cancelled_at` integer,
	FOREIGN KEY (`app_id`) REFERENCES `apps`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade,
	CONSTRAINT "builds_status" CHECK("builds"."status" in ('queued', 'building', 'succeeded', 'failed', 'cancelled')),
	CONSTRAINT "builds_origin_url" CHECK("builds"."status" <> 'succeeded' or "builds"."origin_url" is not null)
);
--> statement-breakpoint
CREATE INDEX `builds_app` ON `builds` (`app_id`,`id`);--> statement-breakpoint
CREATE INDEX `builds_app_succeeded` ON `builds` (`app_id`,`finished_at`) WHERE "builds"."status" = 'succeeded';--> statement-breakpoint
CREATE TABLE `projects` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `service_accounts` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`name` text NOT NULL,
	`token_hash` text NOT NULL,
	`token_prefix` text NOT NULL,
	`expires_at` integer NOT NULL,
	`last_used_at` integer,
	`revoked_at` integer,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `service_accounts_token_hash` ON `service_accounts` (`token_hash`);--> statement-breakpoint
CREATE INDEX `service_accounts_project` ON `service_accounts` (`project_id`,`id`);