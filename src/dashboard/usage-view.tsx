import type { Child } from "hono/jsx";
import { type ApiResult, seg } from "./api";
import { bucketLabel, INTERVAL_MS, type Interval, Lines, StackedBars } from "./charts";
import { type DashContext, projectPath } from "./context";
import { ProblemMessage } from "./components";
import { bytes, count, countShort, duration, durationAxis, percent } from "./format";
import type { Usage, UsageTotals } from "./api-types";

/** The time ranges a person picks from; each shows its own bucket size (60, 24 and 168 bars). */
export const RANGES = {
  "1h": { label: "1 hour", span: 3_600_000, interval: "minute" },
  "24h": { label: "24 hours", span: 86_400_000, interval: "hour" },
  "7d": { label: "7 days", span: 7 * 86_400_000, interval: "hour" },
} as const satisfies Record<string, { label: string; span: number; interval: Interval }>;
export type Range = keyof typeof RANGES;
/** `fit`: the window that opens where the project's runs of the last 7 days are (the Usage pages' default). */
export type Choice = Range | "fit";
export const FIT_LABEL = "Where the runs are";

export const rangeOf = <F extends Choice>(value: string | undefined, fallback: F): Range | F =>
  value !== undefined && value in RANGES ? (value as Range) : fallback;

/** The window a range covers up to `now`: whole buckets, the last one the bucket `now` is in. */
export function windowOf(range: Range, now: Date) {
  const { span, interval } = RANGES[range];
  return spanWindow(range, interval, span, now, `in the last ${RANGES[range].label}`);
}

function spanWindow(range: Choice, interval: Interval, span: number, now: Date, during: string) {
  const unit = INTERVAL_MS[interval];
  const end = Math.floor(now.getTime() / unit) * unit + unit;
  const from = end - span;
  const starts = Array.from({ length: span / unit }, (_, i) => from + i * unit);
  // `to` is exclusive: the end of the bucket `now` is in, so a run made this very millisecond counts.
  return { range, interval, from: new Date(from).toISOString(), to: new Date(end).toISOString(), starts, during };
}
export type UsageWindow = ReturnType<typeof spanWindow>;

/** The recent span read by the minute: a fitted window within it is drawn by the minute. */
const FIT_RECENT_MS = 6 * 3_600_000;
/** The fewest buckets a fitted window shows, so five minutes of runs are not five bars as wide as the chart. */
const FIT_MIN_BUCKETS = { minute: 15, hour: 12 } as const;

const busy = (p: Usage["series"][number]) => p.runs + p.deliveries_delivered + p.deliveries_failed > 0;
const anything = (u: Usage) => u.totals.runs + u.totals.deliveries_delivered + u.totals.deliveries_failed > 0;

/**
 * The window that opens where the runs are: from the bucket before the first run of the last 7 days to
 * now, by the minute when they all fall in the last 6 hours (`recent`), else by the hour (`week`); at
 * least 15 minutes or 12 hours wide. Null when the 7 days hold nothing. Returns the window and the
 * answer whose series and totals it draws (all of the week's runs are inside it, so its totals are the week's).
 */
export function fitWindow(week: Usage, recent: Usage, now: Date): { window: UsageWindow; usage: Usage } | null {
  if (!anything(week)) return null;
  const allRecent =
    recent.totals.runs === week.totals.runs &&
    recent.totals.deliveries_delivered + recent.totals.deliveries_failed ===
      week.totals.deliveries_delivered + week.totals.deliveries_failed;
  const usage = allRecent ? recent : week;
  const interval: Interval = allRecent ? "minute" : "hour";
  const unit = INTERVAL_MS[interval];
  const first = usage.series.find(busy);
  const end = Math.floor(now.getTime() / unit) * unit + unit;
  const firstStart = first ? Date.parse(first.start) : end - unit;
  const span = Math.max(end - (firstStart - unit), FIT_MIN_BUCKETS[interval] * unit);
  const since = end - span;
  const at = interval === "minute" ? new Date(since).toISOString().slice(11, 16) : bucketLabel(since, "hour");
  return { window: spanWindow("fit", interval, span, now, `since ${at} UTC`), usage };
}

/** The API's query for a window (and one app, when given). */
export function usageQuery(projectId: string, window: Pick<UsageWindow, "from" | "to" | "interval">, appName?: string) {
  const query = new URLSearchParams({ from: window.from, to: window.to, interval: window.interval });
  if (appName) query.set("app_name", appName);
  return `/projects/${seg(projectId)}/usage?${query}`;
}

/**
 * What a Usage page draws: the range asked for, or by default the window where the runs are (two reads:
 * 7 days by the hour, the last 6 hours by the minute). `usage` is null when the default found nothing
 * in 7 days (the page says so).
 */
export async function usageFor(
  c: DashContext,
  projectId: string,
  range: Choice,
  appName?: string,
): Promise<{ window: UsageWindow; usage: ApiResult<Usage> | null }> {
  const api = c.get("api");
  const now = c.var.scope.deps.now();
  if (range !== "fit") {
    const window = windowOf(range, now);
    return { window, usage: await api<Usage>("GET", usageQuery(projectId, window, appName)) };
  }
  const weekWindow = windowOf("7d", now);
  const recentWindow = spanWindow("fit", "minute", FIT_RECENT_MS, now, "");
  const [week, recent] = await Promise.all([
    api<Usage>("GET", usageQuery(projectId, weekWindow, appName)),
    api<Usage>("GET", usageQuery(projectId, recentWindow, appName)),
  ]);
  if (!week.ok) return { window: weekWindow, usage: week };
  if (!recent.ok) return { window: weekWindow, usage: recent };
  const fitted = fitWindow(week.data, recent.data, now);
  if (!fitted) return { window: { ...weekWindow, range: "fit" }, usage: null };
  return { window: fitted.window, usage: { ...week, data: fitted.usage } };
}

