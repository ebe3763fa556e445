ALTER TABLE `async_runs` ADD `mode` text DEFAULT 'async' NOT NULL;--> statement-breakpoint
ALTER TABLE `async_runs` ADD `handed_over_at` integer;--> statement-breakpoint
ALTER TABLE `async_runs` ADD `deadline_at` integer;--> statement-breakpoint
ALTER TABLE `async_runs` ADD `followed` integer DEFAULT false NOT NULL;