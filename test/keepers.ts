import { env } from "cloudflare:workers";
import { keeperName, keeperObject } from "../src/runs/keeper/shard";

/** The keeper (Durable Object) of run `runId` of `projectId`. */
export const keeperOf = (projectId: string, runId: string) => keeperObject(env, keeperName(projectId, runId));

/**
 * Waits (bounded: 10 s) until `check` gives a value: a keeper works on after its caller's answer, on
 * its own time, so what it does next is looked for rather than slept for.
 */
export async function eventually<T>(check: () => Promise<T | null | undefined | false>, what: string): Promise<T> {
  for (let i = 0; i < 400; i++) {
    const value = await check();
    if (value) return value;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`never: ${what}`);
}
