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
CREATE INDEX `domains_certificates` ON `domains` (`certificate_checked_at`) WHERE "domains"."certificate_status" = 'pending';