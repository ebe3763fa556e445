import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { client } from "../../test/helpers";
import { PEER, received, receiver, releaseStream, watchKey, watchState, whenClosed } from "../../test/peers";
import { callWith, seedRunnable } from "../../test/runs";
import { RUN_COPY_MAX_BYTES } from "./copy";
import { RUN_REQUEST_MAX_BYTES, RUN_RESPONSE_MAX_BYTES } from "./bodies";
import { firstInDeliveryStores } from "../../test/delivery-stores";

const api = client();
const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

/** Sends `path` to the Worker as a caller would, its body still unread when this returns. */
function send(path: string, init: RequestInit = {}) {
  const ctx = createExecutionContext();
  const response = api.worker.fetch(new Request(`http://localhost${path}`, init), env, ctx);
  return { response, ctx };
}

async function waitForDelivery(key: string) {
  for (let i = 0; i < 200; i++) {
    const got = await received(key);
    if (got.length > 0) return got;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error("no delivery");
}

describe("any path of an app", () => {
  it("calls {origin_url}/{path} with the caller's query minus the gateway's parameters", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream/base`, "custom");
    const res = await api.json<{ path: string; query: [string, string][]; method: string }>(
      `${app.appPath}/v1/chat/completions?a=1&async=false&b=2`,
      { method: "PATCH", token: app.token },
    );
    expect(res.status).toBe(200);
    expect(res.body.method).toBe("PATCH");
    expect(res.body.path).toBe("/upstream/base/v1/chat/completions");
    expect(res.body.query).toEqual([
      ["a", "1"],
      ["b", "2"],
    ]);
    expect(res.headers.get("x-run-id")).toMatch(/^run_/);
  });

  it("refuses PUT on a cortex app with 405 and its Allow; HEAD with the runtime's Allow", async () => {
    const cortex = await seedRunnable(api);
    const put = await api.json(cortex.runPath, { method: "PUT", token: cortex.token });
    expect(put.status).toBe(405);
    expect(put.headers.get("allow")).toBe("GET, POST");
    const custom = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const head = await api.worker.fetch(
      new Request(`http://localhost${custom.appPath}/x`, { method: "HEAD", headers: bearer(custom.token) }),
      env,
      createExecutionContext(),
    );
    expect(head.status).toBe(405);
    expect(head.headers.get("allow")).toBe("GET, POST, PUT, PATCH, DELETE");
  });
});

