import { env } from "cloudflare:workers";
import { keeperName, keeperObject } from "../src/runs/wait/shard";
import type { AdmittedRun, AdmittedRunIn, RunKey } from "../src/runs/admitted";
import { getConfig } from "../src/platform/env";
import { sealSecret } from "../src/webhooks/secret-box";

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

/**
 * An admitted waited run of `projectId` (src/runs/admitted.ts), as the Worker hands it to its keeper:
 * a `custom` app's `GET run`, waiting 60 s, its own caller; `parts` changes any of it.
 */
export function waitedRun(
  projectId: string,
  runId: string,
  parts: Partial<Omit<AdmittedRun, "mode">> & { seconds?: number; key?: RunKey | null } = {},
): AdmittedRunIn<"wait"> {
  const { seconds = 60, key = null, ...rest } = parts;
  return {
    v: 1,
    runId,
    projectId,
    appName: "x",
    appPath: "run",
    method: "GET",
    caller: `sa:${runId}`,
    requestId: `req_${runId}`,
    runtime: "custom",
    acceptHeader: null,
    limits: { headersMs: 30_000, idleMs: 30_000 },
    acceptedAt: Date.now(),
    cancelAfterMs: null,
    webhook: null,
    bytesIn: 0,
    ...rest,
    mode: { kind: "wait", seconds, key },
  };
}

/** A run's webhook as admission gives it: `secret` sealed under the run's id. */
export async function sealedWebhook(runId: string, endpoint: string, secret: string): Promise<AdmittedRun["webhook"]> {
  return { endpoint, secret: await sealSecret(getConfig(env).webhookEncryptionKey, runId, secret) };
}
