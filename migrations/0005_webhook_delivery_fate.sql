ALTER TABLE `webhook_attempts` ADD `outcome` text;--> statement-breakpoint
ALTER TABLE `webhook_deliveries` ADD `body` text;--> statement-breakpoint
ALTER TABLE `webhook_deliveries` ADD `body_key` text;--> statement-breakpoint
ALTER TABLE `webhook_deliveries` ADD `sealed_secret` text;--> statement-breakpoint
ALTER TABLE `webhook_deliveries` ADD `body_purged_at` integer;--> statement-breakpoint
ALTER TABLE `webhook_deliveries` ADD `resent_from` text;--> statement-breakpoint
CREATE INDEX `webhook_deliveries_pending` ON `webhook_deliveries` (`status`,`updated_at`);--> statement-breakpoint
CREATE INDEX `webhook_deliveries_created` ON `webhook_deliveries` (`created_at`);--> statement-breakpoint
-- Hand-written (drizzle-kit does not generate triggers): recording an attempt is one INSERT; this
-- copies its outcome onto the delivery, and settles it only while it is still pending.
CREATE TRIGGER `webhook_attempt_settles` AFTER INSERT ON `webhook_attempts` BEGIN
  UPDATE `webhook_deliveries` SET
    `last_status_code` = NEW.`status_code`,
    `last_error` = NEW.`error`,
    `updated_at` = NEW.`at`,
    `completed_at` = CASE WHEN `status` = 'pending' AND NEW.`outcome` IN ('delivered', 'failed') THEN NEW.`at` ELSE `completed_at` END,
    `status` = CASE WHEN `status` = 'pending' AND NEW.`outcome` IN ('delivered', 'failed') THEN NEW.`outcome` ELSE `status` END
  WHERE `id` = NEW.`delivery_id`;
END;
