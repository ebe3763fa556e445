/**
 * The size limits on the bodies a run carries, and the helpers that hold a body to them. Sizes always
 * count decoded bytes: the runtime decodes a `Content-Encoding: gzip` (or br) answer as it is read, so
 * a count over the body read is a count of what it expands to, never of its wire length.
 */

/** Request bodies up to this size are accepted (413 above: before the body is read when declared, else as the bytes flow). */
export const RUN_REQUEST_MAX_BYTES = 6 * 1024 * 1024;
/** Answers the gateway reads whole (a `cortex` JSON answer, to envelope it) up to this size, decoded; larger ones are a 502. */
export const RUN_RESPONSE_MAX_BYTES = 10 * 1024 * 1024;

/** Reads a body up to `max` bytes; `null` when it is larger (the rest is not read). */
export async function readLimited(body: ReadableStream<Uint8Array> | null, max: number): Promise<Uint8Array | null> {
  if (!body) return new Uint8Array();
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel().catch(() => undefined);
      return null;
    }
    chunks.push(value);
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
 * A body of a declared length within the limit: the runtime holds it to that length, so it is passed
 * as it is, through the runtime's own pipe, and counted as its length.
 */
export function declaredBody(
  body: ReadableStream<Uint8Array>,
  length: number,
): { stream: ReadableStream<Uint8Array>; limit: BodyLimit } {
  return { stream: body, limit: { exceeded: () => false, size: () => length, onExceeded: () => undefined } };
}
