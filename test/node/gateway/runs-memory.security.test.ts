import { Session } from "node:inspector/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bodyOf } from "../../../src/runs/admit";
import { envelopeAnswer } from "../../../src/runs/answer";
import type { RunContext } from "../../../src/runs/context";
import type { AppCall } from "../../../src/runs/call";
import { BodyCopy, documentOf, RUN_COPY_MAX_BYTES } from "../../../src/runs/copy";
import { RUN_REQUEST_MAX_BYTES, RUN_RESPONSE_MAX_BYTES } from "../../../src/runs/bodies";

/**
 * The attack: a body that is cheap to send and costly to parse. `{"a":[{},{},…]}` is 3 bytes per
 * object; `JSON.parse` builds every one of them (V8: about 64 bytes each, plus the arrays that grow to
 * hold them), so a 6 MiB run request allocated ~130 MiB and a 10 MiB answer ~190 MiB while the gateway
 * only checked that they were JSON: past the 128 MB an isolate has for every request it serves, and the
 * platform then ends them all.
 *
 * How it is measured: V8's sampling heap profiler, through the inspector of the isolate this test runs
 * in, counting every allocation made while the stage runs, including what the garbage collector freed
 * meanwhile (a peak, not what is left after). It runs in Node's V8 rather than workerd's, on the very
 * functions the run path calls for its checks (the admit stage's body step, the envelope, the copy's
 * document), so it fails as soon as one of them parses again: with `JSON.parse` back, each allocates
 * 10–20 times the bound below. The bodies themselves (ArrayBuffers, outside V8's heap) are not
 * counted; their size is bounded by the request and response limits, which other tests cover.
 */

const session = new Session();
beforeAll(async () => {
  session.connect();
  await session.post("HeapProfiler.enable");
});
afterAll(() => session.disconnect());

interface SampledNode {
  selfSize: number;
  children: SampledNode[];
}
const sum = (node: SampledNode): number => node.children.reduce((total, child) => total + sum(child), node.selfSize);

/** Bytes allocated on the V8 heap while `work` runs (sampled every 4 KiB, collected objects included). */
async function allocatedBy(work: () => Promise<unknown>): Promise<number> {
  await session.post("HeapProfiler.collectGarbage");
  await session.post("HeapProfiler.startSampling", {
    samplingInterval: 4096,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  await work().finally(() => undefined);
  const { profile } = await session.post("HeapProfiler.stopSampling");
  return sum(profile.head as SampledNode);
}

/** `{"a":[{},{},…]}` (or `[{},{},…]`) of at most `max` bytes, as the bytes that arrive. */
function manyObjects(max: number, wrapped: boolean): Uint8Array {
  const count = Math.floor((max - 10) / 3);
  const list = `[${"{},".repeat(count - 1)}{}]`;
  return new TextEncoder().encode(wrapped ? `{"a":${list}}` : list);
}

const MiB = 1024 * 1024;
/** What a check may allocate: small against the body, and far below what a parse of it builds. */
const BOUND = 1 * MiB;

describe("memory: a body that is cheap to send and costly to parse", () => {
  it("a 6 MiB cortex request of two million empty objects ({a:[{},{},…]}) is admitted without building them", async () => {
    const body = manyObjects(RUN_REQUEST_MAX_BYTES, true);
    const request = new Request("https://gateway.test/v4/p/a/run", {
      method: "POST",
      body,
      headers: { "Content-Type": "application/json" },
    });
    let admitted: Awaited<ReturnType<typeof bodyOf>> | undefined;
    const bytes = await allocatedBy(async () => (admitted = await bodyOf(request, "cortex", false)));
    expect(admitted).toMatchObject({ kind: "bytes" });
    expect(admitted?.kind === "bytes" && admitted.bytes.byteLength).toBe(body.byteLength);
    expect(bytes).toBeLessThan(BOUND);
  });

  it("a 10 MiB answer of [{},{},…] from a cortex app is enveloped without building its objects, its bytes kept", async () => {
    // Decoded as the runtime decodes an answer: one flat string (a string made by concatenation would be
    // copied flat by the first reader, and that copy counted against the stage).
    const text = new TextDecoder().decode(manyObjects(RUN_RESPONSE_MAX_BYTES, false));
    const call: AppCall = {
      response: new Response(null, { headers: { "Content-Type": "application/json" } }),
      startedAt: Date.now(),
      answeredAt: Date.now(),
      stream: () => null,
      relay: () => Promise.resolve(),
      piped: () => null,
      tally: { bytes: 0, firstByteAt: null, ended: Promise.resolve("done") },
      text: () => Promise.resolve(text),
    };
    const ctx: RunContext = {
      runId: "run_1",
      runtime: "cortex",
      acceptHeader: null,
      requestId: "req_1",
      now: () => new Date(),
      limits: { headersMs: 1000, idleMs: 1000 },
    };
    let envelope = "";
    const bytes = await allocatedBy(async () => (envelope = (await envelopeAnswer(call, ctx)).text));
    expect(envelope.startsWith(`{"run_id":"run_1","result":${text},"run_time_ms":`)).toBe(true);
    expect(bytes).toBeLessThan(BOUND);
  });

  it("a 4 MiB passed-through JSON answer of [{},{},…] is copied for its webhook without building its objects", async () => {
    const copy = new BodyCopy();
    copy.add(manyObjects(RUN_COPY_MAX_BYTES, false));
    const meta = {
      runId: "run_1",
      status: 200,
      contentType: "application/json",
      runTimeMs: 1,
      at: new Date(),
      error: null,
    };
    let document = "";
    // The document holds the body as text (4 MiB, one byte a character): counted, and allowed for.
    const bytes = await allocatedBy(async () => (document = documentOf(copy, meta)));
    expect(document).toContain(`"result":[{},{},`);
    expect(bytes).toBeLessThan(BOUND + RUN_COPY_MAX_BYTES);
  });
});
