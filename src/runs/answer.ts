import { ApiError, problemBody, PROBLEM_CONTENT_TYPE } from "../platform/errors";
import { isJsonType } from "../platform/http";
import { jsonTextSyntaxOf } from "../platform/json-syntax";
import type { Deps } from "../platform/deps";
import { type AppCall, type AppRequest, callApp, NULL_BODY, runMeta } from "./call";
import type { RunContext } from "./context";
import { BodyCopy, documentOf } from "./copy";
import { RUN_RESPONSE_MAX_BYTES } from "./bodies";
import { passedBackHeaders } from "./headers";

/**
 * The answer stage: the app's answer becomes the caller's, either the envelope (a `cortex` app's JSON
 * to a caller who did not ask for a stream) or the app's own answer passed through as it streams. A
 * run that hands a copy on (webhook, async store) gets it here too, as a `RunAnswer`.
 */

/** A run's answer as text: what a webhook receives and an async run stores. */
export interface RunAnswer {
  status: number;
  text: string;
  contentType: string;
  /** Why the app gave no (whole) answer (502/504), when it did not. */
  failure: ApiError | null;
}

/** Whether the caller asked for an event stream (`Accept: text/event-stream`). */
const asksForStream = (accept: string | null) => accept !== null && /(^|,)\s*text\/event-stream\b/i.test(accept);

/**
 * The envelope is for a `cortex` app's JSON answer (or an answer with no type, whose body must then be
 * JSON or nothing) to a caller who did not ask for a stream; every other answer passes through.
 */
export function envelopes(call: AppCall, context: RunContext): boolean {
  if (context.runtime !== "cortex" || asksForStream(context.acceptHeader)) return false;
  const type = call.response.headers.get("content-type");
  return type === null || isJsonType(type);
}

// Statuses whose responses cannot carry a body: the envelope always has one.
export const callerStatus = (appStatus: number) =>
  NULL_BODY.has(appStatus) || appStatus < 200 || appStatus > 599 ? 200 : appStatus;

/** An app's `Retry-After` on a 429 or 503 reaches the caller with the envelope too. */
function retryAfterOf(response: Response): Record<string, string> {
  const value = response.headers.get("retry-after");
  return value !== null && (response.status === 429 || response.status === 503) ? { "Retry-After": value } : {};
}

export interface EnvelopeAnswer extends RunAnswer {
  headers: Record<string, string>;
}

/**
 * The envelope `{run_id, result, run_time_ms, timestamp}`, spliced around the app's own JSON text so
 * `result` keeps its exact bytes. The body is read whole, within `RUN_RESPONSE_MAX_BYTES` decoded.
 */
export async function envelopeAnswer(call: AppCall, context: RunContext): Promise<EnvelopeAnswer> {
  const meta = runMeta(context.runId);
  const raw = await call.text(RUN_RESPONSE_MAX_BYTES);
  if (raw === null)
    throw new ApiError("bad_gateway", `The app's answer is larger than ${RUN_RESPONSE_MAX_BYTES} bytes.`, meta);
  const text = raw.trim();
  // Checked without parsing: `result` is the app's text as it came (json-syntax.ts says why not JSON.parse).
  if (text !== "") {
    const syntax = jsonTextSyntaxOf(text);
    if (!syntax.valid)
      throw new ApiError(
        "bad_gateway",
        `The app answered ${call.response.status} with a body that is not JSON (${syntax.reason}).`,
        meta,
      );
  }
  const runTimeMs = Date.now() - call.startedAt;
  const envelope = `{"run_id":${JSON.stringify(context.runId)},"result":${text === "" ? "null" : text},"run_time_ms":${runTimeMs},"timestamp":${JSON.stringify(context.now().toISOString())}}`;
  return {
    status: callerStatus(call.response.status),
    text: envelope,
    contentType: "application/json",
    failure: null,
    headers: retryAfterOf(call.response),
  };
}

