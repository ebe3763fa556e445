import { createApp } from "./app";
import type { Env } from "./platform/env";
import { queue } from "./queue";
import { scheduled } from "./scheduled";

const app = createApp();

export default {
  fetch: app.fetch,
  queue,
  scheduled,
} satisfies ExportedHandler<Env>;
