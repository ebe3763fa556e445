import { DurableObject } from "cloudflare:workers";
import type { Deps } from "../platform/deps";
import { createScope, type Scope } from "../platform/scope";
import { type OnFinished, runSlice, SLICES_PER_ALARM, type TaskStart } from "./receiver-tasks";

/**
 * The Durable Object class of the receiver tasks (one per task, `receiverTaskObject`), built from the
 * Worker's `deps` as the lanes are. Its storage holds only the task's id; its alarm runs the slices.
 */
export function webhookReceiverTaskClass(deps: Deps, onFinished?: (scope: Scope) => OnFinished) {
  return class WebhookReceiverTask extends DurableObject<Env> {
    async start(taskId: string, start: TaskStart = {}): Promise<void> {
      await this.ctx.storage.put({ task: taskId, startedAt: Date.now(), statePushed: start.statePushed === true });
      await this.ctx.storage.setAlarm(Date.now());
    }

    override async alarm(): Promise<void> {
      const taskId = await this.ctx.storage.get<string>("task");
      if (!taskId) return;
      const scope = createScope(this.env, this.ctx, deps);
      const startedAt = await this.ctx.storage.get<number>("startedAt");
      // A task started before `statePushed` was stored has none: its release waits as for a failed push.
      const statePushed = await this.ctx.storage.get<boolean>("statePushed");
      const options = { onFinished: onFinished?.(scope), startedAt, statePushed };
      for (let i = 0; i < SLICES_PER_ALARM; i++) {
        const next = await runSlice(scope, taskId, options);
        if (next === null) return;
        if (next > 0 || i === SLICES_PER_ALARM - 1) {
          await this.ctx.storage.setAlarm(Date.now() + next);
          return;
        }
      }
    }
  };
}