/** The problem a caller gets when the app gave no answer (502, 504, 413): its webhook receives it too. */
export function failureAnswer(error: ApiError, requestId: string): EnvelopeAnswer {
  return {
    status: error.status,
    text: JSON.stringify(problemBody(error, requestId)),
    contentType: PROBLEM_CONTENT_TYPE,
    failure: error,
    headers: {},
  };
}

/** A whole answer (envelope or problem) as the caller's response. */
export const responseOf = (answer: EnvelopeAnswer, runId: string) =>
  new Response(answer.text, {
    status: answer.status,
    headers: {
      "Content-Type": answer.contentType,
      "X-Run-Id": runId,
      "Cache-Control": "no-store",
      ...answer.headers,
      ...answer.failure?.headers,
    },
  });

const asRunError = (error: unknown, runId: string): ApiError =>
  error instanceof ApiError
    ? error
    : new ApiError("bad_gateway", "The app's answer broke off.", { ...runMeta(runId), cause: error });

/**
 * Reads the app's body to its end, copying it (bounded) beside `caller` when there is one, and returns
 * the document of the whole answer.
 *
 * Back-pressure: while the caller is connected each chunk is written to it and the next one read only
 * once the caller has taken it (`AppCall.relay`), so the caller sets the pace as on a plain
 * pass-through; the copy adds no wait of its own and holds at most `RUN_COPY_MAX_BYTES`. Nothing is
 * queued for a slow caller (a `tee()` would buffer without bound for the slower branch). Once the
 * caller has hung up, the rest is read at the app's pace into the copy only, so the webhook still
 * receives the whole answer; the run's grace after a hang-up bounds that (`cutShortAfterHangUp`).
 */
async function collect(
  call: AppCall,
  caller: WritableStreamDefaultWriter<ArrayBuffer | ArrayBufferView> | null,
  context: RunContext,
): Promise<RunAnswer> {
  const copy = new BodyCopy();
  let error: ApiError | null = null;
  let callerGone = caller === null;
  try {
    await call.relay(async (chunk) => {
      copy.add(chunk);
      if (!callerGone) await caller!.write(chunk).catch(() => (callerGone = true));
    });
  } catch (failure) {
    error = asRunError(failure, context.runId);
  }
  if (!callerGone) await (error ? caller!.abort(error) : caller!.close()).catch(() => undefined);
  const text = documentOf(copy, {
    runId: context.runId,
    status: call.response.status,
    contentType: call.response.headers.get("content-type"),
    runTimeMs: Date.now() - call.startedAt,
    at: context.now(),
    error,
  });
  return { status: call.response.status, text, contentType: "application/json", failure: error };
}

/**
 * The app's answer passed through: its status, its headers (`passedBackHeaders`), its body streamed as
 * it arrives, and `X-Run-Id`. With `copy`, the document of the answer is collected beside the stream
 * (`collect`), and resolves once the app's body ended.
 */
export function passThrough(call: AppCall, context: RunContext, copy: boolean): Pick<Answered, "response" | "copy"> {
  const headers = passedBackHeaders(call.response.headers, context.runId);
  const init = { status: call.response.status, statusText: call.response.statusText, headers };
  if (!copy) {
    // A declared length goes through the runtime's own pipe; a body of unknown length (an event
    // stream, a chunked download) is watched for silence as it passes.
    const piped = call.piped();
    // The caller is told the length the app declared, as a plain proxy would (a download's progress).
    if (piped && piped.length !== null) headers.set("Content-Length", String(piped.length));
    return { response: new Response(piped ? piped.body : call.stream(), init), copy: null };
  }
  if (call.response.body === null || NULL_BODY.has(call.response.status))
    return { response: new Response(null, init), copy: collect(call, null, context) };
  // The caller's side is the runtime's own pipe: each write waits until the caller has taken it.
  const { readable, writable } = new IdentityTransformStream();
  return { response: new Response(readable, init), copy: collect(call, writable.getWriter(), context) };
}

