import type { Child } from "hono/jsx";
import { type ApiResult, seg } from "./api";
import { INTERVAL_MS, type Interval, Lines, StackedBars } from "./charts";
import { type DashContext, projectPath } from "./context";
import { ProblemMessage } from "./components";
import { bytes, count, countShort, duration, percent } from "./format";
import type { Usage, UsageFigures } from "./usage-types";

/** The time ranges a person picks from; each shows its own bucket size (60, 24 and 168 bars). */
export const RANGES = {
  "1h": { label: "1 hour", span: 3_600_000, interval: "minute" },
  "24h": { label: "24 hours", span: 86_400_000, interval: "hour" },
  "7d": { label: "7 days", span: 7 * 86_400_000, interval: "hour" },
} as const satisfies Record<string, { label: string; span: number; interval: Interval }>;
export type Range = keyof typeof RANGES;
export const DEFAULT_RANGE: Range = "24h";

export const rangeOf = (value: string | undefined, fallback: Range = DEFAULT_RANGE): Range =>
  value !== undefined && value in RANGES ? (value as Range) : fallback;

/** The window a range covers up to `now`: whole buckets, the last one the bucket `now` is in. */
export function windowOf(range: Range, now: Date) {
  const { span, interval } = RANGES[range];
  const unit = INTERVAL_MS[interval];
  const end = Math.floor(now.getTime() / unit) * unit + unit;
  const from = end - span;
  const starts = Array.from({ length: span / unit }, (_, i) => from + i * unit);
  // `to` is exclusive: the end of the bucket `now` is in, so a run made this very millisecond counts.
  return { range, interval, from: new Date(from).toISOString(), to: new Date(end).toISOString(), starts };
}
export type UsageWindow = ReturnType<typeof windowOf>;

/** The API's query for a window (and one app, when given). */
export function usageQuery(projectId: string, window: UsageWindow, appName?: string): string {
  const query = new URLSearchParams({ from: window.from, to: window.to, interval: window.interval });
  if (appName) query.set("app_name", appName);
  return `/projects/${seg(projectId)}/usage?${query}`;
}

/** Every bucket of the window, the API's figures where it has some and none elsewhere. */
export function alignSeries(usage: Usage, starts: number[]): (Usage["series"][number] | undefined)[] {
  const byStart = new Map(usage.series.map((point) => [Date.parse(point.start), point]));
  return starts.map((start) => byStart.get(start));
}

/** Links to the same page over another range (keeps the page's other query fields). */
export function RangePicker({ c, current }: { c: DashContext; current: Range }) {
  const url = new URL(c.req.url);
  return (
    <nav class="segmented" aria-label="Time range">
      {(Object.keys(RANGES) as Range[]).map((r) => {
        url.searchParams.set("range", r);
        return (
          <a href={`${url.pathname}?${url.searchParams}`} aria-current={r === current ? "page" : undefined}>
            {RANGES[r].label}
          </a>
        );
      })}
    </nav>
  );
}

function Stat({ label, value, note }: { label: string; value: Child; note?: Child }) {
  return (
    <div class="stat">
      <dt>{label}</dt>
      <dd>
        {value}
        {note && <span class="muted"> {note}</span>}
      </dd>
    </div>
  );
}

/** The range's totals as tiles: what a person looks for first. */
export function Totals({ totals }: { totals: UsageFigures }) {
  const errors = totals.status_4xx + totals.status_5xx;
  const share = (n: number) => (totals.runs ? percent(n / totals.runs) : "–");
  return (
    <dl class="stats">
      <Stat label="Runs" value={count(totals.runs)} />
      <Stat label="Success" value={share(totals.status_2xx)} />
      <Stat
        label="Errors"
        value={count(errors)}
        note={`${count(totals.status_4xx)} 4xx · ${count(totals.status_5xx)} 5xx`}
      />
      <Stat label="Timeouts" value={count(totals.timeouts)} />
      <Stat label="Latency p50" value={duration(totals.p50_ms)} />
      <Stat label="p95" value={duration(totals.p95_ms)} />
      <Stat label="p99" value={duration(totals.p99_ms)} />
      <Stat label="Data in" value={bytes(totals.bytes_in)} />
      <Stat label="Data out" value={bytes(totals.bytes_out)} />
    </dl>
  );
}

