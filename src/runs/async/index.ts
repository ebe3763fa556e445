import type { AsyncRun } from "../../db/schema";
import { ApiError } from "../../platform/errors";
import { createRouter } from "../../platform/router";
import type { Scope } from "../../platform/scope";
import { decodeCursor, page } from "../../platform/pagination";
import { admitCaller, admitRun } from "../rate-limits";
import type { RunCaller } from "../run-key";
import { insufficientScope } from "../../auth/access";
import { dropPayloads, requestKey } from "./payloads";
import { resourceText, runJson, summary } from "./resource";
import { tellIfFollowed } from "./followers";
import { followRun, lastPlaceOf } from "./stream";
import { projectRuns, type RunRows, runRowsOf } from "./rows";
import { listAsyncRuns, readAsyncRun } from "./routes";
import { listedCallers } from "../../auth/callers";

const jsonResponse = (text: string) =>
  new Response(text, { status: 200, headers: { "Content-Type": "application/json", "Cache-Control": "no-store" } });

/**
 * Whether `caller` may see a run made by `runCaller`: its own runs only, so two keys of one project
 * (two JWT subjects, two service accounts) never read, cancel or replay each other's. The operator
 * sees every run; a run made before callers were recorded (`''`) stays any key's of its project, as it
 * was when it was made, until its retention ends.
 */
const mayRead = (runCaller: string, caller: RunCaller) =>
  caller.id === "admin" || runCaller === "" || runCaller === caller.id;

/**
 * The run `runId` of `{project_id}/{app_name}` made by this caller, for a run key of that project; a 404
 * for anyone else. Admitted as a run is: the key counted against the address as a run's is, and the
 * read or cancel counted in the project's run budget (`RATE_LIMIT_RUNS`), since polling a run is traffic
 * like running one. `read` reads what the caller needs of the run: its state alone (`byState`)
 * unless the answer carries its result.
 */
async function ownRun<Run extends Pick<AsyncRun, "projectId" | "appName" | "caller">>(
  scope: Scope,
  request: Request,
  projectId: string,
  appName: string,
  runId: string,
  read: (rows: RunRows, runId: string) => Promise<Run | undefined>,
): Promise<Run> {
  const caller = await admitCaller(scope, request);
  const missing = new ApiError("not_found", `No run with id '${runId}' of app '${appName}' in project '${projectId}'.`);
  // A key of another project learns nothing about this one's runs, not even whether the id exists.
  if (caller.projectId !== undefined && caller.projectId !== projectId) throw missing;
  if (!caller.mayRun) throw insufficientScope(["runs:invoke"]);
  await admitRun(scope, projectId);
  const run = await read(runRowsOf(scope, projectId, runId), runId);
  // Another caller's run is as absent as an id that does not exist: its existence is not told either.
  if (!run || run.projectId !== projectId || run.appName !== appName || !mayRead(run.caller, caller)) throw missing;
  return run;
}

/** Reads a run's state alone: never its stored request or result. */
const byState = (rows: RunRows, runId: string) => rows.stateById(runId);

/** `GET …/runs/{run_id}`: the run's state and, once finished, its stored answer. */
export async function readRun(
  scope: Scope,
  request: Request,
  projectId: string,
  appName: string,
  runId: string,
): Promise<Response> {
  // Hono answers HEAD with the GET route: a run's state is read with GET, and HEAD is refused as on every run path.
  if (request.method === "HEAD")
    throw new ApiError("method_not_allowed", "HEAD is not allowed on an async run; use GET or DELETE.", {
      headers: { Allow: "DELETE, GET" },
    });
  const run = await ownRun(scope, request, projectId, appName, runId, (rows, id) => rows.byId(id));
  return jsonResponse(await resourceText(scope.env, run));
}

/** `GET …/runs/{run_id}` with `Accept: text/event-stream`: the run's state as it changes (`stream.ts`). */
export async function followRunStatus(
  scope: Scope,
  request: Request,
  projectId: string,
  appName: string,
  runId: string,
): Promise<Response> {
  // A bad Last-Event-ID is refused before the run is read or the request counted.
  lastPlaceOf(request);
  // Its state only: a stream never reads the stored request, and the result only for its last event.
  const run = await ownRun(scope, request, projectId, appName, runId, byState);
  return followRun(scope, request, run);
}

/** `DELETE …/runs/{run_id}`: a queued run is cancelled (again: the same 200); a running or finished one is a 409. */
export async function cancel(
  scope: Scope,
  request: Request,
  projectId: string,
  appName: string,
  runId: string,
): Promise<Response> {
  const run = await ownRun(scope, request, projectId, appName, runId, byState);
  const rows = runRowsOf(scope, projectId, runId);
  const cancelled = run.status === "queued" ? await rows.cancel(appName, runId, scope.deps.now()) : undefined;
  if (cancelled) {
    tellIfFollowed(scope, runId, "cancelled", cancelled.followed, () => runJson(cancelled, null));
    if (cancelled.requestInR2) await dropPayloads(scope.env, [requestKey(runId)]);
    return jsonResponse(runJson(cancelled, null));
  }
  // Not queued now: it may have been claimed or cancelled since it was read.
  const now = cancelled ?? (await rows.stateById(runId)) ?? run;
  if (now.status === "cancelled") return jsonResponse(runJson(now, null));
  throw new ApiError("run_not_cancellable", `The run is ${now.status}; only a queued run can be cancelled.`, {
    extensions: { run_id: runId, run_status: now.status },
  });
}

/** `GET /v2/projects/{project_id}/async-runs`: recent async runs in every state; `…/{run_id}`: one of them, its result too. */
export const asyncRunsRouter = createRouter()
  .openapi(readAsyncRun, async (c) => {
    const { project_id, run_id } = c.req.valid("param");
    const callers = listedCallers(c.get("principal"));
    const run = await runRowsOf(c.var.scope, project_id, run_id).byId(run_id);
    if (!run || run.projectId !== project_id || (callers !== undefined && !callers.includes(run.caller)))
      throw new ApiError("not_found", `No run with id '${run_id}' in project '${project_id}'.`);
    return jsonResponse(await resourceText(c.var.scope.env, run)) as never;
  })
  .openapi(listAsyncRuns, async (c) => {
    const { project_id } = c.req.valid("param");
    const { limit, cursor, status } = c.req.valid("query");
    const after = decodeCursor(cursor);
    const callers = listedCallers(c.get("principal"));
    const rows = await projectRuns(c.var.scope, project_id, { callers, status, after, limit: limit + 1 });
    const { items, nextCursor } = page(rows, limit, (r) => r.id);
    const data = items.map((run) => ({
      ...summary(run),
      duration_ms: run.startedAt && run.finishedAt ? run.finishedAt.getTime() - run.startedAt.getTime() : null,
      webhook_endpoint: run.webhookEndpoint,
    }));
    return c.json({ data, next_cursor: nextCursor }, 200);
  });