describe("pass-through of the app's own answer", () => {
  it("streams an event stream: the first event reaches the caller while the app is still writing", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const key = watchKey();
    const { response, ctx } = send(`${app.appPath}/v1/chat/completions?events=3&hold=${key}&watch=${key}`, {
      method: "POST",
      headers: { ...bearer(app.token), Accept: "text/event-stream" },
    });
    const res = await response;
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    expect(res.headers.get("x-app-header")).toBe("kept");
    expect(res.headers.get("x-run-id")).toMatch(/^run_/);
    const reader = res.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first).toBe('data: {"i":0}\n\n');
    // The peer holds the rest until released: the event arrived while the answer was not finished.
    expect(await watchState(key)).toMatchObject({ finished: false, chunks: 1 });
    await releaseStream(key);
    let rest = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      rest += new TextDecoder().decode(value);
    }
    expect(rest).toBe('data: {"i":1}\n\ndata: {"i":2}\n\n');
    await waitOnExecutionContext(ctx);
  });

  it("streams a cortex function when the caller asks for text/event-stream, and passes non-JSON answers through", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream`);
    const stream = await api.worker.fetch(
      new Request(`http://localhost${app.runPath}?events=2`, {
        headers: { ...bearer(app.token), Accept: "text/event-stream" },
      }),
      env,
      createExecutionContext(),
    );
    expect(stream.headers.get("content-type")).toBe("text/event-stream");
    expect(await stream.text()).toBe('data: {"i":0}\n\ndata: {"i":1}\n\n');
    const text = await api.worker.fetch(
      new Request(`http://localhost${app.runPath}?text=1`, { headers: bearer(app.token) }),
      env,
      createExecutionContext(),
    );
    expect(text.status).toBe(200);
    expect(await text.text()).toBe("not json");
  });

  it("passes a binary image/png through byte for byte", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const res = await api.worker.fetch(
      new Request(`http://localhost${app.appPath}/images/generate?png=70000`, {
        method: "POST",
        headers: bearer(app.token),
      }),
      env,
      createExecutionContext(),
    );
    expect(res.headers.get("content-type")).toBe("image/png");
    const bytes = new Uint8Array(await res.arrayBuffer());
    expect(bytes.byteLength).toBe(70000);
    const digest = await crypto.subtle.digest("SHA-256", bytes);
    expect(Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("")).toBe(
      res.headers.get("x-image-sha256"),
    );
  });

  it("passes an app's Retry-After to the caller, passed through or enveloped", async () => {
    const custom = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const passed = await api.json(`${custom.appPath}/v1/models?status=429&retryAfter=7`, { token: custom.token });
    expect(passed.status).toBe(429);
    expect(passed.headers.get("retry-after")).toBe("7");
    const cortex = await seedRunnable(api, `${PEER}/upstream`);
    const enveloped = await api.json<{ result: unknown }>(`${cortex.runPath}?status=503&retryAfter=12`, {
      token: cortex.token,
    });
    expect(enveloped.status).toBe(503);
    expect(enveloped.headers.get("retry-after")).toBe("12");
    expect(enveloped.body.result).toBeTruthy();
  });

  it("ends the call when the app goes silent longer than RUN_STREAM_IDLE_MS, not when the stream is long", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    // 6 events 100 ms apart: 500 ms in all, longer than both limits, but never silent for 300 ms.
    const long = await callWith(
      api,
      { RUN_TIMEOUT_MS: "300", RUN_STREAM_IDLE_MS: "300" },
      `${app.appPath}/s?events=6&gap=100`,
      { token: app.token },
    );
    expect((await long.text()).match(/data:/g)).toHaveLength(6);
    const silent = await callWith(
      api,
      { RUN_TIMEOUT_MS: "1000", RUN_STREAM_IDLE_MS: "150" },
      `${app.appPath}/s?events=2&gap=1500`,
      { token: app.token },
    );
    await expect(silent.text()).rejects.toThrow();
  });
});

describe("a caller who hangs up", () => {
  it("ends the app's call at once when the run has no webhook: the app sees its connection close", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const key = watchKey();
    const hangUp = new AbortController();
    const { response } = send(`${app.appPath}/v1/chat/completions?events=3&hold=${key}&watch=${key}`, {
      method: "POST",
      headers: bearer(app.token),
      signal: hangUp.signal,
    });
    const res = await response;
    const reader = res.body!.getReader();
    await reader.read();
    // The app stalls mid-stream; the caller hangs up as the platform tells a Worker: the request's
    // signal, and its side of the answer cancelled. (The runtime's pipe the answer flows in learns of a
    // cancelled reader only at the next write, and a silent app makes none.)
    hangUp.abort();
    await reader.cancel();
    expect(await whenClosed(key)).toMatchObject({ closed: true, finished: false });
  });

  it("ends the app's call at once when the answer has a declared length and passes through the runtime's own pipe", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const key = watchKey();
    const hangUp = new AbortController();
    const { response } = send(`${app.appPath}/file?events=3&declared=1&hold=${key}&watch=${key}`, {
      headers: bearer(app.token),
      signal: hangUp.signal,
    });
    const res = await response;
    // Piped, not re-chunked: the caller is told the length the app declared.
    expect(res.headers.get("content-length")).toBe(String(3 * 'data: {"i":0}\n\n'.length));
    const reader = res.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('data: {"i":0}\n\n');
    // The app stalls mid-body; the caller hangs up (the platform aborts the request's signal).
    hangUp.abort();
    expect(await whenClosed(key)).toMatchObject({ closed: true, finished: false });
  });

  it("ends the app's call while it has not answered yet", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const key = watchKey();
    const hangUp = new AbortController();
    const { response } = send(`${app.appPath}/slow?events=1&firstAfter=5000&watch=${key}`, {
      headers: bearer(app.token),
      signal: hangUp.signal,
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    hangUp.abort();
    await response.catch(() => undefined);
    expect(await whenClosed(key)).toMatchObject({ closed: true, finished: false });
  });
});

