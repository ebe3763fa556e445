import type { Scope } from "../platform/scope";

/**
 * A run's outcome: what the caller got, and why, as one value. The run's owner (the Worker serving a
 * synchronous run, the run's keeper for a waited run, the queue consumer of an async run) records the
 * run's events and ends it once; the outcome is folded from those events in one place
 * (`run-events.ts` `foldOutcome`) and handed whole to whoever records it (usage). No stage fills a
 * recorder as it goes; a refusal about a run never becomes that run's outcome.
 *
 * The words (docs/architecture.md, glossary): a *run* is one call of an app through the gateway, from
 * its acceptance to its end; the *app call* is the gateway's one HTTP request to the app's deployment;
 * the run's *owner* makes the app call; a *hand-over* is a waited run whose caller stopped waiting.
 */

/**
 * How the caller asked: `sync` (the answer on the same connection), `wait` (`Prefer: wait=N`: the answer
 * if it comes within N s, else the run handed over), `async` (`?async=true`: 202 at once).
 */
export type RunMode = "sync" | "wait" | "async";

/** How a run ended, one word each. */
export type RunEnding =
  /** The app's answer reached its end (whatever its status): the caller read it, or it was stored. */
  | "answered"
  /** The caller left before the answer ended; the app's call was ended with it (a run not handed over). */
  | "hung_up"
  /** The gateway's limits ended the app call: no headers within the run's timeout, or a stream silent too long. */
  | "timeout"
  /** The caller's `Cancel-After` passed: the app call was ended, or never made. */
  | "deadline"
  /** The app could not be reached, or its answer broke off. */
  | "unreachable"
  /** Refused once the app was known: size, media type, method, no deployment, a bad parameter or header. */
  | "refused"
  /** The platform stopped the run's owner mid-call; the app is never called again for this run. */
  | "interrupted"
  /** The gateway itself failed once the app was known (its storage unavailable, a fault of its own): a 5xx problem. */
  | "error";

/** Whose failure a run's error was: the gateway's (its problem code) or the app's (its own status). */
export type RunFailure = { by: "gateway"; code: string } | { by: "app"; status: number };

/** The run's moments, epoch milliseconds; `null` for a moment the run never had. */
export interface RunTimes {
  /** The run was admitted (a record's `created_at`). */
  acceptedAt: number;
  /** The app call was sent. */
  calledAt: number | null;
  /** The app's response headers came. */
  answeredAt: number | null;
  /** The first byte of a passed-through answer crossed to the caller. */
  firstByteAt: number | null;
  /** A waited run's caller stopped waiting (202, or the caller hung up while waiting). */
  handedOverAt: number | null;
  /** The answer ended (read, stored, broken off) or the run was refused. */
  endedAt: number;
}

export interface RunOutcome {
  runId: string;
  projectId: string;
  appName: string;
  /** The app's path under the app (`run`, `v1/chat/completions`), no query; at most `OUTCOME_PATH_MAX` characters. */
  path: string;
  method: string;
  mode: RunMode;
  /** Who ran it: `sa:<id>`, `user:<id>`, `jwt:<subject>` or `admin`; never a credential. */
  caller: string;
  /** The request that made the run (its `X-Request-Id`). */
  requestId: string;
  /** The status the caller got; a handed-over or async run: the status its stored result carries. */
  status: number;
  ending: RunEnding;
  /** Whose failure, when the run did not end in a 1xx–3xx answer of the app's; `null` otherwise. */
  failure: RunFailure | null;
  times: RunTimes;
  /** Bytes of the caller's body the gateway read, counted as they crossed (never a header's claim). */
  bytesIn: number;
  /** Decoded bytes of the answer that crossed to the caller, or into the stored result. */
  bytesOut: number;
  /** Whether the caller asked for a webhook (its outcome is the delivery's own record). */
  webhook: boolean;
}

/** What a run is from its start, before it has ended: the parts of its outcome its owner knows at once. */
export type RunStart = Pick<
  RunOutcome,
  "runId" | "projectId" | "appName" | "path" | "method" | "mode" | "caller" | "requestId"
> & {
  /** Epoch ms of its acceptance (its outcome's `times.acceptedAt`). */
  acceptedAt: number;
};

/** The longest app path an outcome carries: a caller's 8 KB path is cut, not stored whole. */
export const OUTCOME_PATH_MAX = 256;

/**
 * A request refused before its app was known (the project's run budget spent, an app the project does
 * not have): not a run, so never a record; counted per project and reason, with no name or path the
 * caller chose.
 */
export interface RunRefusal {
  projectId: string;
  /** The problem code the caller got (`rate_limited`, `not_found`). */
  reason: string;
  at: number;
}

/**
 * Where a run's owner hands its outcome, and a refusal its count: usage's recorder, which the root
 * (src/worker.ts, src/queue.ts, src/scheduled.ts, src/index.ts) passes to every owner. Nothing in
 * runs/ names usage; the port is all it knows. Neither method may throw or be awaited on a run's path.
 */
export interface OutcomePort {
  /**
   * A run was admitted (its app known, its request accepted): under way until its outcome, which
   * closes it. Synchronous, waited and async runs alike, from the Worker that admitted them.
   */
  started(scope: Scope, start: RunStart): void;
  /** A run has ended: its one outcome. */
  ended(scope: Scope, outcome: RunOutcome): void;
  /** A request was refused before its app was known. */
  refused(scope: Scope, refusal: RunRefusal): void;
}

/**
 * An owner's clock: `start` (epoch ms on the service's clock, `deps.now()`, when the owner started),
 * moved on by the wall time since, so the moments of one owner are on one line and their gaps are real
 * durations whatever `deps.now` is (the tests' clock stands still unless moved). `clock(wall)` places a
 * `Date.now()` reading taken during the run; `clock()` is now.
 */
export function runClock(start: number): (wall?: number) => number {
  const wallStart = Date.now();
  return (wall = Date.now()) => start + (wall - wallStart);
}

/** How a run ended when the gateway answered a problem of its own, by the problem's code. */
const ENDING_OF_PROBLEM: Record<string, RunEnding> = {
  gateway_timeout: "timeout",
  bad_gateway: "unreachable",
  run_interrupted: "interrupted",
  run_deadline: "deadline",
  internal_error: "error",
  service_unavailable: "error",
};

/** The ending of a run whose answer is the gateway's problem `error`. */
export const endingOfProblem = (error: { code: string; status: number }): RunEnding =>
  ENDING_OF_PROBLEM[error.code] ?? (error.status >= 500 ? "error" : "refused");

/** `path` as an outcome carries it: at most `OUTCOME_PATH_MAX` characters. */
export const outcomePath = (path: string) => (path.length > OUTCOME_PATH_MAX ? path.slice(0, OUTCOME_PATH_MAX) : path);

/** The status a run's outcome carries when its caller left before any answer (nginx's "client closed request"). */
export const CLIENT_CLOSED = 499;
