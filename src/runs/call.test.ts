import { describe, expect, it } from "vitest";
import { testDeps } from "../../test/helpers";
import { ApiError } from "../platform/errors";
import { callApp, type AppRequest } from "./call";

// The call stage alone: the app is an injected fetch, so each case is one function call, no peer.
const request = (over: Partial<AppRequest> = {}): AppRequest => ({
  url: "https://app.example/base/run?a=1",
  method: "POST",
  headers: new Headers({ "content-type": "application/json", "x-run-id": "run_1" }),
  body: '{"x":1}',
  runId: "run_1",
  ...over,
});
const limits = { headersMs: 1_000, idleMs: 1_000 };
const app = (answer: (request: Request) => Response | Promise<Response>) => {
  const seen: Request[] = [];
  return { seen, deps: testDeps({ outbound: { fetch: async (r: Request) => (seen.push(r), answer(r)) } }) };
};
const failure = async (work: Promise<unknown>) => {
  const error = await work.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ApiError);
  return error as ApiError;
};

describe("the call stage (callApp → AppCall)", () => {
  it("sends the admitted request as it is, never following a redirect", async () => {
    const { seen, deps } = app(() => new Response("{}", { headers: { "content-type": "application/json" } }));
    const call = await callApp(deps, request(), limits);
    expect(seen).toHaveLength(1);
    expect([seen[0]!.method, seen[0]!.url, seen[0]!.redirect, seen[0]!.headers.get("x-run-id")]).toEqual([
      "POST",
      "https://app.example/base/run?a=1",
      "manual",
      "run_1",
    ]);
    expect(await seen[0]!.text()).toBe('{"x":1}');
    expect(call.response.status).toBe(200);
    expect(await call.text(100)).toBe("{}");
  });

  it("passes a body of a declared length through the runtime's pipe, and counts it once it is whole", async () => {
    const size = 100 * 1024;
    const { deps } = app(
      () => new Response(new Uint8Array(size).fill(7), { headers: { "content-length": String(size) } }),
    );
    const call = await callApp(deps, request({ method: "GET", body: null }), limits);
    const piped = call.piped();
    expect(piped?.length).toBe(size);
    let ended = false;
    void call.tally.ended.then(() => (ended = true));
    await Promise.resolve();
    expect(ended).toBe(false);
    expect((await new Response(piped!.body).arrayBuffer()).byteLength).toBe(size);
    expect(await call.tally.ended).toBe("done");
    expect(call.tally.bytes).toBe(size);
  });

  it("hands a small body of a declared length on as it is, counted whole at once", async () => {
    const { deps } = app(() => new Response(new Uint8Array(5000).fill(7), { headers: { "content-length": "5000" } }));
    const call = await callApp(deps, request({ method: "GET", body: null }), limits);
    const piped = call.piped();
    expect(await call.tally.ended).toBe("done");
    expect([piped?.length, call.tally.bytes]).toEqual([5000, 5000]);
    expect((await new Response(piped!.body).arrayBuffer()).byteLength).toBe(5000);
  });

  it("leaves a body of unknown length to the silence watch: no pipe", async () => {
    const { deps } = app(() => new Response("data: 1\n\n", { headers: { "content-type": "text/event-stream" } }));
    const call = await callApp(deps, request(), limits);
    expect(call.response.headers.get("content-length")).toBeNull();
    expect(call.piped()).toBeNull();
    expect(await new Response(call.stream()).text()).toBe("data: 1\n\n");
    expect(call.tally.bytes).toBe(9);
  });

  it("counts silence only while it waits for the app: a caller slower than the idle limit is not cut off", async () => {
    const { deps } = app(
      () => new Response("data: 1\n\ndata: 2\n\n", { headers: { "content-type": "text/event-stream" } }),
    );
    const call = await callApp(deps, request(), { headersMs: 1_000, idleMs: 20 });
    const body = call.stream()!;
    // The caller takes nothing for ten idle periods: the gateway waits on the caller, not on the app.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await new Response(body).text()).toBe("data: 1\n\ndata: 2\n\n");
    expect(await call.tally.ended).toBe("done");
  });

  it("reads the app's next chunk while the taker still holds the last one (two buffers take turns)", async () => {
    let asked!: () => void;
    const secondAsked = new Promise<void>((resolve) => (asked = resolve));
    let pulls = 0;
    const body = new ReadableStream({
      type: "bytes",
      pull(controller) {
        pulls++;
        if (pulls === 1) controller.enqueue(new TextEncoder().encode("one"));
        else if (pulls === 2) {
          asked();
          controller.enqueue(new TextEncoder().encode("two"));
        } else controller.close();
      },
    });
    const { deps } = app(() => new Response(body));
    const call = await callApp(deps, request(), limits);
    const taken: string[] = [];
    await call.relay(async (chunk) => {
      // "one" is held until the app was asked for more: a relay that read only after it would never end.
      if (taken.length === 0) await secondAsked;
      taken.push(new TextDecoder().decode(chunk));
    });
    expect(taken).toEqual(["one", "two"]);
    expect(call.tally.bytes).toBe(6);
  });

  it("lends each chunk until the taker is done with it, and reads into it only after that", async () => {
    const { deps } = app(() => new Response("abc"));
    const call = await callApp(deps, request(), limits);
    const lent: Uint8Array[] = [];
    await call.relay(async (chunk) => {
      lent.push(chunk);
      await new Promise((resolve) => setTimeout(resolve, 10));
      // Still the app's bytes while lent: nothing reads into the buffer before the taker is done.
      expect(new TextDecoder().decode(chunk)).toBe("abc");
    });
    expect(lent).toHaveLength(1);
    expect(call.tally.bytes).toBe(3);
  });

  it("answers 502 when the app cannot be reached, 504 when its headers do not come in time", async () => {
    const refused = app(() => Promise.reject(new TypeError("connection refused")));
    expect((await failure(callApp(refused.deps, request(), limits))).code).toBe("bad_gateway");
    const silent = app(
      (r) => new Promise((_, reject) => r.signal.addEventListener("abort", () => reject(r.signal.reason))),
    );
    const late = await failure(callApp(silent.deps, request(), { headersMs: 5, idleMs: 1_000 }));
    expect(late.code).toBe("gateway_timeout");
    expect(late.extensions).toMatchObject({ run_id: "run_1" });
  });

  it("ends the app's call at once when the run is cancelled (the caller hung up)", async () => {
    const hungUp = new AbortController();
    hungUp.abort();
    const { seen, deps } = app(
      (r) =>
        new Promise((_, reject) =>
          r.signal.aborted
            ? reject(r.signal.reason)
            : r.signal.addEventListener("abort", () => reject(r.signal.reason)),
        ),
    );
    await failure(callApp(deps, request(), limits, hungUp.signal));
    expect(seen[0]!.signal.aborted).toBe(true);
  });
});
