import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { describe, expect, it } from "vitest";
import { consume, startAsync } from "../../test/async-runs";
import { client } from "../../test/helpers";
import { seedRunnable } from "../../test/runs";

/**
 * The Prometheus scrape of a project (`GET /v2/projects/{project_id}/metrics`), read by a real parser
 * (`parse-prometheus-text-format`, a port of the Prometheus Python client's), and held to the usage
 * API's figures for the same runs.
 */

interface Parsed {
  name: string;
  help: string;
  type: "COUNTER" | "GAUGE" | "HISTOGRAM" | "SUMMARY" | "UNTYPED";
  metrics: {
    labels?: Record<string, string>;
    value?: string;
    buckets?: Record<string, string>;
    count?: string;
    sum?: string;
  }[];
}

const api = client();

/** Runs of every mode: sync (200, the app's 500 and 404, a body too large), waited, async. */
async function projectWithRunsOfEveryMode() {
  const app = await seedRunnable(api);
  api.clock.advance(10 * 60_000);
  for (const status of [200, 500, 404])
    await (await api.call(`${app.runPath}?status=${status}`, { token: app.token })).text();
  await (
    await api.call(app.runPath, {
      method: "POST",
      token: app.token,
      rawBody: "{}",
      headers: { "Content-Type": "application/json", "Content-Length": String(7 * 1024 * 1024) },
    })
  ).text();
  const waited = await api.call(app.runPath, {
    method: "POST",
    token: app.token,
    headers: { Prefer: "wait=10" },
    body: { n: 1 },
  });
  await waited.text();
  expect(waited.status).toBe(200);
  const started = await startAsync(api, app, { body: { n: 2 } });
  expect(started.response.status).toBe(202);
  expect((await consume(api, started.message)).acked).toBe(true);
  return app;
}

async function scrape(app: { projectId: string; token: string }, accept?: string) {
  const response = await api.call(`/v2/projects/${app.projectId}/metrics`, {
    token: app.token,
    headers: accept ? { Accept: accept } : {},
  });
  return { status: response.status, type: response.headers.get("content-type"), text: await response.text() };
}

const family = (parsed: Parsed[], name: string) => {
  const found = parsed.find((f) => f.name === name);
  if (!found) throw new Error(`no family ${name}`);
  return found;
};
const sum = (f: Parsed, where: (labels: Record<string, string>) => boolean = () => true) =>
  f.metrics.filter((m) => where(m.labels ?? {})).reduce((n, m) => n + Number(m.value), 0);

