import type { Scope } from "../platform/scope";
import { changeReceiverSettings, type ReceiverSettings } from "./receiver-settings";

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
  return (await changeReceiverSettings(scope, projectId, origin, { concurrency })).settings;
}
