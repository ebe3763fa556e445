import { describe, expect, it } from "vitest";
import { ApiError } from "../platform/errors";
import { answerCall, failed } from "./answer";
import type { AppCall } from "./call";
import type { RunContext } from "./context";

// The answer stage alone: the app's call is a made-up AppCall, so each case is one function call.
const run = (over: Partial<RunContext> = {}): RunContext => ({
  runId: "run_1",
  runtime: "cortex",
  acceptHeader: "application/json",
  requestId: "req_1",
  now: () => new Date("2026-11-25T00:00:00.000Z"),
  limits: { headersMs: 1_000, idleMs: 1_000 },
  ...over,
});
function appCall(body: string, headers: Record<string, string>, status = 200): AppCall {
  const response = new Response(body, { status, headers });
  return {
    response,
    startedAt: Date.now(),
    answeredAt: Date.now(),
    stream: () => response.body,
    relay: async (sink) => {
      if (!response.body) return;
      for await (const chunk of response.body) await sink(chunk);
    },
    piped: () => null,
    tally: { bytes: 0, firstByteAt: null, ended: Promise.resolve("done") },
    text: () => response.text(),
  };
}

describe("the answer stage (answerCall → Answered)", () => {
  it("envelopes a cortex app's JSON, its bytes untouched, the app's status and Retry-After kept", async () => {
    const answered = await answerCall(
      appCall('{"b": 1,  "a":2}', { "content-type": "application/json", "retry-after": "7" }, 429),
      run(),
      false,
    );
    expect(answered.response.status).toBe(429);
    expect(answered.response.headers.get("retry-after")).toBe("7");
    expect(answered.response.headers.get("x-run-id")).toBe("run_1");
    expect(await answered.response.text()).toMatch(
      /^\{"run_id":"run_1","result":\{"b": 1, {2}"a":2\},"run_time_ms":\d+,"timestamp":"2026-11-25T00:00:00.000Z"\}$/,
    );
    expect(answered.copy).toBeNull();
  });

  it("passes through what is not a cortex app's JSON to a caller who did not ask for a stream", async () => {
    for (const [ctx, type] of [
      [run({ runtime: "custom" }), "application/json"],
      [run({ acceptHeader: "text/event-stream" }), "application/json"],
      [run(), "image/png"],
    ] as const) {
      const answered = await answerCall(
        appCall("raw", { "content-type": type, "set-cookie": "a=b", "x-app": "kept" }, 201),
        ctx,
        false,
      );
      expect(answered.response.status).toBe(201);
      expect(await answered.response.text()).toBe("raw");
      expect([
        answered.response.headers.get("x-app"),
        answered.response.headers.get("set-cookie"),
        answered.response.headers.get("x-run-id"),
      ]).toEqual(["kept", null, "run_1"]);
      expect(answered.size).toBeNull();
    }
  });

  it("hands on a copy of a passed-through answer as its document, once the caller's stream ended", async () => {
    const answered = await answerCall(
      appCall("data: 1\n\n", { "content-type": "text/event-stream" }),
      run({ runtime: "custom" }),
      true,
    );
    expect(await answered.response.text()).toBe("data: 1\n\n");
    const copy = await answered.copy!;
    expect(JSON.parse(copy.text)).toMatchObject({
      run_id: "run_1",
      status_code: 200,
      content_type: "text/event-stream",
      text: "data: 1\n\n",
    });
  });

  it("answers 502 for a cortex answer labelled JSON that is not, and makes a problem the answer and the copy of a run the app did not answer", async () => {
    await expect(
      answerCall(appCall("{nope", { "content-type": "application/json" }), run(), false),
    ).rejects.toMatchObject({ code: "bad_gateway" });
    const answered = failed(
      new ApiError("gateway_timeout", "No answer.", { extensions: { run_id: "run_1" } }),
      run(),
      null,
    );
    expect(answered.response.status).toBe(504);
    expect(answered.response.headers.get("content-type")).toBe("application/problem+json");
    expect(JSON.parse((await answered.copy!).text)).toMatchObject({
      status: 504,
      request_id: "req_1",
      run_id: "run_1",
    });
  });
});
