-- Runs accepted before this column stored their body as its own UTF-8 text (a binary body was
-- refused then): the default 'utf8' is exactly what they hold.
ALTER TABLE `async_runs` ADD `request_body_encoding` text DEFAULT 'utf8' NOT NULL;
