import { createApp } from "./app";
import { defaultDeps } from "./platform/context";
import type { Env } from "./platform/env";
import { createQueue } from "./queue";
import { createScheduled } from "./scheduled";

const app = createApp(defaultDeps);

export default {
  fetch: app.fetch,
  queue: createQueue(defaultDeps),
  scheduled: createScheduled(defaultDeps),
} satisfies ExportedHandler<Env>;