describe("GET /v2/projects/{project_id}/metrics", () => {
  it("answers the Prometheus text format a real parser reads, with the usage API's figures", async () => {
    const app = await projectWithRunsOfEveryMode();
    const { status, type, text } = await scrape(app);
    expect(status).toBe(200);
    expect(type).toBe("text/plain; version=0.0.4; charset=utf-8");
    const parsed = parsePrometheusTextFormat(text) as Parsed[];

    const usage = await api.json<{ totals: Record<string, number> }>(
      `/v2/projects/${app.projectId}/usage?interval=minute&from=${new Date(api.clock.now().getTime() - 30 * 60_000).toISOString()}`,
      { token: app.token },
    );
    const t = usage.body.totals;
    expect(t.runs).toBe(6);

    const runs = family(parsed, "gateway_runs_total");
    expect(runs.type).toBe("COUNTER");
    expect(sum(runs)).toBe(t.runs);
    for (const cls of ["2xx", "4xx", "5xx"]) expect(sum(runs, (l) => l.status_class === cls)).toBe(t[`status_${cls}`]);
    // Every mode is there, with its own series.
    expect(sum(runs, (l) => l.mode === "sync")).toBe(4);
    expect(sum(runs, (l) => l.mode === "wait")).toBe(1);
    expect(sum(runs, (l) => l.mode === "async")).toBe(1);

    const failures = family(parsed, "gateway_run_failures_total");
    for (const whose of ["app", "caller", "gateway"])
      expect(sum(failures, (l) => l.whose === whose)).toBe(t[`failures_${whose}`]);
    expect(sum(failures, (l) => l.whose === "app")).toBe(1);
    expect(sum(failures, (l) => l.whose === "caller")).toBe(2);

    expect(sum(family(parsed, "gateway_run_request_bytes_total"))).toBe(t.bytes_in);
    expect(sum(family(parsed, "gateway_run_response_bytes_total"))).toBe(t.bytes_out);
    expect(sum(family(parsed, "gateway_run_timeouts_total"))).toBe(t.timeouts);

    // The parser folds a histogram's series into one (it keeps no labels there): its lines are read here.
    expect(family(parsed, "gateway_run_duration_seconds").type).toBe("HISTOGRAM");
    const series = new Map<string, { buckets: [string, number][]; count: number }>();
    for (const [, part, labels, value] of text.matchAll(
      /^gateway_run_duration_seconds_(bucket|count)\{([^}]*)\} (\S+)$/gm,
    )) {
      const key = labels!.replace(/,?le="[^"]*"/, "");
      const entry = series.get(key) ?? { buckets: [], count: 0 };
      if (part === "bucket") entry.buckets.push([/le="([^"]*)"/.exec(labels!)![1]!, Number(value)]);
      else entry.count = Number(value);
      series.set(key, entry);
    }
    expect([...series.values()].reduce((n, s) => n + s.count, 0)).toBe(t.runs);
    for (const [labels, { buckets, count }] of series) {
      expect(labels).toMatch(/^app="[^"]+",mode="(sync|wait|async)"$/);
      const counts = buckets.map(([, n]) => n);
      // Cumulative buckets, the last (+Inf) equal to the count.
      expect(counts).toEqual([...counts].sort((a, b) => a - b));
      expect(buckets.at(-1)).toEqual(["+Inf", count]);
    }

    expect(family(parsed, "gateway_webhook_receivers").metrics.map((m) => m.labels?.state)).toEqual([
      "paused",
      "disabled",
    ]);
    expect(family(parsed, "gateway_webhook_deliveries_last_hour").type).toBe("GAUGE");

    // Bounded labels: app, mode, status class, whose, le; never a path, a caller or a run.
    const names = new Set([...text.matchAll(/[{,]([a-z_]+)="/g)].map((m) => m[1]));
    expect([...names].sort()).toEqual(["app", "le", "mode", "outcome", "state", "status_class", "whose"]);
    expect(text).not.toContain(app.token);
    expect(text).not.toMatch(/run_[0-9a-z]{26}/);
    // Prometheus' naming: counters end in _total, units are base units.
    for (const f of parsed) if (f.type === "COUNTER") expect(f.name).toMatch(/_total$/);
    expect(text).not.toMatch(/_ms\b|_milliseconds/);
  });

  it("answers OpenMetrics when the scraper asks for it, as Prometheus does", async () => {
    const app = await projectWithRunsOfEveryMode();
    const accept =
      "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
    const { status, type, text } = await scrape(app, accept);
    expect(status).toBe(200);
    expect(type).toBe("application/openmetrics-text; version=1.0.0; charset=utf-8");
    const lines = text.split("\n");
    expect(lines.at(-1)).toBe("");
    expect(lines.at(-2)).toBe("# EOF");
    // A counter's family is named without _total; its samples with it, and a _created timestamp.
    expect(lines).toContain("# TYPE gateway_runs counter");
    expect(lines).toContain("# UNIT gateway_run_duration_seconds seconds");
    expect(lines).toContain("# UNIT gateway_run_request_bytes bytes");
    expect(text).toMatch(/^gateway_runs_total\{app="[^"]+",mode="sync",status_class="2xx"\} 1$/m);
    expect(text).toMatch(/^gateway_runs_created\{app="[^"]+",mode="sync",status_class="2xx"\} \d+(\.\d+)?$/m);
    // Every sample line belongs to the family declared above it.
    let current = "";
    for (const line of lines.slice(0, -2)) {
      const declared = /^# TYPE (\S+) /.exec(line);
      if (declared) current = declared[1]!;
      else if (!line.startsWith("#")) expect(line.startsWith(current)).toBe(true);
    }
    // The Prometheus text format is the default for anything else.
    expect((await scrape(app, "application/json")).type).toBe("text/plain; version=0.0.4; charset=utf-8");
  });

  it("is the usage:read scope's, and another project's token gets 404", async () => {
    const app = await seedRunnable(api);
    const other = await seedRunnable(api);
    expect((await api.call(`/v2/projects/${app.projectId}/metrics`, { token: other.token })).status).toBe(404);
    expect((await api.call(`/v2/projects/${app.projectId}/metrics`, { token: null })).status).toBe(401);
  });
});
