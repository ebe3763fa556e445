import { ApiError, type ApiErrorOptions } from "../platform/errors";
import { toBase64 } from "../platform/encoding";
import type { RequestBodyEncoding } from "../db/schema";
/**
 * The size limits on the bodies a run carries, and the helpers that hold a body to them. Sizes always
 * count decoded bytes: the runtime decodes a `Content-Encoding: gzip` (or br) answer as it is read, so
 * a count over the body read is a count of what it expands to, never of its wire length.
 */

/** Request bodies up to this size are accepted (413 above: before the body is read when declared, else as the bytes flow). */
export const RUN_REQUEST_MAX_BYTES = 6 * 1024 * 1024;
/**
 * The 413 of a run's body over `RUN_REQUEST_MAX_BYTES`: the limit in MiB and what to do instead. The
 * limit is the same in every mode (an async or waited run's body is read whole and stored, so
 * `?async=true` does not raise it), and it counts decoded bytes (compressing the body does not help).
 */
export function bodyTooLarge(when = "The request body is larger than that.", options: ApiErrorOptions = {}): ApiError {
  const mib = RUN_REQUEST_MAX_BYTES / (1024 * 1024);
  return new ApiError(
    "payload_too_large",
    `A run's request body is limited to ${mib} MiB (${RUN_REQUEST_MAX_BYTES} bytes, counted decoded, in every mode: ` +
      `?async=true and Prefer: wait have the same limit). ${when} Send a smaller body, or put the data where the app ` +
      "can fetch it (an R2 or S3 object, a presigned URL) and send its URL in the body instead.",
    { ...options, extensions: { ...options.extensions, limit_bytes: RUN_REQUEST_MAX_BYTES } },
  );
}

/** Answers the gateway reads whole (a `cortex` JSON answer, to envelope it) up to this size, decoded; larger ones are a 502. */
export const RUN_RESPONSE_MAX_BYTES = 10 * 1024 * 1024;

/**
 * Reads a body up to `max` bytes; `null` when it is larger (the rest is not read). `read` hears how
 * many bytes crossed, whatever the outcome (a caller's body is counted as it crosses, never by its
 * header). Once `signal` aborts, the read ends (the body is cancelled) and its reason is thrown.
 */
export async function readLimited(
  body: ReadableStream<Uint8Array> | null,
  max: number,
  read?: (bytes: number) => void,
  signal?: AbortSignal,
): Promise<Uint8Array | null> {
  if (!body) return new Uint8Array();
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  const aborted =
    signal &&
    new Promise<never>((_, reject) => {
      const stop = () => {
        reader.cancel(signal.reason).catch(() => undefined);
        reject(signal.reason);
      };
      if (signal.aborted) stop();
      else signal.addEventListener("abort", stop, { once: true });
    });
  aborted?.catch(() => undefined);
  try {
    for (;;) {
      const { done, value } = await (aborted ? Promise.race([reader.read(), aborted]) : reader.read());
      if (done) break;
      size += value.byteLength;
      if (size > max) {
        await reader.cancel().catch(() => undefined);
        return null;
      }
      chunks.push(value);
    }
  } finally {
    read?.(size);
  }
  return concat(chunks, size);
}

export function concat(chunks: readonly Uint8Array[], size: number): Uint8Array {
  if (chunks.length === 1) return chunks[0]!;
  const out = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}

/** A body counted as it flows: whether it passed its limit, and who to tell when it does. */
export interface BodyLimit {
  exceeded(): boolean;
  /** The bytes that have flowed so far (the run's record counts them). */
  size(): number;
  /** `end` is called once, when the body passes the limit: it ends the app's call (the upload must not look complete). */
  onExceeded(end: () => void): void;
}

/**
 * The caller's body as it flows to the app, counted: past `max` bytes the app's call is ended and the
 * stream errors, and `exceeded()` turns true, so the run answers 413 rather than 502.
 */
export function limitedStream(
  body: ReadableStream<Uint8Array>,
  max: number,
): { stream: ReadableStream<Uint8Array>; limit: BodyLimit } {
  let size = 0;
  let over = false;
  let end = () => undefined as void;
  const counter = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      size += chunk.byteLength;
      if (size > max) {
        over = true;
        end();
        controller.error(new RangeError(`The request body is larger than ${max} bytes.`));
        return;
      }
      controller.enqueue(chunk);
    },
  });
  const limit: BodyLimit = {
    exceeded: () => over,
    size: () => size,
    onExceeded: (fn) => {
      end = fn;
    },
  };
  return { stream: body.pipeThrough(counter), limit };
}

/**
 * A body of a declared length within the limit: the runtime holds it to that length, through its own
 * pipe (a `FixedLengthStream`, piped natively, no JavaScript per chunk). It counts as its length once
 * all of it has crossed into that pipe, and as nothing before: the header is the caller's claim, never
 * a count (a body that breaks off short of it is not counted; what of it crossed is not counted by the
 * chunk, which would cost JavaScript per chunk on the fast path).
 */
export function declaredBody(
  body: ReadableStream<Uint8Array>,
  length: number,
): { stream: ReadableStream<Uint8Array>; limit: BodyLimit } {
  const pipe = new FixedLengthStream(length);
  let crossed = false;
  // A caller's body ends cleanly only once its declared length has come (HTTP frames it so); a caller
  // who breaks off errors it, and the pipe with it.
  body.pipeTo(pipe.writable).then(
    () => {
      crossed = true;
    },
    () => undefined,
  );
  return {
    stream: pipe.readable,
    limit: { exceeded: () => false, size: () => (crossed ? length : 0), onExceeded: () => undefined },
  };
}

/** The caller's body as the app will get it. */
export type RunBody =
  | { kind: "none" }
  /** Read whole: a `cortex` run's JSON object, or any body of an async run (it is stored). */
  | { kind: "bytes"; bytes: Uint8Array }
  /** A `custom` app's body, any type, streamed to it as it arrives and counted against the limit. */
  | { kind: "stream"; stream: ReadableStream<Uint8Array>; limit: BodyLimit };

/** A request body as the text a run stores (`storedBody`). */
export interface StoredBody {
  text: string;
  encoding: RequestBodyEncoding;
  /** What the text counts against a row's budget (base64 is 4/3 of the bytes). */
  storedBytes: number;
}

/**
 * A request body as the text stored with its run: its own text when it is UTF-8 (JSON, form fields,
 * text: readable in the row as sent), base64 for any other bytes (a custom app's binary upload). The
 * stored text is what counts against the row's budget, so a binary body goes to R2 past
 * `INLINE_PAYLOAD_MAX_BYTES` of base64 (about 192 KiB of bytes); within `RUN_REQUEST_MAX_BYTES` (6 MiB)
 * its base64 is at most 8 MiB, well inside an R2 object.
 */
export function storedBody(bytes: Uint8Array): StoredBody {
  try {
    // `fatal`: only well-formed UTF-8, which encodes back to exactly these bytes; `ignoreBOM` keeps a BOM.
    return {
      text: new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes),
      encoding: "utf8",
      storedBytes: bytes.byteLength,
    };
  } catch {
    const text = toBase64(bytes);
    // Base64 is ASCII: one byte a character.
    return { text, encoding: "base64", storedBytes: text.length };
  }
}
