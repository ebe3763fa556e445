CREATE TABLE `project_invites` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`email` text NOT NULL,
	`role` text NOT NULL,
	`created_at` integer NOT NULL,
	`expires_at` integer NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade,
	CONSTRAINT "project_invites_role" CHECK("project_invites"."role" in ('owner', 'developer', 'viewer'))
);
--> statement-breakpoint
CREATE UNIQUE INDEX `project_invites_project_email` ON `project_invites` (`project_id`,`email`);--> statement-breakpoint
CREATE INDEX `project_invites_email` ON `project_invites` (`email`);--> statement-breakpoint
CREATE TABLE `project_members` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`user_id` text NOT NULL,
	`role` text NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade,
	CONSTRAINT "project_members_role" CHECK("project_members"."role" in ('owner', 'developer', 'viewer'))
);
--> statement-breakpoint
CREATE UNIQUE INDEX `project_members_project_user` ON `project_members` (`project_id`,`user_id`);--> statement-breakpoint
CREATE INDEX `project_members_user` ON `project_members` (`user_id`,`project_id`);--> statement-breakpoint
CREATE TABLE `sign_in_requests` (
	`handle_hash` text PRIMARY KEY NOT NULL,
	`state` text NOT NULL,
	`nonce` text NOT NULL,
	`code_verifier` text NOT NULL,
	`next` text NOT NULL,
	`expires_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `sign_in_requests_expiry` ON `sign_in_requests` (`expires_at`);--> statement-breakpoint
CREATE TABLE `users` (
	`id` text PRIMARY KEY NOT NULL,
	`issuer` text NOT NULL,
	`subject` text NOT NULL,
	`email` text,
	`email_verified` integer NOT NULL,
	`name` text,
	`created_at` integer NOT NULL,
	`last_sign_in_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `users_identity` ON `users` (`issuer`,`subject`);--> statement-breakpoint
ALTER TABLE `dashboard_sessions` ADD `user_id` text;