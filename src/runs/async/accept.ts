import { ApiError, invalidField } from "../../platform/errors";
import { runUrls } from "../urls";
import type { Scope } from "../../platform/scope";
import { dropPayloads, placePayload, requestKey } from "./payloads";
import { runRowsOf } from "./rows";
import type { AsyncRunMessage } from "./message";
import type { AsyncRun } from "../../db/schema";
import type { Admission } from "../admit";
import type { AdmittedRun } from "../admitted";
import { IDEMPOTENCY_WINDOW_MS } from "../idempotency";
import { log } from "../../platform/log";
import { retry } from "../../platform/retry";

/** Queue sends tried before the caller is told to try again (nothing is left behind then). */
const QUEUE_SEND_TRIES = 2;

/**
 * The body of a 202 that hands the caller a run to follow (an async run, or a waited run handed over):
 * its id, its state, and where to read, cancel and follow it. `Location` is `status_url`.
 */
export function acceptedBody(
  requestUrl: string,
  run: Pick<AsyncRun, "id" | "status" | "projectId" | "appName">,
): {
  run_id: string;
  status: AsyncRun["status"];
  status_url: string;
  urls: { get: string; cancel: string; stream: string };
} {
  const urls = runUrls(requestUrl, { projectId: run.projectId, appName: run.appName, runId: run.id });
  return { run_id: run.id, status: run.status, status_url: urls.get, urls };
}

function accepted(
  request: Request,
  run: Pick<AsyncRun, "id" | "status" | "projectId" | "appName">,
  replayed: boolean,
): Response {
  const body = acceptedBody(request.url, run);
  const url = body.status_url;
  const headers: Record<string, string> = {
    "Content-Type": "application/json",
    Location: url,
    "X-Run-Id": run.id,
    "Cache-Control": "no-store",
  };
  if (replayed) headers["Idempotent-Replayed"] = "true";
  return new Response(JSON.stringify(body), {
    status: 202,
    headers,
  });
}

/**
 * Accepts an async run after every check a synchronous run makes (key, app, deployment, body,
 * webhook): the app's request (`appRequest`, as `appRequestOf` built it for every mode) is stored with
 * the run (`queued`), a message is queued, and the caller is answered 202 at once. With an
 * `Idempotency-Key` the same request within 24 hours answers the same run; a different request with
 * that key is a 422.
 */
