import { createRoute, z } from "@hono/zod-openapi";
import { SSEStreamingApi } from "hono/streaming";
import { requires } from "../auth/access";
import { recordCallers } from "../auth/callers";
import { ApiError } from "../platform/errors";
import { log } from "../platform/log";
import { idParam, jsonContent, ProjectParams, SCOPED_PROBLEMS, Timestamp } from "../platform/openapi";
import { createRouter } from "../platform/router";
import type { Scope } from "../platform/scope";
import { runUrl } from "../runs/urls";
import { ledgerOf, RUNS_CHANGED } from "./ledger-client";
import { RUN_MODES } from "./run-record";

/**
 * The project's runs as they happen: the runs under way (admitted, not ended: every mode, from the
 * ledger, which learns of a run at its admission without a D1 write; src/usage/buffer.ts `holdStart`),
 * and a stream of server-sent events that says when runs started or ended, for a page that follows
 * them (the dashboard's Runs and run pages).
 *
 * The stream holds one WebSocket to the project's ledger (its watchers, src/usage/ledger-object.ts),
 * hibernated there while nothing happens. Limits it stays within: one subrequest held for its life;
 * no D1 query at all; an event at most every `EVENT_EVERY_MS` whatever the project's rate (a busy
 * project's 1,000 runs/s are one event a second); a comment every `KEEP_ALIVE_MS`; and it closes after
 * `STREAM_MAX_MS` with a `retry:` so that an EventSource reconnects in a fresh invocation (a long-held
 * request is cut when a Worker is redeployed anyway).
 */

/** Events are sent at most this often: the followers re-read what changed, so more would be wasted reads. */
export const EVENT_EVERY_MS = 1_000;
/** A comment this often keeps proxies and clients from closing an idle stream. */
export const KEEP_ALIVE_MS = 15_000;
/** How long one stream lasts before it asks the client to reconnect. */
export const STREAM_MAX_MS = 10 * 60_000;
/** What an EventSource waits before it reconnects. */
export const RECONNECT_MS = 1_000;

const UnderWayQuery = z
  .object({
    app_name: z.string().min(1).max(63).optional().openapi({ description: "Only this app's runs." }),
    run_id: idParam("run_id", "run", "run_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c")
      .optional()
      .openapi({ param: { name: "run_id", in: "query" }, description: "Only this run (an empty list once it ended)." }),
    limit: z.coerce.number().int().min(1).max(100).default(25).openapi({ description: "At most this many, 1 to 100." }),
  })
  .strict();

export const RunUnderWaySchema = z
  .object({
    run_id: z.string().openapi({ example: "run_01jd7m2q3r4s5t6v7w8x9y0z1a2b3c" }),
    app_name: z.string(),
    mode: z.enum(RUN_MODES),
    method: z.string().openapi({ example: "POST" }),
    path: z.string().openapi({ example: "run" }),
    caller: z.string().openapi({ description: "Who made the run, as a record names it; never a credential." }),
    request_id: z.string(),
    created_at: Timestamp.openapi({ description: "When the run was admitted." }),
    status_url: z.string().nullable().openapi({
      description: "An async or waited run's own state (`GET /v4/…/runs/{run_id}`); null for a synchronous run.",
    }),
  })
  .openapi("RunUnderWay");

export const listRunsUnderWay = createRoute({
  operationId: "listRunsUnderWay",
  method: "get",
  path: "/projects/{project_id}/runs/under-way",
  tags: ["Usage"],
  ...requires("usage:read"),
  summary: "List the runs under way",
  description:
    "Runs admitted and not ended yet, of every mode (a synchronous run too, while its caller waits), newest first. " +
    "A run is here about a second after its admission (its start leaves the Worker with the records' next batch) and leaves when its record is made; " +
    "a run shorter than that is never here. A run whose owner stopped without an end drops off after an hour. " +
    "A service account sees the runs it made; people with the scope see the project's.",
  request: { params: ProjectParams, query: UnderWayQuery },
  responses: {
    200: jsonContent(z.object({ data: z.array(RunUnderWaySchema) }).openapi("RunUnderWayList"), "The runs under way."),
    ...SCOPED_PROBLEMS,
  },
});

