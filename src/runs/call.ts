import type { Deps } from "../platform/deps";
import { ApiError } from "../platform/errors";
import { isTimeout } from "../platform/http";
import type { CallLimits } from "./context";
import type { BodyTally } from "../usage/record";
import { type BodyLimit, readLimited } from "./bodies";

/** What the gateway sends the app: built by the admit stage, the same for a synchronous run and the async consumer. */
export interface AppRequest {
  target: string;
  method: string;
  headers: Headers;
  body: BodyInit | null;
  runId: string;
  /** The caller's streamed body's limit: past it the call ends, and answers 413 rather than 502. */
  bodyLimit?: BodyLimit;
}

/** The app's answer: its status and headers, and its body read one of two ways. */
export interface AppCall {
  /** The app's own response; read its body through `stream()` or `text()`, never directly. */
  response: Response;
  /** `Date.now()` when the call was sent: a run's `run_time_ms` counts from here. */
  startedAt: number;
  /** The body, decoded, passed on chunk by chunk as it arrives, under the silence timer; `null` for none. */
  stream(): ReadableStream<Uint8Array> | null;
  /**
   * The body through the runtime's own pipe, for an answer of a declared length passed on as it is:
   * no JavaScript touches its chunks, and no silence timer watches it (`docs/run-proxy.md` says what
   * a stall then costs and what bounds it). `null` when the answer has no declared length. The
   * `tally` ends with the pipe, counting the declared length once it is whole (a small body's at once).
   */
  piped(): { body: ReadableStream<Uint8Array> | null; length: number | null } | null;
  /**
   * What `stream()` or `piped()` passed on, for the run's record: counted in the read the stream does
   * anyway, so it adds no step of its own; ends at once for a body-less answer.
   */
  tally: BodyTally;
  /** The whole body as text when it is at most `max` decoded bytes; `null` when larger (the call is then ended). */
  text(max: number): Promise<string | null>;
}

export const runMeta = (runId: string) => ({ extensions: { run_id: runId }, headers: { "X-Run-Id": runId } });

/** The problem of a stream that stayed silent too long: its error, seen by whoever reads the body. */
export class StreamIdle extends ApiError {
  constructor(idleMs: number, runId: string) {
    super("gateway_timeout", `The app sent nothing for ${idleMs} ms in the middle of its answer.`, runMeta(runId));
  }
}

/** Largest read of the app's body at once: what arrived meanwhile comes in one chunk (see `watchSilence`). */
const READ_BYTES = 256 * 1024;
/** The first read's size, and the size a read falls back to when what arrives is small. */
const FIRST_READ_BYTES = 16 * 1024;

/**
 * The size of the read after one of `size` bytes that brought `got`: four times larger when it came
 * back full (a fast body), back to the first size when it came back under a quarter full (a trickle).
 * A pending read holds its buffer while the app is silent, so a slow stream holds 16 KiB, not 256.
 */
const nextReadSize = (size: number, got: number) =>
  got === size ? Math.min(size * 4, READ_BYTES) : got * 4 < size ? FIRST_READ_BYTES : size;

/**
 * The body as it arrives, with a watch that ends the call when the app stays silent `idleMs` between
 * chunks: a stream may run as long as it keeps talking. Nothing is held: each read returns at once with
 * what has arrived (a token of an event stream as soon as it comes), up to the read's size (growing to
 * READ_BYTES while reads come back full), so a fast body crosses into JavaScript in large pieces instead
 * of one per network packet, and each chunk passed on is exactly the bytes read. A read only notes its
 * time; one timer looks at that time when it fires and sets itself again for the rest of the period,
 * so the run ends between `idleMs` and 2 × `idleMs` after the last chunk at worst. Under back-pressure
 * (a slow caller) nothing is read ahead: a read happens only when the caller's side pulls.
 */
