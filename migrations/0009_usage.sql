ALTER TABLE `webhook_deliveries` ADD `app_name` text;--> statement-breakpoint
CREATE INDEX `webhook_deliveries_project_created` ON `webhook_deliveries` (`project_id`,`created_at`);