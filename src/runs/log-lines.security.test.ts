import { afterEach, describe, expect, it, vi } from "vitest";
import { client } from "../../test/helpers";
import { PEER } from "../../test/peers";
import { callWith, capturingQueue, seedRunnable, unreachableLanes } from "../../test/runs";

afterEach(() => {
  vi.restoreAllMocks();
});

/** Every structured line written while `work` runs, as Workers Logs (and an OTLP destination) would get it. */
async function linesOf(work: () => Promise<unknown>) {
  const lines: Record<string, unknown>[] = [];
  for (const level of ["log", "warn", "error"] as const)
    vi.spyOn(console, level).mockImplementation((line: unknown) => {
      if (typeof line === "object" && line !== null) lines.push(line as Record<string, unknown>);
    });
  await work();
  return lines;
}

describe("attack: secrets in a run's log lines and trace attributes (OTLP export)", () => {
  it("a run's log lines carry its run id, project and app, and no token, webhook secret or query", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const secret = "whsec-do-not-log-0123456789abcdef";
    const hook = encodeURIComponent(`${PEER}/hooks/private-path?sig=query-secret-value`);
    const capture = capturingQueue();
    let runId: string | null = null;
    const lines = await linesOf(async () => {
      // The lane cannot take the delivery: the run writes a line of its own mid-run (the hand-off to the queue).
      const response = await callWith(
        api,
        { WEBHOOK_LANES: unreachableLanes(), WEBHOOK_QUEUE: capture.queue },
        `${app.runPath}?webhookEndpoint=${hook}&note=caller-query-data`,
        {
          method: "POST",
          token: app.token,
          headers: { "Content-Type": "application/json", "X-Webhook-Secret": secret },
          body: JSON.stringify({ password: "body-secret-value" }),
        },
      );
      runId = response.headers.get("x-run-id");
      await response.text();
    });
    expect(runId).toMatch(/^run_/);
    const midRun = lines.find((l) => l.message === "webhook delivery handed to the queue: its lane could not take it");
    expect(midRun).toMatchObject({ run_id: runId, project_id: app.projectId, app_name: app.appName });
    const request = lines.find((l) => l.message === "request");
    expect(request).toMatchObject({ run_id: runId, project_id: app.projectId });
    const written = JSON.stringify(lines);
    for (const leaked of [
      app.token,
      secret,
      "query-secret-value",
      "caller-query-data",
      "body-secret-value",
      "private-path",
    ])
      expect(written).not.toContain(leaked);
  });
});