export const followProjectRuns = createRoute({
  operationId: "followProjectRuns",
  method: "get",
  path: "/projects/{project_id}/runs/events",
  tags: ["Usage"],
  ...requires("usage:read"),
  summary: "Follow the project's runs",
  description:
    "Server-sent events (`text/event-stream`, what an `EventSource` reads): an event named `runs` when runs of the project started or ended " +
    `(at most one every ${EVENT_EVERY_MS / 1000} s, however many), a comment line \`: keep-alive\` every ${KEEP_ALIVE_MS / 1000} s. ` +
    "Read the runs list and `…/runs/under-way` again on each event. The stream closes after 10 minutes with a `retry:` line; an `EventSource` reconnects by itself.",
  request: { params: ProjectParams },
  responses: {
    200: {
      description: "The stream of events.",
      content: { "text/event-stream": { schema: { type: "string" as const } } },
    },
    ...SCOPED_PROBLEMS,
  },
});

const iso = (ms: number) => new Date(ms).toISOString();

export const liveRouter = createRouter()
  .openapi(listRunsUnderWay, async (c) => {
    const { project_id } = c.req.valid("param");
    const q = c.req.valid("query");
    const now = c.var.scope.deps.now().getTime();
    const rows = await ledgerOf(c.env, project_id).underWay({
      now,
      limit: q.limit,
      app_name: q.app_name,
      run_id: q.run_id,
      callers: recordCallers(c.get("principal")),
    });
    const data = rows.map((r) => ({
      ...r,
      created_at: iso(r.created_at),
      status_url:
        r.mode === "sync" ? null : runUrl(c.req.url, { projectId: project_id, appName: r.app_name, runId: r.run_id }),
    }));
    return c.json({ data }, 200);
  })
  .openapi(followProjectRuns, async (c) => {
    const { project_id } = c.req.valid("param");
    return followRuns(c.var.scope, project_id, c.req.raw.signal);
  });

/** The events of project `projectId`'s runs until `STREAM_MAX_MS` has passed or the client left. */
export async function followRuns(scope: Scope, projectId: string, clientGone?: AbortSignal): Promise<Response> {
  const socket = await watch(scope.env, projectId);
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const sse = new SSEStreamingApi(writable, readable);
  const { sleep } = scope.deps;
  let wake: (() => void) | null = null;
  let changed = false;
  let over = false;
  const ring = () => {
    wake?.();
    wake = null;
  };
  socket.addEventListener("message", () => {
    changed = true;
    ring();
  });
  const end = () => {
    over = true;
    ring();
  };
  socket.addEventListener("close", end);
  socket.addEventListener("error", end);
  sse.onAbort(end);
  clientGone?.addEventListener("abort", end);
  const loop = async () => {
    const started = Date.now();
    let tick = sleep(KEEP_ALIVE_MS).then(() => "tick" as const);
    for (;;) {
      // A word that came while the last event was written is not waited for again.
      const woke =
        changed || over
          ? "word"
          : await Promise.race([tick, new Promise<"word">((resolve) => (wake = () => resolve("word")))]);
      if (over) return;
      if (Date.now() - started >= STREAM_MAX_MS) return;
      if (woke === "tick") {
        await sse.write(": keep-alive\n\n");
        tick = sleep(KEEP_ALIVE_MS).then(() => "tick" as const);
      }
      if (changed) {
        changed = false;
        await sse.writeSSE({ event: "runs", data: RUNS_CHANGED });
        // Whatever else changes in the next second is one event after it.
        await sleep(EVENT_EVERY_MS);
      }
    }
  };
  void loop()
    .catch((error: unknown) => log("warn", "project runs stream closed early", { project_id: projectId, error }))
    .finally(async () => {
      try {
        socket.close();
      } catch {
        // Closed by the ledger already.
      }
      try {
        await sse.write(`retry: ${RECONNECT_MS}\n\n`);
      } catch {
        // The client is gone.
      }
      await sse.close();
    });
  return new Response(sse.responseReadable, {
    status: 200,
    headers: { "Content-Type": "text/event-stream", "Cache-Control": "no-store" },
  });
}

/** A WebSocket to the ledger's watchers; a ledger that cannot be reached now is a 503 to retry. */
async function watch(env: Env, projectId: string): Promise<WebSocket> {
  try {
    const response = await ledgerOf(env, projectId).fetch("https://usage-ledger/watch", {
      headers: { Upgrade: "websocket" },
    });
    const socket = response.webSocket;
    if (!socket) throw new Error(`the ledger answered ${response.status} without a WebSocket`);
    socket.accept();
    return socket;
  } catch (error) {
    log("warn", "usage ledger unreachable for watching", { project_id: projectId, error });
    throw new ApiError("service_unavailable", "The runs' events could not be followed this time; retry.", {
      headers: { "Retry-After": "1" },
    });
  }
}
