ALTER TABLE `webhook_deliveries` ADD `app_name` text;--> statement-breakpoint
CREATE INDEX `webhook_deliveries_project_created` ON `webhook_deliveries` (`project_id`,`created_at`);--> statement-breakpoint
-- Hand-written: the runs list (`GET /v2/projects/{id}/runs`) now needs `usage:read`; a token that could
-- list the project's runs before (it needed `runs:invoke`) keeps that ability.
UPDATE `service_accounts` SET `scopes` = json_insert(`scopes`, '$[#]', 'usage:read') WHERE `scopes` LIKE '%"runs:invoke"%' AND `scopes` NOT LIKE '%"usage:read"%';