function watchSilence(
  body: ReadableStream<Uint8Array>,
  idleMs: number,
  end: (reason: unknown) => void,
  runId: string,
  over: () => void,
  tally?: { count(bytes: number): void; settle(how: "done" | "cancelled" | "idle" | "broken"): void },
): ReadableStream<Uint8Array> {
  const reader = body.getReader({ mode: "byob" });
  let readSize = FIRST_READ_BYTES;
  let timer: ReturnType<typeof setTimeout> | null = null;
  let lastReadAt = Date.now();
  const disarm = () => {
    if (timer !== null) clearTimeout(timer);
    timer = null;
  };
  // A plain stream, not `type: "bytes"`: workerd hands a default reader of a byte stream each chunk in
  // a 4 KiB buffer of its own, so a 16-byte event held 4 KiB; a plain stream hands on the chunk itself.
  // The high-water mark of 0 keeps the rule below: nothing is read before someone asks for it.
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        const look = () => {
          const quietMs = Date.now() - lastReadAt;
          if (quietMs < idleMs) {
            timer = setTimeout(look, idleMs - quietMs);
            return;
          }
          timer = null;
          const idle = new StreamIdle(idleMs, runId);
          controller.error(idle);
          void reader.cancel(idle).catch(() => undefined);
          end(idle);
          tally?.settle("idle");
        };
        timer = setTimeout(look, idleMs);
      },
      async pull(controller) {
        const size = readSize;
        let read: ReadableStreamReadResult<Uint8Array>;
        try {
          read = await reader.read(new Uint8Array(size));
        } catch (error) {
          tally?.settle("broken");
          throw error;
        }
        const { done, value } = read;
        lastReadAt = Date.now();
        if (done) {
          disarm();
          over();
          tally?.settle("done");
          controller.close();
          return;
        }
        readSize = nextReadSize(size, value.byteLength);
        if (value.byteLength > 0) tally?.count(value.byteLength);
        // What is passed on holds only the bytes that arrived: a view of a part of the read's buffer would
        // keep the whole buffer alive for as long as anyone holds the chunk (a caller's queue, a copy).
        if (value.byteLength === size) controller.enqueue(value);
        else if (value.byteLength > 0) controller.enqueue(value.slice());
      },
      // The reader went away (the caller hung up): the timer must not outlive the call.
      cancel(reason) {
        disarm();
        over();
        tally?.settle("cancelled");
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}

/**
 * Calls the app. Hand-written rather than `hono/proxy`: the headers each way follow the gateway's own
 * rules (`upstreamHeaders`, `passedBackHeaders`: credentials, the webhook secret and headers that would
 * act on the shared hostname stay out), the envelope path reads the answer without a re-wrapped
 * Response, and a run is one Request and one Response, not two of each.
 *
 * `RUN_TIMEOUT_MS` bounds the wait for the response headers (504); after them, only silence longer than
 * `idleMs` ends the call. `cancel` ends it at once: the caller hung up (a run without a webhook), or
 * its grace after a hang-up is over (a run with one). Redirects are not followed: the caller's headers
 * must not travel to wherever the app points.
 *
 * Platform limits relied on: the call holds one of the invocation's 6 simultaneous outbound
 * connections for as long as the body flows (a webhook run opens its second, the queue send, only after
 * the answer ended); nothing of a passed-through body is held, so a stream of any length stays within
 * the isolate's 128 MB; Cloudflare cancels a request's work when its caller hangs up, and this ends the
 * app's call itself at that moment rather than leaving the connection to be torn down later.
 */