export async function queueAsyncRun(scope: Scope, request: Request, admission: Admission): Promise<Response> {
  const { deps, env } = scope;
  const { run: admitted, appRequest, stored: body } = admission;
  if (admitted.mode.kind !== "async") throw new Error("queueAsyncRun takes async runs only.");
  const key = admitted.mode.key;
  // Stored as text with the run (D1 or R2): UTF-8 as it is, any other bytes (a custom app's binary
  // upload) as base64. Admission read it whole within RUN_REQUEST_MAX_BYTES of real bytes.
  if (body?.encoding === "base64" && admitted.runtime === "cortex")
    throw invalidField("body", "(root)", "must be UTF-8 JSON");
  const now = deps.now();
  const { runId } = admitted;

  // The stored text counts against the row's budget: base64 is 4/3 of the bytes (`storedBody`).
  const placed =
    body === null
      ? { inline: null, inR2: false }
      : await placePayload(env, requestKey(runId), body.text, body.storedBytes);
  const run = {
    id: runId,
    projectId: admitted.projectId,
    appName: admitted.appName,
    caller: admitted.caller,
    status: "queued" as const,
    method: appRequest.method,
    appUrl: appRequest.url,
    appPath: admitted.appPath,
    requestHeaders: JSON.stringify([...appRequest.headers]),
    requestBody: placed.inline,
    requestInR2: placed.inR2,
    requestBodyEncoding: body?.encoding ?? "utf8",
    requestId: admitted.requestId,
    idempotencyKey: key?.value ?? null,
    requestHash: key?.requestHash ?? "",
    webhookEndpoint: admitted.webhook?.endpoint ?? null,
    // Sealed under the run's id at admission; kept in its own column, forgotten once the delivery has it.
    webhookSecret: admitted.webhook?.secret ? JSON.stringify(admitted.webhook.secret) : null,
    // The admitted run, as its consumer executes it (the secret is in its column, not here).
    admitted: JSON.stringify(storedAdmitted(admitted)),
    createdAt: new Date(admitted.acceptedAt),
    // `Cancel-After`, counted from acceptance: the consumer never calls the app past it (consumer.ts).
    deadlineAt: admitted.cancelAfterMs === null ? null : new Date(admitted.acceptedAt + admitted.cancelAfterMs),
  };
  const dropBody = () => (placed.inR2 ? dropPayloads(env, [requestKey(runId)]) : Promise.resolve());

  const rows = runRowsOf(scope, admitted.projectId, runId);
  let inserted: boolean;
  try {
    inserted = await rows.insert(run);
  } catch (error) {
    // Its keeper unavailable, or its answer lost (the keeper may have written the run and stopped before
    // answering): the run is withdrawn if it was written, so nothing is left queued that no message
    // will ever run, and nothing points at a body already put in R2.
    await rows.remove(runId).catch((removal: unknown) => {
      log("error", "async run not withdrawn after its write failed", { run_id: runId, error: removal });
    });
    await dropBody();
    throw error;
  }
  if (!inserted) {
    // Only the key can clash (ids are unique): this caller took it in this project, and nothing was
    // written. Another caller's use of the same key is no clash: keys are per caller, like the runs.
    let existing = await rows.byKey(admitted.caller, key?.value ?? "");
    if (existing && existing.createdAt.getTime() <= now.getTime() - IDEMPOTENCY_WINDOW_MS) {
      // The key's 24 hours are over (the cron had not freed it yet): it now names this new run.
      await rows.releaseKey(existing.id, new Date(now.getTime() - IDEMPOTENCY_WINDOW_MS + 1));
      if (await rows.insert(run)) return send(scope, request, run, dropBody);
      existing = await rows.byKey(admitted.caller, key?.value ?? "");
    }
    await dropBody();
    if (!existing)
      throw new ApiError(
        "conflict",
        "A run with this Idempotency-Key was being changed at the same moment; retry the request.",
      );
    if (existing.requestHash !== key?.requestHash) {
      throw new ApiError(
        "idempotency_key_reused",
        `The Idempotency-Key was used for run ${existing.id} with a different request (method, app, query, webhook or body) in the last 24 hours.`,
        { extensions: { run_id: existing.id } },
      );
    }
    return accepted(request, existing, true);
  }
  return send(scope, request, run, dropBody);
}

async function send(
  scope: Scope,
  request: Request,
  run: Pick<AsyncRun, "id" | "status" | "projectId" | "appName">,
  dropBody: () => Promise<void>,
): Promise<Response> {
  const message: AsyncRunMessage = { v: 1, run_id: run.id, project_id: run.projectId };
  try {
    await retry(() => scope.env.ASYNC_RUN_QUEUE.send(message, { contentType: "json" }), { tries: QUEUE_SEND_TRIES });
    return accepted(request, run, false);
  } catch (error) {
    // Nothing may run without the caller knowing: the run is withdrawn (a message that did go out after
    // all finds no run and is dropped) and the caller told to try again.
    log("error", "async run not queued", { run_id: run.id, project_id: run.projectId, error });
  }
  await runRowsOf(scope, run.projectId, run.id).remove(run.id);
  await dropBody();
  throw new ApiError("service_unavailable", "The run could not be queued; nothing was run. Retry the request.", {
    headers: { "Retry-After": "1" },
  });
}

/** The admitted run as an async run's row keeps it: all of it but the webhook's secret (in its own column). */
const storedAdmitted = (run: AdmittedRun): AdmittedRun =>
  run.webhook === null ? run : { ...run, webhook: { endpoint: run.webhook.endpoint, secret: null } };
