DROP INDEX `async_runs_idempotency`;--> statement-breakpoint
ALTER TABLE `async_runs` ADD `caller` text DEFAULT '' NOT NULL;--> statement-breakpoint
CREATE UNIQUE INDEX `async_runs_idempotency` ON `async_runs` (`project_id`,`caller`,`idempotency_key`) WHERE "async_runs"."idempotency_key" is not null;--> statement-breakpoint
ALTER TABLE `service_accounts` ADD `created_by_kind` text DEFAULT 'admin' NOT NULL;--> statement-breakpoint
ALTER TABLE `service_accounts` ADD `created_by_id` text;--> statement-breakpoint
CREATE INDEX `service_accounts_creator` ON `service_accounts` (`project_id`,`created_by_id`);--> statement-breakpoint
ALTER TABLE `webhook_deliveries` ADD `message_id` text;--> statement-breakpoint
-- Hand-written backfill. Existing deliveries were sent with their own id as `webhook-id`, resends
-- included, so that is their message id. Existing tokens took `created_by_kind` = 'admin' from the
-- column's default: no creator was recorded for them, so no member's removal can end them (revoke
-- them by hand if in doubt; docs/access.md). Existing async runs keep caller '' (made before callers
-- were recorded).
UPDATE `webhook_deliveries` SET `message_id` = `id` WHERE `message_id` IS NULL;