export async function callApp(deps: Deps, req: AppRequest, limits: CallLimits, cancel?: AbortSignal): Promise<AppCall> {
  const meta = runMeta(req.runId);
  const controller = new AbortController();
  const { signal } = controller;
  const end = (reason: unknown) => controller.abort(reason);
  // A timer of our own, cleared once the headers are in: `AbortSignal.timeout` would leave one pending
  // for the whole timeout after every run.
  const timer = setTimeout(
    () => end(new DOMException(`No answer within ${limits.headersMs} ms`, "TimeoutError")),
    limits.headersMs,
  );
  const onCancel = () => end(cancel?.reason ?? new DOMException("The run was ended", "AbortError"));
  if (cancel?.aborted) onCancel();
  else cancel?.addEventListener("abort", onCancel, { once: true });
  req.bodyLimit?.onExceeded(() => end(new DOMException("The request body passed the run's limit", "AbortError")));
  const startedAt = Date.now();
  let response: Response;
  try {
    response = await deps.outbound.fetch(
      new Request(req.target, { method: req.method, headers: req.headers, body: req.body, signal, redirect: "manual" }),
    );
  } catch (error) {
    cancel?.removeEventListener("abort", onCancel);
    if (req.bodyLimit?.exceeded())
      throw new ApiError(
        "payload_too_large",
        "The request body is larger than the run's limit; the app's call was ended.",
        meta,
      );
    // The run's own reason to end the call (its deadline, `deadline.ts`) is the caller's problem as it is.
    if (signal.reason instanceof ApiError) throw signal.reason;
    if (isTimeout(error) || signal.aborted)
      throw new ApiError("gateway_timeout", `The app did not answer within ${limits.headersMs} ms.`, meta);
    throw new ApiError("bad_gateway", "The app could not be reached.", { ...meta, cause: error });
  } finally {
    clearTimeout(timer);
  }
  // The cancel listener stays while the body flows (a hang-up mid-stream ends the call too) and goes with it.
  const over = () => cancel?.removeEventListener("abort", onCancel);
  /** What a broken read of the body means for the caller. */
  const brokenOff = (error: unknown): ApiError => {
    if (signal.reason instanceof ApiError) return signal.reason;
    if (error instanceof ApiError) return error;
    if (signal.aborted || isTimeout(error))
      return new ApiError("gateway_timeout", "The app's answer was cut off by the run's time limits.", meta);
    return new ApiError("bad_gateway", "The app's answer broke off.", { ...meta, cause: error });
  };
  const raw = response;
  const empty = raw.body === null || NULL_BODY.has(raw.status);
  if (empty) {
    await raw.body?.cancel().catch(() => undefined);
    over();
  }
  let settle: (how: "done" | "cancelled" | "idle" | "broken") => void = () => undefined;
  const length = raw.headers.get("content-length");
  const tally: BodyTally = { bytes: 0, firstByteAt: null, ended: new Promise((resolve) => (settle = resolve)) };
  if (empty) settle("done");
  const counting = {
    count(bytes: number) {
      tally.firstByteAt ??= Date.now();
      tally.bytes += bytes;
    },
    settle,
  };
  return {
    response: raw,
    startedAt,
    tally,
    stream: () => (empty ? null : watchSilence(raw.body!, limits.idleMs, end, req.runId, over, counting)),
    piped() {
      if (empty) return { body: null, length: null };
      if (length === null) return null;
      // The runtime decodes gzip and br as it reads, and then the declared (wire) length is not the body's.
      const declared = raw.headers.has("content-encoding") ? null : Number(length);
      const fixed = declared !== null && Number.isSafeInteger(declared) ? declared : null;
      if (fixed !== null && fixed <= SEEN_AT_ONCE_BYTES) {
        // A small body (an image, a JSON document) is handed on as it is: it follows its headers at once,
        // so it is counted whole now. Watching its end would cost a pipe per run (`npm run bench`, runcost).
        // The hang-up listener stays: a caller who goes while the app stalls mid-body still ends its call.
        tally.bytes = fixed;
        settle("done");
        return { body: raw.body, length: fixed };
      }
      const pipe = fixed !== null ? new FixedLengthStream(fixed) : new IdentityTransformStream();
      raw
        .body!.pipeTo(pipe.writable)
        .then(
          () => {
            // Whole: the declared length crossed (the wire length of an encoded answer).
            tally.bytes = Number(length);
            settle("done");
          },
          () => settle(cancel?.aborted ? "cancelled" : "broken"),
        )
        .finally(over);
      return { body: pipe.readable, length: fixed };
    },
    async text(max) {
      if (empty) return "";
      // A declared length is the decoded length only when nothing was encoded (the runtime decodes gzip
      // and br as it reads, and the header keeps the wire length).
      const length = raw.headers.has("content-encoding") ? null : raw.headers.get("content-length");
      const declared = length === null ? null : Number(length);
      try {
        if (declared !== null && declared > max) {
          await raw.body!.cancel().catch(() => undefined);
          return null;
        }
        if (declared !== null && Number.isFinite(declared)) {
          // The common case, a declared length within the limit: the runtime reads it in one go, far
          // cheaper than a chunk loop in JavaScript; one silence timer covers the whole read.
          const idle = setTimeout(() => end(new StreamIdle(limits.idleMs, req.runId)), limits.idleMs);
          try {
            return await raw.text();
          } finally {
            clearTimeout(idle);
          }
        }
        const bytes = await readLimited(
          watchSilence(raw.body!, limits.idleMs, end, req.runId, () => undefined),
          max,
        );
        if (bytes === null) end(new DOMException("The answer is larger than the gateway reads", "AbortError"));
        return bytes === null ? null : new TextDecoder().decode(bytes);
      } catch (error) {
        throw brokenOff(error);
      } finally {
        over();
      }
    },
  };
}

/**
 * Bodies of a declared length up to this size are counted whole when their headers come, not when the
 * caller has read them: within a few network reads of the headers, their end adds nothing a record
 * needs. Larger ones go through a pipe that tells when they ended (a download's duration, a hang-up).
 */
const SEEN_AT_ONCE_BYTES = 64 * 1024;

/** Statuses whose responses carry no body. */
export const NULL_BODY: ReadonlySet<number> = new Set([204, 205, 304]);
