CREATE TABLE `domain_releases` (
	`hostname` text NOT NULL,
	`project_id` text NOT NULL,
	`released_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `domain_releases_hostname` ON `domain_releases` (`hostname`,`released_at`);--> statement-breakpoint
DROP INDEX `domains_hostname`;--> statement-breakpoint
DROP INDEX `domains_project`;--> statement-breakpoint
-- Hand-written (not drizzle-kit): SQLite cannot add a NOT NULL column without a default to a table with
-- rows, so the column starts as '' and every existing claim then gets its own random ownership value.
ALTER TABLE `domains` ADD `ownership_value` text NOT NULL DEFAULT '';--> statement-breakpoint
UPDATE `domains` SET `ownership_value` = 'gw-' || lower(hex(randomblob(16))) WHERE `ownership_value` = '';--> statement-breakpoint
CREATE UNIQUE INDEX `domains_hostname_holder` ON `domains` (`hostname`) WHERE "domains"."status" = 'validated';--> statement-breakpoint
CREATE INDEX `domains_unvalidated` ON `domains` (`auto_validation_ends_at`) WHERE "domains"."status" <> 'validated';--> statement-breakpoint
CREATE INDEX `domains_hostname` ON `domains` (`hostname`);--> statement-breakpoint
CREATE UNIQUE INDEX `domains_project` ON `domains` (`project_id`,`hostname`);