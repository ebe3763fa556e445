/** Small facts about HTTP messages, defined once. */

const JSON_MEDIA_TYPES = /^application\/([a-z0-9.+-]+\+)?json\s*(;|$)/i;

/** `application/json` or any `application/*+json`, with or without parameters. */
export const isJsonType = (contentType: string | null | undefined): boolean =>
  Boolean(contentType && JSON_MEDIA_TYPES.test(contentType));

/** Whether a fetch failed because it was aborted or timed out (the runtime names both ways). */
export const isTimeout = (error: unknown): boolean =>
  error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError");