/** The charts of one window: runs by status class, latency percentiles, and webhook deliveries when there were any. */
export function UsageCharts({ usage, window, idPrefix }: { usage: Usage; window: UsageWindow; idPrefix: string }) {
  const points = alignSeries(usage, window.starts);
  const pick = (f: (p: NonNullable<(typeof points)[number]>) => number | null) => points.map((p) => (p ? f(p) : null));
  const zeroOr = (values: (number | null)[]) => values.map((v) => v ?? 0);
  const t = usage.totals;
  const base = { starts: window.starts, interval: window.interval };
  const deliveries = t.deliveries_delivered + t.deliveries_failed;
  return (
    <div class="charts">
      <StackedBars
        {...base}
        id={`${idPrefix}-runs`}
        title="Runs by status"
        layers={[
          { label: "2xx", tone: "c2xx", values: zeroOr(pick((p) => p.status_2xx)) },
          { label: "4xx", tone: "c4xx", values: zeroOr(pick((p) => p.status_4xx)) },
          { label: "5xx", tone: "c5xx", values: zeroOr(pick((p) => p.status_5xx)) },
        ]}
        short={countShort}
        full={count}
        summary={`${count(t.runs)} runs in the last ${RANGES[window.range].label}: ${count(t.status_2xx)} 2xx, ${count(t.status_4xx)} 4xx, ${count(t.status_5xx)} 5xx.`}
      />
      <Lines
        {...base}
        id={`${idPrefix}-latency`}
        title="Latency"
        layers={[
          { label: "p50", tone: "p50", values: pick((p) => p.p50_ms) },
          { label: "p95", tone: "p95", values: pick((p) => p.p95_ms) },
          { label: "p99", tone: "p99", values: pick((p) => p.p99_ms) },
        ]}
        short={duration}
        full={duration}
        summary={`Over the last ${RANGES[window.range].label}: p50 ${duration(t.p50_ms)}, p95 ${duration(t.p95_ms)}, p99 ${duration(t.p99_ms)}.`}
      />
      {deliveries > 0 && (
        <StackedBars
          {...base}
          id={`${idPrefix}-deliveries`}
          title="Webhook deliveries"
          layers={[
            { label: "Delivered", tone: "c2xx", values: zeroOr(pick((p) => p.deliveries_delivered)) },
            { label: "Failed", tone: "c5xx", values: zeroOr(pick((p) => p.deliveries_failed)) },
          ]}
          short={countShort}
          full={count}
          summary={`${count(t.deliveries_delivered)} deliveries delivered, ${count(t.deliveries_failed)} failed.`}
        />
      )}
    </div>
  );
}

/**
 * A run as a person makes their first one with curl (the README's quickstart), on this dashboard's
 * own origin; `webhook` adds a receiver and the secret that signs its deliveries.
 */
export function RunCommand({
  c,
  projectId,
  appName,
  webhook,
}: {
  c: DashContext;
  projectId: string;
  appName: string | undefined;
  webhook?: boolean;
}) {
  const origin = new URL(c.req.url).origin;
  const query = webhook ? "?webhookEndpoint=https%3A%2F%2Fexample.com%2Fhooks" : "";
  const secret = webhook ? `  -H "X-Webhook-Secret: $SECRET" \\\n` : "";
  return (
    <pre>
      <code>{`curl -X POST "${origin}/v4/${projectId}/${appName ?? "APP_NAME"}/run${query}" \\\n  -H "Authorization: Bearer $TOKEN" \\\n${secret}  -H "Content-Type: application/json" \\\n  -d '{"inputs": {"name": "world"}}'`}</code>
    </pre>
  );
}

/** What to do when a range holds no run: where to get a token, and the command. */
export function FirstRun({
  c,
  projectId,
  appName,
}: {
  c: DashContext;
  projectId: string;
  appName: string | undefined;
}) {
  return (
    <div class="card">
      <p>
        <strong>No runs in this range.</strong> Runs appear here a few seconds after they end, whatever their answer.
        Make one with a token from <a href={projectPath(projectId, "/api-keys")}>API Keys</a>:
      </p>
      <RunCommand c={c} projectId={projectId} appName={appName} />
    </div>
  );
}

/** Totals, charts, or what to do when the range holds no run; a refused call shows the API's problem. */
export function UsageSection(props: {
  c: DashContext;
  usage: ApiResult<Usage>;
  window: UsageWindow;
  projectId: string;
  appName?: string;
  idPrefix: string;
}) {
  const { usage } = props;
  if (!usage.ok) return <ProblemMessage problem={usage.problem} action="Loading usage" />;
  if (
    usage.data.totals.runs === 0 &&
    usage.data.totals.deliveries_delivered + usage.data.totals.deliveries_failed === 0
  ) {
    return <FirstRun c={props.c} projectId={props.projectId} appName={props.appName} />;
  }
  return (
    <>
      <Totals totals={usage.data.totals} />
      <UsageCharts usage={usage.data} window={props.window} idPrefix={props.idPrefix} />
      <p class="muted">
        Times are UTC. Hover a bar for its figures, or open a chart's table.
        {usage.data.percentiles === "histogram" && " Percentiles come from per-minute histograms here (within 5 %)."}
        {usage.data.sampled &&
          " Some of the range's run records were sampled; counts, bytes and status classes stay exact."}
      </p>
    </>
  );
}
