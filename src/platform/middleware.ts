import { createMiddleware } from "hono/factory";
import { bodyLimit } from "hono/body-limit";
import { ApiError } from "./errors";
import { isJsonType } from "./http";
import type { AppEnv } from "./scope";

/** Management API request bodies: JSON only, at most `maxBytes` (checked before the body is read when it is declared). */
export const jsonBody = (maxBytes: number) => {
  const limit = bodyLimit({
    maxSize: maxBytes,
    onError: () => {
      throw new ApiError("payload_too_large", `Request bodies are limited to ${maxBytes} bytes.`);
    },
  });
  return createMiddleware<AppEnv>(async (c, next) => {
    const type = c.req.header("content-type");
    const length = c.req.header("content-length");
    // A body-less action (POST …/builds, …/validate) as fetch and curl send it: `Content-Length: 0`, or
    // no length, no chunking and no type; some runtimes still give an empty stream.
    const empty =
      c.req.raw.body === null ||
      length === "0" ||
      (length === undefined && !type && !c.req.header("transfer-encoding"));
    if (empty || c.req.method === "GET" || c.req.method === "HEAD") return next();
    if (!isJsonType(type)) {
      throw new ApiError(
        "unsupported_media_type",
        `Send the request body as application/json (got ${type ?? "no Content-Type"}).`,
      );
    }
    return limit(c, next);
  });
};
