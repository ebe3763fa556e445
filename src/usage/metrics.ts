import { DURATION_BOUNDS_S, type CounterRow, type RefusalCounter } from "./ledger-counters";
import { WHOSE } from "./run-record";

/**
 * A project's figures as a Prometheus scrape reads them (docs/metrics.md): the Prometheus text format
 * 0.0.4 or OpenMetrics 1.0, by the scraper's `Accept`. Names follow Prometheus' conventions (a
 * `gateway_` prefix, base units: seconds and bytes, `_total` on counters); labels are bounded: app,
 * mode, status class, whose failure, refusal reason, delivery outcome, receiver state. Never a path, a
 * caller or an endpoint: those are the caller's to invent.
 */

export const PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8";
export const OPENMETRICS_TEXT = "application/openmetrics-text; version=1.0.0; charset=utf-8";
export type Exposition = "prometheus" | "openmetrics";

type Labels = Record<string, string>;
interface Sample {
  /** Appended to the family's name: `_total`, `_bucket`, `_sum`, `_count`, `_created`, or nothing. */
  suffix: string;
  labels: Labels;
  value: number;
}
interface Family {
  /** The family's name without `_total` (OpenMetrics names a counter's family so). */
  name: string;
  type: "counter" | "gauge" | "histogram";
  unit?: "seconds" | "bytes";
  help: string;
  samples: Sample[];
}

/** What a scrape shows besides the ledger's counters. */
export interface Gauges {
  /** Settled deliveries of the runs of the last hour, by outcome (the usage API's `deliveries_*` over that hour). */
  deliveries: { delivered: number; failed: number };
  /** Receivers by state (paused and disabled ones; an active receiver has no row until its settings change). */
  receivers: Record<"paused" | "disabled", number>;
}

const escapeLabel = (value: string) => value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
const escapeHelp = (text: string, format: Exposition) => {
  const escaped = text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
  return format === "openmetrics" ? escaped.replace(/"/g, '\\"') : escaped;
};
const number = (value: number) =>
  Number.isFinite(value) ? String(value) : Number.isNaN(value) ? "NaN" : value > 0 ? "+Inf" : "-Inf";
const labelText = (labels: Labels) => {
  const pairs = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabel(v)}"`);
  return pairs.length ? `{${pairs.join(",")}}` : "";
};
const seconds = (ms: number) => ms / 1000;