describe("a caller who hangs up on a run with a webhook", () => {
  it("keeps the app's call: the webhook still receives the whole stream", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const hook = await receiver();
    const key = watchKey();
    const { response, ctx } = send(
      `${app.appPath}/s?events=3&hold=${key}&watch=${key}&webhookEndpoint=${encodeURIComponent(hook.url)}`,
      { headers: bearer(app.token) },
    );
    const reader = (await response).body!.getReader();
    await reader.read();
    await reader.cancel();
    await releaseStream(key);
    await waitOnExecutionContext(ctx);
    expect(await watchState(key)).toMatchObject({ finished: true, closed: false });
    expect(JSON.parse((await waitForDelivery(hook.key))[0]!.body!).text).toBe(
      'data: {"i":0}\n\ndata: {"i":1}\n\ndata: {"i":2}\n\n',
    );
  });
});

describe("request bodies of custom apps", () => {
  it("reach the app byte for byte, any content type (a multipart upload, binary)", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const form = new FormData();
    form.append("prompt", "a cat");
    form.append("image", new Blob([new Uint8Array([137, 80, 78, 71, 0, 255, 1, 2])], { type: "image/png" }), "cat.png");
    const request = new Request(`http://localhost${app.appPath}/v1/images/edits?raw=1`, {
      method: "POST",
      headers: bearer(app.token),
      body: form,
    });
    const sent = new Uint8Array(await request.clone().arrayBuffer());
    const res = await api.worker.fetch(request, env, createExecutionContext());
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe(request.headers.get("content-type"));
    expect(new Uint8Array(await res.arrayBuffer())).toEqual(sent);
  });

  it("are refused with 413 past the limit as they flow, and the app's call is ended", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const key = watchKey();
    const chunk = new Uint8Array(1024 * 1024);
    let sent = 0;
    // No Content-Length: the limit is met only as the bytes arrive.
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent++ < 8) controller.enqueue(chunk);
        else controller.close();
      },
    });
    const res = await api.worker.fetch(
      new Request(`http://localhost${app.appPath}/upload?watch=${key}`, {
        method: "POST",
        headers: bearer(app.token),
        body,
      }),
      env,
      createExecutionContext(),
    );
    expect(res.status).toBe(413);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    expect(await whenClosed(key)).toMatchObject({ closed: true, finished: false });
  });
});

describe("request bodies of a declared length", () => {
  it("are refused 413 before the app is called when the length is past the limit; within it, they reach the app whole", async () => {
    const calls: string[] = [];
    const counted = client({ outbound: { fetch: (request) => (calls.push(request.url), fetch(request)) } });
    const app = await seedRunnable(counted, `${PEER}/upstream`, "custom");
    const over = new Uint8Array(RUN_REQUEST_MAX_BYTES + 1);
    const refused = await counted.call(`${app.appPath}/upload?raw=1`, {
      method: "POST",
      token: app.token,
      rawBody: over,
      headers: { "Content-Type": "application/octet-stream", "Content-Length": String(over.byteLength) },
    });
    expect(refused.status).toBe(413);
    expect(calls).toEqual([]);
    const within = new Uint8Array(RUN_REQUEST_MAX_BYTES).fill(7);
    const passed = await counted.call(`${app.appPath}/upload?raw=1`, {
      method: "POST",
      token: app.token,
      rawBody: within,
      headers: { "Content-Type": "application/octet-stream", "Content-Length": String(within.byteLength) },
    });
    expect(passed.status).toBe(200);
    expect((await passed.arrayBuffer()).byteLength).toBe(RUN_REQUEST_MAX_BYTES);
  });
});