const utf8 = new TextEncoder();
const sizeOf = (text: string) => utf8.encode(text).byteLength;

/** The document of an answer nobody streams (an async run): the body read to its end into the copy. */
export const collectAnswer = (call: AppCall, context: RunContext): Promise<RunAnswer> => collect(call, null, context);

/** The answer stage's state: what the caller gets, and what the run gives its webhook and its outcome. */
export interface Answered {
  response: Response;
  /** The app's call it answers; null when the app gave no answer (the problem is the answer). */
  call: AppCall | null;
  /** The gateway's problem when the app gave no answer (502, 504, 413); null when `call` answered. */
  problem: ApiError | null;
  /** `Date.now()` when the app's call was sent; null when it never was. */
  calledAt: number | null;
  /** The bytes of a whole answer (the envelope, a problem); null for a passed-through one, counted as it streams. */
  size: number | null;
  /** The copy for the webhook, when one was asked for: resolves once the answer is whole. */
  copy: Promise<RunAnswer> | null;
}

/** The caller's answer to the app's: the envelope or the app's own, and a copy of it when `copy`. */
export async function answerCall(call: AppCall, context: RunContext, copy: boolean): Promise<Answered> {
  const answered = { call, problem: null, calledAt: call.startedAt };
  if (!envelopes(call, context)) return { ...passThrough(call, context, copy), ...answered, size: null };
  const answer = await envelopeAnswer(call, context);
  return {
    response: responseOf(answer, context.runId),
    ...answered,
    size: sizeOf(answer.text),
    copy: copy ? Promise.resolve(answer) : null,
  };
}

/** The answer of a run whose app gave none (502, 504, 413): the problem, for the caller and the copy alike. */
export function failed(error: ApiError, context: RunContext, calledAt: number | null): Answered {
  const answer = failureAnswer(error, context.requestId);
  return {
    response: responseOf(answer, context.runId),
    call: null,
    problem: error,
    calledAt,
    size: sizeOf(answer.text),
    copy: Promise.resolve(answer),
  };
}

/**
 * The call and the answer stages of a synchronous run: the caller's answer to the app's, or the
 * problem when the app gave none (502, 504, 413), which is the webhook's copy too. `cancel` ends the
 * app's call (the caller hung up, or a webhook run's grace after it is over).
 */
export async function callAndAnswer(
  deps: Deps,
  appRequest: AppRequest,
  context: RunContext,
  copy: boolean,
  cancel: AbortSignal,
): Promise<Answered> {
  const calledAt = Date.now();
  try {
    return await answerCall(await callApp(deps, appRequest, context.limits, cancel), context, copy);
  } catch (error) {
    if (error instanceof ApiError) return failed(error, context, calledAt);
    throw error;
  }
}

/** An answer nobody streams (an async run's), with when the app's call was sent and answered (`Date.now()`). */
export interface StoredAnswer extends RunAnswer {
  calledAt: number;
  /** When the app's response headers came; null when it gave none. */
  answeredAt: number | null;
}

/**
 * The same for a run nobody waits on (an async run): its answer as text, the envelope, the document
 * of a passed-through answer, or the problem when the app gave none. What it stores is what the
 * synchronous run would have answered, or handed its webhook.
 */
export async function answerRun(
  deps: Deps,
  appRequest: AppRequest,
  context: RunContext,
  cancel?: AbortSignal,
): Promise<StoredAnswer> {
  const calledAt = Date.now();
  let answeredAt: number | null = null;
  try {
    const call = await callApp(deps, appRequest, context.limits, cancel);
    answeredAt = call.answeredAt;
    const answer = envelopes(call, context) ? await envelopeAnswer(call, context) : await collectAnswer(call, context);
    return { ...answer, calledAt, answeredAt };
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    return { ...failureAnswer(error, context.requestId), calledAt, answeredAt };
  }
}