/** Every bucket of the window, the API's figures where it has some and none elsewhere. */
export function alignSeries(usage: Usage, starts: number[]): (Usage["series"][number] | undefined)[] {
  const byStart = new Map(usage.series.map((point) => [Date.parse(point.start), point]));
  return starts.map((start) => byStart.get(start));
}

/** Links to the same page over another range (keeps the page's other query fields); `fit` offers the runs' own window. */
export function RangePicker({ c, current, fit = false }: { c: DashContext; current: Choice; fit?: boolean }) {
  const url = new URL(c.req.url);
  const choices: [Choice, string][] = [
    ...(fit ? [["fit", FIT_LABEL] as [Choice, string]] : []),
    ...(Object.keys(RANGES) as Range[]).map((r): [Choice, string] => [r, RANGES[r].label]),
  ];
  return (
    <nav class="segmented" aria-label="Time range">
      {choices.map(([r, label]) => {
        url.searchParams.set("range", r);
        return (
          <a href={`${url.pathname}?${url.searchParams}`} aria-current={r === current ? "page" : undefined}>
            {label}
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

/** The range's totals as tiles: what a person looks for first. Failures say whose they were. */
export function Totals({ totals }: { totals: UsageTotals }) {
  const failures = totals.failures_app + totals.failures_caller + totals.failures_gateway;
  return (
    <dl class="stats">
      <Stat label="Runs" value={count(totals.runs)} />
      <Stat
        label="App error rate"
        value={totals.error_rate === null ? "–" : percent(totals.error_rate)}
        note={`${count(totals.failures_app)} the app's`}
      />
      <Stat
        label="Failures"
        value={count(failures)}
        note={`${count(totals.failures_caller)} caller's · ${count(totals.failures_gateway)} gateway's`}
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
  const failures = t.failures_app + t.failures_caller + t.failures_gateway;
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
        summary={`${count(t.runs)} runs ${window.during}: ${count(t.status_2xx)} 2xx, ${count(t.status_4xx)} 4xx, ${count(t.status_5xx)} 5xx.`}
      />
      {failures > 0 && (
        <StackedBars
          {...base}
          id={`${idPrefix}-failures`}
          title="Failures by whose"
          layers={[
            { label: "The app's", tone: "c5xx", values: zeroOr(pick((p) => p.failures_app)) },
            { label: "The caller's mistakes", tone: "c4xx", values: zeroOr(pick((p) => p.failures_caller)) },
            { label: "The gateway's", tone: "cgw", values: zeroOr(pick((p) => p.failures_gateway)) },
          ]}
          short={countShort}
          full={count}
          summary={`${count(failures)} failures ${window.during}: ${count(t.failures_app)} the app's (error rate ${t.error_rate === null ? "–" : percent(t.error_rate)}), ${count(t.failures_caller)} the caller's mistakes, ${count(t.failures_gateway)} the gateway's.`}
        />
      )}
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
        axis={durationAxis}
        full={duration}
        summary={`${capital(window.during)}: p50 ${duration(t.p50_ms)}, p95 ${duration(t.p95_ms)}, p99 ${duration(t.p99_ms)}.`}
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

const capital = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);

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
  range,
}: {
  c: DashContext;
  projectId: string;
  appName: string | undefined;
  range: Choice;
}) {
  return (
    <div class="card">
      <p>
        <strong>{range === "fit" ? "No runs in the last 7 days." : "No runs in this range."}</strong> Runs appear here a
        few seconds after they end, whatever their answer. Make one with a token from{" "}
        <a href={projectPath(projectId, "/api-keys")}>API Keys</a>:
      </p>
      <RunCommand c={c} projectId={projectId} appName={appName} />
    </div>
  );
}

/** Totals, charts, or what to do when the range holds no run; a refused call shows the API's problem. */
export function UsageSection(props: {
  c: DashContext;
  usage: ApiResult<Usage> | null;
  window: UsageWindow;
  projectId: string;
  appName?: string;
  idPrefix: string;
}) {
  const { usage } = props;
  const first = <FirstRun c={props.c} projectId={props.projectId} appName={props.appName} range={props.window.range} />;
  if (usage === null) return first;
  if (!usage.ok) return <ProblemMessage problem={usage.problem} action="Loading usage" />;
  if (!anything(usage.data)) return first;
  return (
    <>
      <Totals totals={usage.data.totals} />
      <UsageCharts usage={usage.data} window={props.window} idPrefix={props.idPrefix} />
      <p class="muted">
        Times are UTC. Hover a bar for its figures, or open a chart's table.
        {usage.data.percentiles === "histogram" && " Percentiles come from per-minute histograms here (within 5 %)."}
        {usage.data.sampled &&
          " Some of the range's run records were sampled; counts, bytes and status classes stay exact."}
        {usage.data.partial &&
          " This app's figures may miss runs of the range (the project's usage store was full); the project's figures count them all."}
      </p>
    </>
  );
}
