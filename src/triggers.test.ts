import { createExecutionContext, createMessageBatch, createScheduledController } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { parse } from "smol-toml";
import { describe, expect, it } from "vitest";
import wranglerToml from "../wrangler.toml?raw";
import { CRONS, QUEUES } from "./platform/triggers";
import { productionDeps } from "./deps";
import { queueHandlers } from "./queue";
import { cronHandlers } from "./scheduled";
import { createWorker } from "./worker";

interface WranglerConfig {
  triggers?: { crons?: string[] };
  queues?: { producers?: { queue: string }[]; consumers?: { queue: string; dead_letter_queue?: string }[] };
  env?: Record<string, WranglerConfig>;
}

const config = parse(wranglerToml) as WranglerConfig;
const environments: [string, WranglerConfig][] = [["top level", config], ...Object.entries(config.env ?? {})];

describe("wrangler.toml and the handlers agree", () => {
  it.each(environments)("%s: every cron has a handler and every handler a cron", (_, section) => {
    expect([...(section.triggers?.crons ?? [])].sort()).toEqual(Object.values(CRONS).sort());
    expect(Object.keys(cronHandlers).sort()).toEqual(Object.values(CRONS).sort());
  });

  it.each(environments)("%s: every queue is produced to and consumed, and has a consumer in code", (_, section) => {
    const consumed = (section.queues?.consumers ?? []).map((c) => c.queue).sort();
    // A dead-letter queue is produced to by the queue it serves, not by a binding.
    const deadLetters = (section.queues?.consumers ?? []).flatMap((c) =>
      c.dead_letter_queue ? [c.dead_letter_queue] : [],
    );
    const produced = [...(section.queues?.producers ?? []).map((p) => p.queue), ...deadLetters].sort();
    expect(consumed).toEqual(Object.values(QUEUES).sort());
    expect(produced).toEqual(Object.values(QUEUES).sort());
    expect(Object.keys(queueHandlers).sort()).toEqual(Object.values(QUEUES).sort());
  });

  it.each(environments)("%s: a queue that gives up on a message puts it on its dead-letter queue", (_, section) => {
    const deadLetterOf = (queue: string) =>
      section.queues?.consumers?.find((c) => c.queue === queue)?.dead_letter_queue;
    expect(deadLetterOf(QUEUES.webhookDeliveries)).toBe(QUEUES.webhookDeadLetters);
    expect(deadLetterOf(QUEUES.asyncRuns)).toBe(QUEUES.asyncRunDeadLetters);
  });

  it("throws for a cron or queue it does not know", async () => {
    const worker = createWorker(productionDeps);
    await expect(
      worker.scheduled(createScheduledController({ cron: "0 0 * * *" }), env, createExecutionContext()),
    ).rejects.toThrow(/No handler for cron/);
    const batch = createMessageBatch("unknown-queue", [{ id: "1", timestamp: new Date(), attempts: 1, body: {} }]);
    await expect(worker.queue(batch, env, createExecutionContext())).rejects.toThrow(/No consumer for queue/);
  });
});