/** The families of a project's counters and gauges, in a fixed order. */
export function families(counters: CounterRow[], refusals: RefusalCounter[], gauges: Gauges): Family[] {
  const runs: Family = {
    name: "gateway_runs",
    type: "counter",
    help: "Runs that ended, by app, mode (sync, wait, async) and the status class the caller got (2xx is every status below 400).",
    samples: [],
  };
  const failures: Family = {
    name: "gateway_run_failures",
    type: "counter",
    help: "Runs that failed, by whose failure: app (its 5xx, unreachable, too slow, no deployment), caller (refused requests, the app's 4xx, a Cancel-After passed) or gateway (its own faults).",
    samples: [],
  };
  const timeouts: Family = {
    name: "gateway_run_timeouts",
    type: "counter",
    help: "Runs that ended on a time limit: the gateway's, or the caller's Cancel-After.",
    samples: [],
  };
  const duration: Family = {
    name: "gateway_run_duration_seconds",
    type: "histogram",
    unit: "seconds",
    help: "Run durations from acceptance to the run's end (an answer's last byte, an async run's finish).",
    samples: [],
  };
  const bytesIn: Family = {
    name: "gateway_run_request_bytes",
    type: "counter",
    unit: "bytes",
    help: "Bytes of callers' request bodies, counted as they crossed.",
    samples: [],
  };
  const bytesOut: Family = {
    name: "gateway_run_response_bytes",
    type: "counter",
    unit: "bytes",
    help: "Bytes of the answers that crossed to callers or into stored results (decoded).",
    samples: [],
  };
  for (const c of counters) {
    const base = { app: c.app_name, mode: c.mode };
    const created = seconds(c.created_at);
    for (const cls of ["2xx", "4xx", "5xx"] as const) {
      runs.samples.push({ suffix: "_total", labels: { ...base, status_class: cls }, value: c[`status_${cls}`] });
      runs.samples.push({ suffix: "_created", labels: { ...base, status_class: cls }, value: created });
    }
    for (const whose of WHOSE) {
      failures.samples.push({ suffix: "_total", labels: { ...base, whose }, value: c[`failures_${whose}`] });
      failures.samples.push({ suffix: "_created", labels: { ...base, whose }, value: created });
    }
    timeouts.samples.push({ suffix: "_total", labels: base, value: c.timeouts });
    timeouts.samples.push({ suffix: "_created", labels: base, value: created });
    let below = 0;
    DURATION_BOUNDS_S.forEach((bound, i) => {
      below += c.buckets[i] ?? 0;
      duration.samples.push({ suffix: "_bucket", labels: { ...base, le: String(bound) }, value: below });
    });
    duration.samples.push({ suffix: "_bucket", labels: { ...base, le: "+Inf" }, value: c.runs });
    duration.samples.push({ suffix: "_count", labels: base, value: c.runs });
    duration.samples.push({ suffix: "_sum", labels: base, value: seconds(c.duration_ms_sum) });
    duration.samples.push({ suffix: "_created", labels: base, value: created });
    bytesIn.samples.push({ suffix: "_total", labels: base, value: c.bytes_in });
    bytesIn.samples.push({ suffix: "_created", labels: base, value: created });
    bytesOut.samples.push({ suffix: "_total", labels: base, value: c.bytes_out });
    bytesOut.samples.push({ suffix: "_created", labels: base, value: created });
  }
  const refused: Family = {
    name: "gateway_refusals",
    type: "counter",
    help: "Requests refused before their app was known (not runs), by reason: rate_limited (the project's run budget), not_found (no such app).",
    samples: refusals.flatMap((r) => [
      { suffix: "_total", labels: { reason: r.reason }, value: r.count },
      { suffix: "_created", labels: { reason: r.reason }, value: seconds(r.created_at) },
    ]),
  };
  const deliveries: Family = {
    name: "gateway_webhook_deliveries_last_hour",
    type: "gauge",
    help: "Settled webhook deliveries of the runs of the last hour, by outcome (a window, not a counter).",
    samples: (["delivered", "failed"] as const).map((outcome) => ({
      suffix: "",
      labels: { outcome },
      value: gauges.deliveries[outcome],
    })),
  };
  const receivers: Family = {
    name: "gateway_webhook_receivers",
    type: "gauge",
    help: "Webhook receivers not taking deliveries, by state: paused (by the project) or disabled (by the receiver's answers).",
    samples: (["paused", "disabled"] as const).map((state) => ({
      suffix: "",
      labels: { state },
      value: gauges.receivers[state],
    })),
  };
  return [runs, failures, timeouts, duration, bytesIn, bytesOut, refused, deliveries, receivers];
}

/**
 * The families as text. Prometheus 0.0.4 names a counter's family with its `_total` and has no
 * `_created` samples or `# UNIT`; OpenMetrics names the family without it, adds `# UNIT` and the
 * `_created` timestamps, and ends with `# EOF`.
 */
export function exposition(all: Family[], format: Exposition): string {
  const lines: string[] = [];
  for (const f of all) {
    const name = format === "prometheus" && f.type === "counter" ? `${f.name}_total` : f.name;
    lines.push(`# HELP ${name} ${escapeHelp(f.help, format)}`);
    lines.push(`# TYPE ${name} ${f.type}`);
    if (format === "openmetrics" && f.unit) lines.push(`# UNIT ${name} ${f.unit}`);
    for (const s of f.samples) {
      if (format === "prometheus" && s.suffix === "_created") continue;
      lines.push(`${f.name}${s.suffix}${labelText(s.labels)} ${number(s.value)}`);
    }
  }
  if (format === "openmetrics") lines.push("# EOF");
  return `${lines.join("\n")}\n`;
}
