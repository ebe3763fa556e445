import { productionDeps } from "./deps";
import { runKeeperClass } from "./runs/wait/keeper";
import { webhookLaneClass } from "./webhooks/lane";
import { receiverTaskFinished } from "./webhooks/alerts";
import { webhookReceiverTaskClass } from "./webhooks/receiver-task-object";
import { deliveryLogClass } from "./webhooks/log-object";
import { usageOutcomes } from "./usage/record";
import { createWorker } from "./worker";

export default createWorker(productionDeps);

/** The webhook delivery lanes (Durable Objects, wrangler.toml `WEBHOOK_LANES`), built from the same deps. */
export const WebhookLane = webhookLaneClass(productionDeps);
export type WebhookLane = InstanceType<typeof WebhookLane>;

/** The usage ledgers (Durable Objects, wrangler.toml `USAGE_LEDGER`): one per project. */
export { UsageLedger } from "./usage/ledger-object";

/**
 * The run keepers (Durable Objects, wrangler.toml `RUN_KEEPER`): one per project and shard of run ids,
 * the owner of the app calls of the waited runs it takes; each run's outcome goes to usage's port.
 */
export const RunKeeper = runKeeperClass(productionDeps, usageOutcomes);
export type RunKeeper = InstanceType<typeof RunKeeper>;

/** The followers of a run's status stream (Durable Objects, wrangler.toml `RUN_FOLLOWERS`): one per followed run. */
export { RunFollowers } from "./runs/async/followers-object";

/** The receiver tasks (Durable Objects, wrangler.toml `WEBHOOK_RECEIVER_TASKS`): one per recovery or release, its slices run by its alarm. */
export const WebhookReceiverTask = webhookReceiverTaskClass(productionDeps, receiverTaskFinished);
export type WebhookReceiverTask = InstanceType<typeof WebhookReceiverTask>;

/** The delivery logs (Durable Objects, wrangler.toml `DELIVERY_LOG`): one per project and shard of delivery ids, its retention run by its alarm. */
export const DeliveryLog = deliveryLogClass(productionDeps);
export type DeliveryLog = InstanceType<typeof DeliveryLog>;
