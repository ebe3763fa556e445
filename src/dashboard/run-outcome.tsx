import { seg } from "./api";
import { Badge, type BadgeTone } from "./components";
import { projectPath } from "./context";
import type { RunRecordItem } from "./api-types";
import { CLIENT_CLOSED } from "../runs/outcome";

/** A run's own page in the dashboard. */
export const runPath = (projectId: string, runId: string) => projectPath(projectId, `/runs/${seg(runId)}`);

/** Whose failure a run's error was: the gateway's (its problem code) or the app's (its own status). */
export type Failure = NonNullable<RunRecordItem["failure"]>;

/** The words a run's record ends with (src/runs/outcome.ts, `RunEnding`). */
export type RecordEnding = RunRecordItem["ending"];

/** Whether a caller who left had started to get the app's answer (its status and some of its body). */
const answeredBeforeLeaving = (r: RunRecordItem) => r.status_code !== CLIENT_CLOSED && r.status_code > 0;

export function statusTone(code: number): BadgeTone {
  if (code >= 500) return "bad";
  if (code >= 400) return "warn";
  return code >= 200 && code < 300 ? "ok" : "neutral";
}

const ENDING_TEXT: Record<RecordEnding, string> = {
  error: "the gateway failed",
  answered: "the app answered, and its answer reached its end",
  hung_up: "the caller left before the answer ended; the app's call was ended",
  timeout: "the gateway's time limit ended the app's call",
  deadline: "its Cancel-After deadline passed",
  unreachable: "the app could not be reached, or its answer broke off",
  refused: "refused by the gateway before the app was called",
  interrupted: "the platform stopped its owner mid-call; never called again",
};

/** The ending in a sentence, for the run's page. */
export const endingText = (ending: RecordEnding) => ENDING_TEXT[ending];

/** Whose failure it was, in a few words: "the app's own 503", "gateway: bad_gateway". */
export function failureText(failure: Failure | null): string | null {
  if (failure === null) return null;
  return failure.by === "app" ? `the app's own ${failure.status}` : `gateway: ${failure.code}`;
}

/**
 * The Runs list's outcome cell: the status the caller got, then who failed (the app or the gateway, by
 * its problem code), or that the caller left. Colour is never the only sign: the words say it too.
 */
export function OutcomeBadge({ r }: { r: RunRecordItem }) {
  const { ending, failure } = r;
  const whose = failureText(failure);
  if (ending === "hung_up") {
    return (
      <>
        <Badge tone="warn">Caller left</Badge>
        <br />
        <span class="muted">
          {answeredBeforeLeaving(r) ? `after the app's ${r.status_code} began` : "before the answer"}; app call ended
        </span>
      </>
    );
  }
  return (
    <>
      <Badge tone={statusTone(r.status_code)}>{r.status_code}</Badge>
      {ending === "timeout" && <span class="muted"> timed out</span>}
      {ending === "deadline" && <span class="muted"> deadline</span>}
      {whose && (
        <>
          <br />
          <span class={failure?.by === "gateway" ? "whose gateway" : "whose"}>{whose}</span>
        </>
      )}
    </>
  );
}
