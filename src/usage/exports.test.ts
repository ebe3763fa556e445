import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { parse } from "csv-parse/sync";
import { describe, expect, it } from "vitest";
import { client } from "../../test/helpers";
import { seedRunnable } from "../../test/runs";
import { csvField, csvLine } from "./exports";
import { EXPORT_MAX_RUNS } from "./index";
import { ledgerOf } from "./ledger-client";
import { newId } from "../platform/ids";

/**
 * The runs list and the usage series as files: CSV read back by a real parser (`csv-parse`), NDJSON
 * line by line, each held to the JSON the API answers for the same runs.
 */

const api = client();

async function projectWithRuns(count: number) {
  const app = await seedRunnable(api);
  api.clock.advance(5 * 60_000);
  for (let i = 0; i < count; i++) {
    const status = i % 4 === 3 ? 500 : 200;
    await (await api.call(`${app.runPath}?status=${status}`, { token: app.token })).text();
    api.clock.advance(1_000);
  }
  return app;
}

describe("exports", () => {
  it("CSV fields as RFC 4180 writes them: quoted when they hold a quote, a comma or a line break", () => {
    expect(csvField("plain")).toBe("plain");
    expect(csvField('say "hi"')).toBe('"say ""hi"""');
    expect(csvField("a,b")).toBe('"a,b"');
    expect(csvField("line\nbreak")).toBe('"line\nbreak"');
    expect(csvField(null)).toBe("");
    expect(csvField(42)).toBe("42");
    expect(csvLine(["a", 1, null])).toBe("a,1,\r\n");
  });

  it("exports the runs list as CSV, every page of the range, with the JSON's runs and totals", async () => {
    const app = await projectWithRuns(7);
    const from = new Date(api.clock.now().getTime() - 60 * 60_000).toISOString();
    const response = await api.call(`/v2/projects/${app.projectId}/runs?from=${from}`, {
      token: app.token,
      headers: { Accept: "text/csv" },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/csv; charset=utf-8; header=present");
    expect(response.headers.get("content-disposition")).toContain(".csv");
    const rows = parse(await response.text(), { columns: true }) as Record<string, string>[];
    const json = await api.json<{ data: { run_id: string; status_code: number; bytes_out: number }[] }>(
      `/v2/projects/${app.projectId}/runs?from=${from}&limit=100`,
      { token: app.token },
    );
    expect(rows.map((r) => r.run_id)).toEqual(json.body.data.map((r) => r.run_id));
    expect(rows.map((r) => Number(r.status_code))).toEqual(json.body.data.map((r) => r.status_code));
    const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);
    expect(sum(rows.map((r) => Number(r.bytes_out)))).toBe(sum(json.body.data.map((r) => r.bytes_out)));
    expect(rows.filter((r) => r.failure_by === "app").map((r) => r.failure)).toEqual(["500"]);
    // The usage figures of the same range: the same runs.
    const usage = await api.json<{ totals: { runs: number; bytes_out: number } }>(
      `/v2/projects/${app.projectId}/usage?interval=minute&from=${from}`,
      { token: app.token },
    );
    expect(rows).toHaveLength(usage.body.totals.runs);
  });

  it("exports the runs list as NDJSON: one run per line, as the JSON list's items", async () => {
    const app = await projectWithRuns(3);
    const response = await api.call(`/v2/projects/${app.projectId}/runs?status=2xx`, {
      token: app.token,
      headers: { Accept: "application/x-ndjson" },
    });
    expect(response.headers.get("content-type")).toBe("application/x-ndjson");
    const lines = (await response.text()).trimEnd().split("\n");
    const json = await api.json<{ data: unknown[] }>(`/v2/projects/${app.projectId}/runs?status=2xx`, {
      token: app.token,
    });
    expect(lines.map((l) => JSON.parse(l) as unknown)).toEqual(json.body.data);
  });

  it("pages through a range of more runs than a page holds, in order, without gaps or repeats", async () => {
    const app = await seedRunnable(api);
    // 1,203 records straight into the ledger: past the export's page of 1,000.
    const now = api.clock.now().getTime();
    const records = Array.from({ length: 1_203 }, (_, i) => ({
      run_id: newId("run", now - 600_000 + i * 100),
      project_id: app.projectId,
      app_name: app.appName,
      mode: "sync" as const,
      method: "POST",
      path: i === 5 ? '=HYPERLINK("http://evil.example","x"), "quoted"' : "run",
      status_code: 200,
      ending: "answered" as const,
      failure: null,
      duration_ms: 10,
      ttfb_ms: null,
      called_ms: 1,
      answered_ms: 2,
      handed_over_ms: null,
      bytes_in: 1,
      bytes_out: 2,
      caller: "admin",
      webhook: false,
      request_id: `req_${i}`,
      created_at: now - 600_000 + i * 100,
    }));
    await ledgerOf(env, app.projectId).add(records);
    const response = await api.call(`/v2/projects/${app.projectId}/runs`, { headers: { Accept: "text/csv" } });
    const rows = parse(await response.text(), { columns: true }) as Record<string, string>[];
    expect(rows).toHaveLength(1_203);
    expect(new Set(rows.map((r) => r.run_id)).size).toBe(1_203);
    expect(rows.map((r) => r.run_id)).toEqual(records.map((r) => r.run_id).reverse());
    // A caller's path that a spreadsheet would run as a formula opens as text, its quotes and comma intact.
    expect(rows.find((r) => r.request_id === "req_5")!.path).toBe(`'=HYPERLINK("http://evil.example","x"), "quoted"`);
  });

  it("refuses a range of more runs than an export holds, naming from, rather than cutting it short", async () => {
    const app = await seedRunnable(api);
    // The count an export checks is the rollups': one minute of the project's (and its app's) holding one run too many.
    const minute = Math.floor((api.clock.now().getTime() - 3_600_000) / 60_000) * 60_000;
    await runInDurableObject(ledgerOf(env, app.projectId), (_instance, state) => {
      for (const name of ["", app.appName])
        state.storage.sql.exec(
          "INSERT INTO rollups (app_name, minute, runs, status_2xx, status_4xx, status_5xx, timeouts, bytes_in, bytes_out, hist) VALUES (?, ?, ?, ?, 0, 0, 0, 0, 0, '{}')",
          name,
          minute,
          EXPORT_MAX_RUNS + 1,
          EXPORT_MAX_RUNS + 1,
        );
    });
    const { status, body } = await api.json<{ errors: { field: string; message: string }[] }>(
      `/v2/projects/${app.projectId}/runs`,
      { headers: { Accept: "text/csv" } },
    );
    expect(status).toBe(400);
    expect(body.errors[0]).toMatchObject({ field: "from" });
    expect(body.errors[0]!.message).toContain(`holds ${EXPORT_MAX_RUNS + 1} runs`);
  });

  it("exports the usage series as CSV whose sums are the JSON's totals", async () => {
    const app = await projectWithRuns(8);
    const query = `interval=hour&from=2026-11-21T00:00:00Z&to=2026-11-22T00:00:00Z`;
    const response = await api.call(`/v2/projects/${app.projectId}/usage?${query}`, {
      token: app.token,
      headers: { Accept: "text/csv" },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("x-usage-from")).toBe("2026-11-21T00:00:00.000Z");
    const rows = parse(await response.text(), { columns: true, cast: true }) as Record<string, number | string>[];
    expect(rows).toHaveLength(24);
    const json = await api.json<{ totals: Record<string, number> }>(`/v2/projects/${app.projectId}/usage?${query}`, {
      token: app.token,
    });
    for (const column of ["runs", "status_2xx", "status_5xx", "failures_app", "bytes_in", "bytes_out"])
      expect(rows.reduce((n, r) => n + Number(r[column]), 0)).toBe(json.body.totals[column]);
    expect(json.body.totals.runs).toBe(8);
    const ndjson = await api.call(`/v2/projects/${app.projectId}/usage?${query}`, {
      token: app.token,
      headers: { Accept: "application/x-ndjson" },
    });
    expect((await ndjson.text()).trimEnd().split("\n")).toHaveLength(24);
  });
});
