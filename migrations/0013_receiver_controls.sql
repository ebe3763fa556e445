CREATE TABLE `webhook_project_settings` (
	`project_id` text PRIMARY KEY NOT NULL,
	`alert_endpoint` text,
	`alert_secret` text,
	`auto_recover_hours` integer,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `webhook_receiver_tasks` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`origin` text NOT NULL,
	`kind` text NOT NULL,
	`dry_run` integer DEFAULT false NOT NULL,
	`status` text NOT NULL,
	`since` integer,
	`until` integer,
	`counted` integer DEFAULT 0 NOT NULL,
	`sent` integer DEFAULT 0 NOT NULL,
	`expired` integer DEFAULT 0 NOT NULL,
	`unsendable` integer DEFAULT 0 NOT NULL,
	`cursor_at` integer,
	`cursor_id` text,
	`created_by` text NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`finished_at` integer,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade,
	CONSTRAINT "webhook_receiver_tasks_kind" CHECK("webhook_receiver_tasks"."kind" in ('recover', 'release')),
	CONSTRAINT "webhook_receiver_tasks_status" CHECK("webhook_receiver_tasks"."status" in ('counting', 'sending', 'finished', 'cancelled'))
);
--> statement-breakpoint
CREATE INDEX `webhook_receiver_tasks_receiver` ON `webhook_receiver_tasks` (`project_id`,`origin`,`status`);--> statement-breakpoint
-- Hand-edited (drizzle-kit's rebuild would lose every attempt): the `held` status needs the status
-- CHECK changed, and SQLite changes a CHECK only by rebuilding the table. D1 runs a migration in one
-- transaction, where `PRAGMA foreign_keys=OFF` does nothing, so dropping `webhook_deliveries` while
-- `webhook_attempts` references it would delete every attempt (ON DELETE CASCADE). So both tables are
-- rebuilt: the new attempts reference the new deliveries, the old attempts go first, then the old
-- deliveries (nothing references them any more), and the renames carry the reference along (SQLite
-- >= 3.26 rewrites FOREIGN KEY clauses on RENAME). The trigger of `webhook_delivery_fate` went with
-- the old attempts table and is created again, unchanged.
CREATE TABLE `__new_webhook_deliveries` (
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
	`body` text,
	`body_key` text,
	`sealed_secret` text,
	`body_purged_at` integer,
	`resent_from` text,
	`message_id` text,
	`app_name` text,
	`task_id` text,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade,
	CONSTRAINT "webhook_deliveries_status" CHECK("status" in ('pending', 'held', 'delivered', 'failed'))
);
--> statement-breakpoint
INSERT INTO `__new_webhook_deliveries`("id", "project_id", "run_id", "endpoint", "signed", "body_bytes", "status", "attempt_count", "last_status_code", "last_error", "created_at", "updated_at", "completed_at", "body", "body_key", "sealed_secret", "body_purged_at", "resent_from", "message_id", "app_name") SELECT "id", "project_id", "run_id", "endpoint", "signed", "body_bytes", "status", "attempt_count", "last_status_code", "last_error", "created_at", "updated_at", "completed_at", "body", "body_key", "sealed_secret", "body_purged_at", "resent_from", "message_id", "app_name" FROM `webhook_deliveries`;--> statement-breakpoint
CREATE TABLE `__new_webhook_attempts` (
	`delivery_id` text NOT NULL,
	`attempt` integer NOT NULL,
	`at` integer NOT NULL,
	`status_code` integer,
	`error` text,
	`duration_ms` integer NOT NULL,
	`outcome` text,
	PRIMARY KEY(`delivery_id`, `attempt`),
	FOREIGN KEY (`delivery_id`) REFERENCES `__new_webhook_deliveries`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
INSERT INTO `__new_webhook_attempts`("delivery_id", "attempt", "at", "status_code", "error", "duration_ms", "outcome") SELECT "delivery_id", "attempt", "at", "status_code", "error", "duration_ms", "outcome" FROM `webhook_attempts`;--> statement-breakpoint
DROP TABLE `webhook_attempts`;--> statement-breakpoint
DROP TABLE `webhook_deliveries`;--> statement-breakpoint
ALTER TABLE `__new_webhook_deliveries` RENAME TO `webhook_deliveries`;--> statement-breakpoint
ALTER TABLE `__new_webhook_attempts` RENAME TO `webhook_attempts`;--> statement-breakpoint
CREATE TRIGGER `webhook_attempt_settles` AFTER INSERT ON `webhook_attempts` BEGIN
  UPDATE `webhook_deliveries` SET
    `last_status_code` = NEW.`status_code`,
    `last_error` = NEW.`error`,
    `updated_at` = NEW.`at`,
    `completed_at` = CASE WHEN `status` = 'pending' AND NEW.`outcome` IN ('delivered', 'failed') THEN NEW.`at` ELSE `completed_at` END,
    `status` = CASE WHEN `status` = 'pending' AND NEW.`outcome` IN ('delivered', 'failed') THEN NEW.`outcome` ELSE `status` END
  WHERE `id` = NEW.`delivery_id`;
END;--> statement-breakpoint
CREATE INDEX `webhook_deliveries_project` ON `webhook_deliveries` (`project_id`,`id`);--> statement-breakpoint
CREATE INDEX `webhook_deliveries_project_created` ON `webhook_deliveries` (`project_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `webhook_deliveries_run` ON `webhook_deliveries` (`project_id`,`run_id`,`id`);--> statement-breakpoint
CREATE INDEX `webhook_deliveries_pending` ON `webhook_deliveries` (`status`,`updated_at`);--> statement-breakpoint
CREATE INDEX `webhook_deliveries_created` ON `webhook_deliveries` (`created_at`);--> statement-breakpoint
CREATE INDEX `webhook_deliveries_receiver` ON `webhook_deliveries` (`project_id`,(substr(endpoint, 1, instr(endpoint, '://') + 1 + instr(substr(endpoint, instr(endpoint, '://') + 3) || '/', '/'))),`created_at`);--> statement-breakpoint
CREATE INDEX `webhook_deliveries_message` ON `webhook_deliveries` (`project_id`,`message_id`);--> statement-breakpoint
CREATE INDEX `webhook_deliveries_task` ON `webhook_deliveries` (`task_id`,`status`);