import { describe, expect, it } from "vitest";
import { ApiError } from "../platform/errors";
import { asyncRequested, bodyOf } from "./admit";
import { appRequestOf } from "./app-request";
import { RUN_REQUEST_MAX_BYTES } from "./bodies";

// The admit stage's pure parts alone (the key, the limits and the deployment are the workerd tests'):
// each case is one function call on a Request, no storage.
const post = (body: BodyInit, headers: Record<string, string> = {}) =>
  new Request("https://gateway.test/v4/p/a/run", { method: "POST", body, headers });
const refusal = async (work: Promise<unknown>) =>
  (
    (await work.then(
      () => null,
      (e: unknown) => e,
    )) as ApiError
  ).code;

describe("the admit stage (admit → AdmittedRun)", () => {
  it("takes a cortex body as its exact bytes once it is a JSON object; refuses anything else", async () => {
    const admitted = await bodyOf(post('{"a": [1]}', { "content-type": "application/json" }), "cortex", false);
    expect(admitted.kind === "bytes" && new TextDecoder().decode(admitted.bytes)).toBe('{"a": [1]}');
    expect(await refusal(bodyOf(post("[1]", { "content-type": "application/json" }), "cortex", false))).toBe(
      "validation_failed",
    );
    expect(await refusal(bodyOf(post("{", { "content-type": "application/json" }), "cortex", false))).toBe(
      "malformed_json",
    );
    expect(await refusal(bodyOf(post("hi", { "content-type": "text/plain" }), "cortex", false))).toBe(
      "unsupported_media_type",
    );
  });

  it("hands a custom app's body on as a stream: as it is with a declared length, counted without one; past the limit a 413 before reading", async () => {
    const declared = await bodyOf(post("abc", { "content-length": "3" }), "custom", false);
    // Counted once it has crossed, never by its header.
    expect(declared.kind === "stream" && declared.limit.size()).toBe(0);
    if (declared.kind === "stream") expect(await new Response(declared.stream).text()).toBe("abc");
    expect(declared.kind === "stream" && declared.limit.size()).toBe(3);
    const chunked = await bodyOf(post(new Response("abcd").body!), "custom", false);
    expect(chunked.kind).toBe("stream");
    if (chunked.kind === "stream") await new Response(chunked.stream).arrayBuffer();
    expect(chunked.kind === "stream" && chunked.limit.size()).toBe(4);
    expect(
      await refusal(bodyOf(post("x", { "content-length": String(RUN_REQUEST_MAX_BYTES + 1) }), "custom", false)),
    ).toBe("payload_too_large");
  });

  it("reads ?async as true or false only, once", () => {
    expect(asyncRequested(null)).toBe(false);
    expect(asyncRequested(new URLSearchParams("async=true"))).toBe(true);
    expect(asyncRequested(new URLSearchParams("async=false"))).toBe(false);
    expect(() => asyncRequested(new URLSearchParams("async=yes"))).toThrow(ApiError);
    expect(() => asyncRequested(new URLSearchParams("async=true&async=true"))).toThrow(ApiError);
  });

  it("makes the app's request: {origin_url}/{path} with the query but the gateway's own, without the caller's credentials", () => {
    const request = new Request("https://gateway.test/v4/p/a/v1/x?q=1&async=false&webhookEndpoint=h", {
      headers: { authorization: "Bearer egsa_x", cookie: "c=1", "x-webhook-secret": "s", "x-app": "kept" },
    });
    const appRequest = appRequestOf(request, {
      runId: "run_1",
      appPath: "v1/x",
      originUrl: "https://app.example/base/",
      runtime: "cortex",
      query: new URLSearchParams("q=1&async=false&webhookEndpoint=h"),
      body: { kind: "none" },
      kind: "sync",
    });
    expect(appRequest.url).toBe("https://app.example/base/v1/x?q=1");
    for (const name of ["authorization", "cookie", "x-webhook-secret"])
      expect(appRequest.headers.has(name), name).toBe(false);
    expect([
      appRequest.headers.get("x-app"),
      appRequest.headers.get("x-run-id"),
      appRequest.headers.get("accept"),
    ]).toEqual(["kept", "run_1", "application/json"]);
  });
});
