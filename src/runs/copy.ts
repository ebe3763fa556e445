import { isJsonType } from "../platform/http";
import { jsonTextSyntaxOf } from "../platform/json-syntax";
import type { ApiError } from "../platform/errors";
import { concat } from "./bodies";

/**
 * The most of a passed-through body a copy holds (decoded bytes): what a webhook delivery or an async
 * run's stored result carries of it. Past it the document says `truncated: true`. An isolate has
 * 128 MB for every request it serves at once; a copy of 4 MiB (about 5.4 MiB once base64-encoded in
 * the document) leaves room for several streamed runs with webhooks side by side.
 */
export const RUN_COPY_MAX_BYTES = 4 * 1024 * 1024;

// Types whose bytes are text: carried as `text` (an event stream whole, as it was sent).
const TEXTUAL =
  /^(text\/|application\/([a-z0-9.+-]+\+)?(xml|javascript|x-www-form-urlencoded|x-ndjson|ndjson|yaml|graphql)\b|application\/[a-z0-9.+-]+\+(xml|yaml)\b)/i;

/** The bytes of an answer as they pass by, up to `RUN_COPY_MAX_BYTES`; the rest only counted. */
export class BodyCopy {
  private readonly chunks: Uint8Array[] = [];
  private kept = 0;
  truncated = false;

  add(chunk: Uint8Array): void {
    if (this.truncated) return;
    const room = RUN_COPY_MAX_BYTES - this.kept;
    if (chunk.byteLength > room) {
      this.truncated = true;
      if (room > 0) this.chunks.push(chunk.slice(0, room));
      this.kept += Math.max(room, 0);
      return;
    }
    // A copy: the caller's side may reuse or transfer the chunk once it is passed on.
    this.chunks.push(chunk.slice());
    this.kept += chunk.byteLength;
  }

  bytes(): Uint8Array {
    return concat(this.chunks, this.kept);
  }
}

export interface DocumentMeta {
  runId: string;
  status: number;
  contentType: string | null;
  runTimeMs: number;
  at: Date;
  /** Why the body ended before the app finished it (the app went silent, the connection broke). */
  error: ApiError | null;
}

function base64(bytes: Uint8Array): string {
  let binary = "";
  // In slices: `String.fromCharCode` takes its bytes as arguments, and arguments are bounded.
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

/** The body's field of the document: `result` (JSON, its exact text), `text` (textual types) or `body_base64`. */
function bodyField(bytes: Uint8Array, contentType: string | null, whole: boolean): string {
  if (bytes.byteLength === 0) return `"result":null`;
  if (isJsonType(contentType) || TEXTUAL.test(contentType ?? "")) {
    const text = new TextDecoder().decode(bytes);
    if (whole && isJsonType(contentType)) {
      const trimmed = text.trim();
      // Labelled JSON, but not: carried as the text it is. Checked without parsing (json-syntax.ts).
      if (jsonTextSyntaxOf(trimmed).valid) return `"result":${trimmed}`;
    }
    return `"text":${JSON.stringify(text)}`;
  }
  return `"body_base64":${JSON.stringify(base64(bytes))}`;
}

/**
 * The JSON document of a passed-through answer, what its webhook receives and an async run stores:
 * `run_id`, `status_code`, `content_type`, `run_time_ms`, `timestamp`, the body (`result`, `text` or
 * `body_base64`), then `truncated: true` when the body was longer than the copy holds, and `error`
 * when it broke off.
 */
export function documentOf(copy: BodyCopy, meta: DocumentMeta): string {
  const whole = !copy.truncated && meta.error === null;
  let text =
    `{"run_id":${JSON.stringify(meta.runId)},"status_code":${meta.status},"content_type":${JSON.stringify(meta.contentType)},` +
    `"run_time_ms":${meta.runTimeMs},"timestamp":${JSON.stringify(meta.at.toISOString())},${bodyField(copy.bytes(), meta.contentType, whole)}`;
  if (copy.truncated) text += `,"truncated":true`;
  if (meta.error) text += `,"error":${JSON.stringify({ code: meta.error.code, message: meta.error.message })}`;
  return `${text}}`;
}
