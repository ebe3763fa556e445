import { createMiddleware } from "hono/factory";
import { bodyLimit } from "hono/body-limit";
import { createDb } from "../db/client";
import type { AppEnv, Deps } from "./context";
import { getConfig } from "./env";
import { ApiError } from "./errors";
import { newId } from "./ids";

/** A fresh id for every request, echoed as `X-Request-Id` and quoted in every problem. */
export const requestId = createMiddleware<AppEnv>(async (c, next) => {
  c.set("requestId", newId("req"));
  await next();
  c.res.headers.set("X-Request-Id", c.get("requestId"));
});

/** Validated configuration, database and outside services for the handlers. */
export const services = (deps: Deps) =>
  createMiddleware<AppEnv>(async (c, next) => {
    c.set("deps", deps);
    c.set("config", getConfig(c.env));
    c.set("db", createDb(c.env.DB));
    await next();
  });

const JSON_TYPE = /^application\/([a-z0-9.+-]+\+)?json\s*(;|$)/i;

/** Management API request bodies: JSON only, at most `maxBytes` (checked before the body is read when it is declared). */
export const jsonBody = (maxBytes: number) => {
  const limit = bodyLimit({
    maxSize: maxBytes,
    onError: () => {
      throw new ApiError("payload_too_large", `Request bodies are limited to ${maxBytes} bytes.`);
    },
  });
  return createMiddleware<AppEnv>(async (c, next) => {
    if (c.req.raw.body === null || c.req.method === "GET" || c.req.method === "HEAD") return next();
    const type = c.req.header("content-type");
    // An action without a body (POST …/validate) sent by curl or fetch: some runtimes still give it an empty stream.
    if (!type && (c.req.header("content-length") ?? "0") === "0" && !c.req.header("transfer-encoding")) return next();
    if (!type || !JSON_TYPE.test(type)) {
      throw new ApiError("unsupported_media_type", `Send the request body as application/json (got ${type ?? "no Content-Type"}).`);
    }
    return limit(c, next);
  });
};
