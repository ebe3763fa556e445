CREATE TABLE `audit_log` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`actor_kind` text NOT NULL,
	`actor_id` text NOT NULL,
	`actor_name` text,
	`action` text NOT NULL,
	`target_type` text NOT NULL,
	`target_id` text NOT NULL,
	`details` text,
	`client_ip` text,
	`request_id` text NOT NULL,
	`at` integer NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade,
	CONSTRAINT "audit_log_actor_kind" CHECK("audit_log"."actor_kind" in ('operator', 'service_account', 'user'))
);
--> statement-breakpoint
CREATE INDEX `audit_log_project` ON `audit_log` (`project_id`,`id`);--> statement-breakpoint
CREATE INDEX `audit_log_actor` ON `audit_log` (`project_id`,`actor_id`,`id`);--> statement-breakpoint
CREATE INDEX `audit_log_action` ON `audit_log` (`project_id`,`action`,`id`);--> statement-breakpoint
ALTER TABLE `service_accounts` ADD `scopes` text DEFAULT '[]' NOT NULL;--> statement-breakpoint
-- Hand-written backfill: tokens created before scopes existed keep working with the default scopes
-- (auth/permissions.ts DEFAULT_PERMISSIONS as of this migration: all but service_accounts:write).
UPDATE `service_accounts` SET `scopes` = '["runs:invoke","builds:read","builds:write","domains:read","domains:write","deliveries:read","deliveries:write","audit:read"]' WHERE `scopes` = '[]';
