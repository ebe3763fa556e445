import type { z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { actingAs } from "../auth/internal";
import type { Principal } from "../auth/principal";
import type { listOf } from "../platform/openapi";
import { insideRequest, type Scope } from "../platform/scope";

/** How the dashboard reaches the management API: the Worker's own fetch, in-process, no network hop. */
export type ApiFetch = (request: Request, env: Env, ctx: ExecutionContext | undefined) => Promise<Response>;

/** A problem+json answer, reduced to what a page shows. */
export interface Problem {
  status: number;
  code: string;
  title: string;
  detail: string;
  requestId: string;
  /** Field name → message, for the form that sent it. */
  fields: Record<string, string>;
}

export type ApiResult<T> = { ok: true; status: number; data: T } | { ok: false; problem: Problem };

/** A page of a list, as every list route answers it (`listOf`, src/platform/openapi.ts): its items and the next cursor. */
export type Page<T> = Omit<z.infer<ReturnType<typeof listOf>>, "data"> & { data: T[] };

function parseJson(text: string): unknown {
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return null; // not JSON: the status alone tells the page what happened
  }
}

function toProblem(status: number, body: unknown, requestId: string): Problem {
  const b = (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
  const fields: Record<string, string> = {};
  if (Array.isArray(b.errors)) {
    for (const e of b.errors as { field?: unknown; message?: unknown }[]) {
      if (typeof e.field === "string" && typeof e.message === "string") fields[e.field] = e.message;
    }
  }
  return {
    status,
    code: typeof b.code === "string" ? b.code : "unknown",
    title: typeof b.title === "string" ? b.title : `HTTP ${status}`,
    detail: typeof b.detail === "string" ? b.detail : "The request failed.",
    requestId: typeof b.request_id === "string" ? b.request_id : requestId,
    fields,
  };
}

/** Whom the dashboard's API calls act for: the operator (their admin token) or the person signed in. */
export type Caller = { adminToken: string } | { principal: Principal };

/**
 * Calls `/v2{path}` as the session's caller, so every rule of the API (validation, roles, conflicts,
 * state changes) applies to the dashboard unchanged.
 */
export function apiClient(c: Context, apiFetch: ApiFetch, caller: Caller) {
  let ctx: ExecutionContext | undefined;
  try {
    ctx = c.executionCtx as ExecutionContext;
  } catch {
    ctx = undefined; // app.request() in tests has none
  }
  const send = (method: string, path: string, body: unknown, accept: string) => {
    const headers = new Headers({ Accept: accept });
    if ("adminToken" in caller) headers.set("Authorization", `Bearer ${caller.adminToken}`);
    if (body !== undefined) headers.set("Content-Type", "application/json");
    // The person's address, not the Worker's own: the API's per-address limit and the audit log see who acted.
    const ip = c.req.header("cf-connecting-ip");
    if (ip) headers.set("CF-Connecting-IP", ip);
    const request = new Request(new URL(`/v2${path}`, c.req.url), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if ("principal" in caller) actingAs(request, caller.principal);
    // The API call serves this page's request: it shares its id (logs, audit log, the problem shown).
    const page = (c.var as { scope?: Scope }).scope;
    if (page) insideRequest(request, page.requestId);
    return apiFetch(request, c.env as Env, ctx);
  };
  async function call<T>(method: string, path: string, body?: unknown): Promise<ApiResult<T>> {
    const response = await send(method, path, body, "application/json");
    const text = await response.text();
    const json = parseJson(text);
    if (response.ok) return { ok: true, status: response.status, data: json as T };
    return { ok: false, problem: toProblem(response.status, json, response.headers.get("x-request-id") ?? "") };
  }
  /** A `GET` whose answer is a stream (server-sent events): the API's response as it is, to pass on. */
  call.stream = (path: string) => send("GET", path, undefined, "text/event-stream");
  return call;
}

export type ApiCall = ReturnType<typeof apiClient>;

/** A path segment taken from the dashboard URL, safe to put into an API path. */
export const seg = (value: string) => encodeURIComponent(value);

/** `limit` and, when the page URL has one, the API's opaque `cursor` (the API validates it). */
export function listQuery(c: Context, limit: number): string {
  const query = new URLSearchParams({ limit: String(limit) });
  const cursor = c.req.query("cursor");
  if (cursor) query.set("cursor", cursor);
  return query.toString();
}
