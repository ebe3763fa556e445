import { productionDeps } from "./deps";
import { webhookLaneClass } from "./webhooks/lane";
import { createWorker } from "./worker";

export default createWorker(productionDeps);

/** The webhook delivery lanes (Durable Objects, wrangler.toml `WEBHOOK_LANES`), built from the same deps. */
export const WebhookLane = webhookLaneClass(productionDeps);
export type WebhookLane = InstanceType<typeof WebhookLane>;

/** The usage ledgers (Durable Objects, wrangler.toml `USAGE_LEDGER`): one per project. */
export { UsageLedger } from "./usage/ledger-object";

/** The followers of a run's status stream (Durable Objects, wrangler.toml `RUN_FOLLOWERS`): one per followed run. */
export { RunFollowers } from "./runs/async/followers-object";