describe("limits count decoded bytes", () => {
  it("refuses a gzip answer that expands past the limit with 502, and goes on serving", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream`);
    const big = await api.json<{ detail: string }>(`${app.runPath}?gzip=${RUN_RESPONSE_MAX_BYTES + 1024}`, {
      token: app.token,
    });
    expect(big.status).toBe(502);
    expect(big.body.detail).toMatch(/larger than/);
    const small = await api.json<{ result: { pad: string } }>(`${app.runPath}?gzip=2000`, { token: app.token });
    expect(small.status).toBe(200);
    expect(small.body.result.pad).toHaveLength(1990);
  });

  it("passes a gzip answer through decoded, without the encoding's headers", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const res = await api.worker.fetch(
      new Request(`http://localhost${app.appPath}/x?gzip=5000`, { headers: bearer(app.token) }),
      env,
      createExecutionContext(),
    );
    expect(res.headers.get("content-encoding")).toBeNull();
    expect((await res.text()).length).toBe(5000);
  });
});

describe("webhooks of passed-through answers", () => {
  it("deliver one signed document holding the whole event stream", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const hook = await receiver([{ status: 200 }], "whsec-stream");
    const { response, ctx } = send(
      `${app.appPath}/v1/chat/completions?events=4&gap=20&webhookEndpoint=${encodeURIComponent(hook.url)}`,
      {
        method: "POST",
        headers: { ...bearer(app.token), "X-Webhook-Secret": "whsec-stream", Accept: "text/event-stream" },
      },
    );
    const res = await response;
    const streamed = await res.text();
    await waitOnExecutionContext(ctx);
    const [delivery] = await waitForDelivery(hook.key);
    const doc = JSON.parse(delivery!.body!) as Record<string, unknown>;
    expect(Object.keys(doc)).toEqual(["run_id", "status_code", "content_type", "run_time_ms", "timestamp", "text"]);
    expect(doc).toMatchObject({
      run_id: res.headers.get("x-run-id"),
      status_code: 200,
      content_type: "text/event-stream",
      text: streamed,
    });
    expect(delivery!.signatures).toMatchObject({ node: true, openssl: true });
  });

  it("carry a binary answer as body_base64, a JSON one as result, and say truncated past the bound", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const cases: [string, (doc: Record<string, unknown>) => void][] = [
      ["png=300", (doc) => expect(atob(doc.body_base64 as string).length).toBe(300)],
      ["a=1", (doc) => expect((doc.result as { method: string }).method).toBe("GET")],
      [
        `png=${RUN_COPY_MAX_BYTES + 10}`,
        (doc) => {
          expect(doc.truncated).toBe(true);
          expect(atob(doc.body_base64 as string).length).toBe(RUN_COPY_MAX_BYTES);
        },
      ],
    ];
    for (const [query, check] of cases) {
      const hook = await receiver();
      // The caller reads as it goes: the copy is collected at the caller's pace.
      const { response, ctx } = send(`${app.appPath}/x?${query}&webhookEndpoint=${encodeURIComponent(hook.url)}`, {
        headers: bearer(app.token),
      });
      await (await response).arrayBuffer();
      await waitOnExecutionContext(ctx);
      const [delivery] = await waitForDelivery(hook.key);
      check(JSON.parse(delivery!.body!) as Record<string, unknown>);
    }
  }, 30_000);

  it("keep the record pending before the app is called, for a streamed answer too", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const hook = await receiver();
    const key = watchKey();
    const { response, ctx } = send(
      `${app.appPath}/s?events=2&hold=${key}&webhookEndpoint=${encodeURIComponent(hook.url)}`,
      { headers: bearer(app.token) },
    );
    const res = await response;
    const runId = res.headers.get("x-run-id");
    const row = await firstInDeliveryStores<{ status: string }>(
      "SELECT status FROM webhook_deliveries WHERE run_id = ?",
      [runId],
      runId!,
    );
    expect(row?.status).toBe("pending");
    await releaseStream(key);
    await res.text();
    await waitOnExecutionContext(ctx);
    expect(JSON.parse((await waitForDelivery(hook.key))[0]!.body!).text).toBe('data: {"i":0}\n\ndata: {"i":1}\n\n');
  });
});
