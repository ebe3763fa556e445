import { log } from "../platform/log";
import type { Scope } from "../platform/scope";
import { laneObject, receiverLaneName } from "./message";
import { type ReceiverSettings, updateReceiverSettings } from "./receiver-settings";

/**
 * Sets a receiver's concurrency: written in D1 (the control plane), then told to the receiver's lane,
 * which keeps its own copy (no D1 read per delivery) and passes each shard its share. A lane that could
 * not be told reads the setting again within SETTINGS_TTL_MS (lane.ts): the change is on record either way.
 */
export async function setReceiverConcurrency(
  scope: Scope,
  projectId: string,
  origin: string,
  concurrency: number,
): Promise<ReceiverSettings> {
  const settings = await updateReceiverSettings(scope.db, projectId, origin, { concurrency }, scope.deps.now());
  try {
    await laneObject(scope.env, receiverLaneName(projectId, origin)).configure({
      projectId,
      origin,
      concurrency: settings.concurrency,
      state: settings.state,
    });
  } catch (error) {
    log("warn", "webhook receiver's lane not told of its new settings: it reads them within a minute", {
      project_id: projectId,
      origin,
      error,
    });
  }
  return settings;
}
