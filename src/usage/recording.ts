import { ApiError } from "../platform/errors";
import { newId } from "../platform/ids";
import type { Scope } from "../platform/scope";
import { holdRefusal } from "./buffer";
import { type BodyTally, recordRun } from "./record";

/** What the run names (the run path's `RunTarget`). */
interface Target {
  projectId: string;
  appName: string;
  appPath: string;
}

/** The caller's answer: its size when whole (an envelope, a problem), null when passed through as it streams. */
interface Answer {
  response: Response;
  size: number | null;
}

/**
 * A synchronous run's record as the run path takes it: opened at admission, closed once with the
 * answer the caller got. Which answers are runs: everything once the caller's key was accepted for
 * the project (`identified`) and the app is known to be the project's (`appKnown`), refusals included
 * (413, 415, 400, 405, 409). A refusal in between (429 over the project's run budget, 404 for an app
 * the project does not have) is a refusal: counted per project, hour and reason, never recorded
 * (src/usage/refusals.ts). A request refused before (401, 403, another project's key, an unknown
 * host) is not the project's at all.
 */
export interface Recording {
  /** The caller's key was accepted for the project: from here on, a refusal is counted. */
  identified(caller: string): void;
  /** The app is the project's: from here on, the run is on record whatever its answer. */
  appKnown(): void;
  /** Bytes of the caller's body read whole so far, as they crossed (a refused run's `bytes_in`). */
  read(bytes: number): void;
  /**
   * The run's own id, once it has one. A refusal before it (an async run's 422 for an `Idempotency-Key`
   * used with another request) gets an id of its own: a refusal about a run never takes the run's id,
   * so it can never stand in for the run's record.
   */
  named(runId: string): void;
  /** A run refused or failed before it had an answer of the app's: counted, or on record once the app was known. */
  refused(error: unknown): void;
  /**
   * The run's answer: recorded now when it is whole (the envelope, a problem), or once a passed-through
   * body has ended (read to its end, broken off, or the caller hung up); `call` is null when the app
   * gave no answer.
   */
  answered(
    runId: string,
    answered: Answer,
    call: { tally: BodyTally } | null,
    bytesIn: () => number,
    webhook: boolean,
  ): void;
  /** A WebSocket run: on record at its handshake (101); its messages are the app's and the caller's. */
  upgraded(runId: string, response: Response): Response;
  /** An async run accepted (202): its record is its consumer's, when it finishes. */
  accepted(response: Response): Response;
}

/** Whether the caller asked for an async run (read only for a refused run, whose admission did not say). */
const asksAsync = (url: string) => /[?&]async=true(&|#|$)/.test(url);

export function openRecording(scope: Scope, request: Request, target: Target): Recording {
  const started = Date.now();
  const createdAt = scope.deps.now().getTime();
  let caller: string | null = null;
  let appKnown = false;
  let bytesRead = 0;
  let ownId: string | null = null;
  // Exactly one record per run: whichever end comes first takes it.
  let done = false;
  const take = () => {
    if (done || caller === null) return false;
    done = true;
    return true;
  };
  const hungUp = () => (request.signal as AbortSignal | undefined)?.aborted === true;
  const base = (runId: string, mode: "sync" | "async" = "sync") => ({
    run_id: runId,
    project_id: target.projectId,
    app_name: target.appName,
    mode,
    method: request.method,
    path: target.appPath,
    hung_up: hungUp(),
    caller: caller!,
    request_id: scope.requestId,
    created_at: createdAt,
  });
  return {
    identified(id) {
      caller = id;
    },
    appKnown() {
      appKnown = true;
    },
    read(bytes) {
      bytesRead = bytes;
    },
    named(runId) {
      ownId = runId;
    },
    refused(error) {
      if (!take()) return;
      if (!appKnown) {
        const reason = error instanceof ApiError ? error.code : "internal_error";
        try {
          holdRefusal(scope, { projectId: target.projectId, reason, at: createdAt });
        } catch {
          // A count is worth less than the answer: nothing of counting may reach the caller.
        }
        return;
      }
      const status = error instanceof ApiError ? error.status : 500;
      const runId = ownId ?? newId("run", createdAt);
      recordRun(scope, {
        ...base(runId, asksAsync(request.url) ? "async" : "sync"),
        status_code: status,
        timed_out: status === 504,
        duration_ms: Date.now() - started,
        ttfb_ms: null,
        bytes_in: bytesRead,
        bytes_out: 0,
        webhook: false,
      });
    },
    answered(runId, answered, call, bytesIn, webhook) {
      if (!take()) return;
      const status = answered.response.status;
      if (answered.size !== null || call === null) {
        recordRun(scope, {
          ...base(runId),
          status_code: status,
          timed_out: status === 504,
          duration_ms: Date.now() - started,
          ttfb_ms: null,
          bytes_in: bytesIn(),
          bytes_out: answered.size ?? 0,
          webhook,
        });
        return;
      }
      const { tally } = call;
      // The body is the caller's stream: its end comes when the caller has read it (or hung up), while
      // the invocation is still alive for it, and the record leaves then. Not held in `waitUntil`: an
      // unread body would hold it until the idle limit.
      void tally.ended.then((how) => {
        recordRun(scope, {
          ...base(runId),
          // A cancelled answer is the caller gone: the runtime may cancel the body before it aborts
          // `request.signal` (so under `wrangler dev`), and nothing else of ours cancels it.
          hung_up: how === "cancelled" || hungUp(),
          status_code: status,
          timed_out: how === "idle",
          duration_ms: Date.now() - started,
          ttfb_ms: tally.firstByteAt === null ? null : tally.firstByteAt - started,
          bytes_in: bytesIn(),
          bytes_out: tally.bytes,
          webhook,
        });
      });
    },
    upgraded(runId, response) {
      if (take())
        recordRun(scope, {
          ...base(runId),
          status_code: response.status,
          timed_out: false,
          duration_ms: Date.now() - started,
          ttfb_ms: null,
          bytes_in: 0,
          bytes_out: 0,
          webhook: false,
        });
      return response;
    },
    accepted(response) {
      done = true;
      return response;
    },
  };
}
