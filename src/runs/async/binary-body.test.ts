import { env } from "cloudflare:workers";
import { sha256Hex } from "../../platform/crypto";
import { describe, expect, it } from "vitest";
import { consume, type KeptRunAddress, keptSql, poll, startAsync } from "../../../test/async-runs";
import { client } from "../../../test/helpers";
import { PEER, received, receiver } from "../../../test/peers";
import { callWith, capturingQueue, seedRunnable } from "../../../test/runs";
import { INLINE_PAYLOAD_MAX_BYTES } from "./payloads";

const api = client();

/** Bytes 0..255, `rounds` times over: not UTF-8 (0x80 cannot begin a character). */
const everyByte = (rounds = 1) => Uint8Array.from({ length: 256 * rounds }, (_, i) => i % 256);

/** `size` random bytes (getRandomValues fills at most 64 KiB a call). */
function randomBytes(size: number): Uint8Array {
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size; i += 65536) crypto.getRandomValues(bytes.subarray(i, i + 65536));
  return bytes;
}

/** How the run's request is stored in its keeper's row (never in D1's `async_runs` since the move). */
async function stored(run: KeptRunAddress) {
  const inD1 = await env.DB.prepare("SELECT id FROM async_runs WHERE id = ?").bind(run.run_id).first();
  expect(inD1).toBeNull();
  const rows = await keptSql(
    run,
    "SELECT request_body_encoding, request_in_r2, request_body FROM async_runs WHERE id = ?",
    run.run_id,
  );
  expect(rows).toHaveLength(1);
  return rows[0] as { request_body_encoding: string; request_in_r2: number; request_body: string | null };
}

/**
 * An async run of a custom app whose origin is one of the peer's receivers, which records the bytes
 * each request brought (length, SHA-256, headers) and answers a small JSON: what the app received.
 */
async function runBinary(body: Uint8Array, type = "application/octet-stream") {
  const hook = await receiver();
  const origin = await seedRunnable(api, hook.url, "custom");
  const started = await startAsync(
    api,
    { runPath: `${origin.appPath}/v1/upload`, token: origin.token },
    { rawBody: body, headers: { "Content-Type": type } },
  );
  expect(started.response.status).toBe(202);
  const row = await stored(started.body);
  const consumed = await consume(api, started.message);
  expect(consumed.acked).toBe(true);
  const done = await poll(api, started.body.status_url, origin.token);
  const requests = await received(hook.key);
  expect(requests).toHaveLength(1);
  return { row, done, got: requests[0]! };
}

describe("async runs of custom apps with binary bodies", () => {
  it("reach the app byte for byte: a body that is not UTF-8 is stored as base64 in its row", async () => {
    const body = Uint8Array.of(137, 80, 78, 71, 13, 10, 26, 10, ...everyByte());
    const { row, done, got } = await runBinary(body, "image/png");
    expect(row).toMatchObject({ request_body_encoding: "base64", request_in_r2: 0 });
    expect(row.request_body).toBe(btoa(String.fromCharCode(...body)));
    expect(done.body.status).toBe("succeeded");
    expect(got).toMatchObject({ method: "POST", bodyLength: body.byteLength, bodySha256: await sha256Hex(body) });
    expect(got.headers["content-type"]).toBe("image/png");
    expect(got.headers["x-run-id"]).toBe(done.body.run_id);
  });

  it("count the stored base64 against the row's budget: bytes below it whose base64 is above it go to R2, and arrive intact", async () => {
    const body = randomBytes(Math.floor(INLINE_PAYLOAD_MAX_BYTES * 0.9));
    const { row, done, got } = await runBinary(body);
    expect(row).toMatchObject({ request_body_encoding: "base64", request_in_r2: 1, request_body: null });
    expect(done.body.status).toBe("succeeded");
    expect(got).toMatchObject({ bodyLength: body.byteLength, bodySha256: await sha256Hex(body) });
  });

  it("take a large binary body (5 MiB) by R2 and deliver it whole", async () => {
    const body = randomBytes(5 * 1024 * 1024);
    const { row, done, got } = await runBinary(body);
    expect(row).toMatchObject({ request_body_encoding: "base64", request_in_r2: 1 });
    expect(done.body.status).toBe("succeeded");
    expect(got).toMatchObject({ bodyLength: body.byteLength, bodySha256: await sha256Hex(body) });
  });

  it("keep a UTF-8 body as its own text, and send no Content-Type the caller did not", async () => {
    const hook = await receiver();
    const app = await seedRunnable(api, hook.url, "custom");
    const body = new TextEncoder().encode("\ufeffhé, plain text");
    const capture = capturingQueue();
    // Bytes with no Content-Type: the caller sent none.
    const response = await callWith(api, { ASYNC_RUN_QUEUE: capture.queue }, `${app.appPath}/notes?async=true`, {
      method: "POST",
      token: app.token,
      body,
    });
    expect(response.status).toBe(202);
    const accepted = (await response.json()) as { run_id: string; status_url: string };
    expect(await stored(accepted)).toMatchObject({
      request_body_encoding: "utf8",
      request_body: "\ufeffhé, plain text",
    });
    await consume(api, capture.sent[0]);
    expect((await poll(api, accepted.status_url, app.token)).body.status).toBe("succeeded");
    const [got] = await received(hook.key);
    expect(got).toMatchObject({ bodyLength: body.byteLength, bodySha256: await sha256Hex(body) });
    expect(got!.headers["content-type"]).toBeUndefined();
  });

  it("tell different binary bodies apart under one Idempotency-Key, and replay the same one", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const target = { runPath: `${app.appPath}/upload`, token: app.token };
    const send = (rawBody: string | Uint8Array) =>
      startAsync(api, target, {
        rawBody,
        headers: { "Content-Type": "application/octet-stream", "Idempotency-Key": "upload-1" },
      });
    const first = await send(everyByte());
    expect(first.response.status).toBe(202);
    const again = await send(everyByte());
    expect(again.response.status).toBe(202);
    expect(again.response.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body.run_id).toBe(first.body.run_id);
    const changed = everyByte();
    changed[255] = 0;
    const other = await send(changed);
    expect(other.response.status).toBe(422);
    expect(other.body.code).toBe("idempotency_key_reused");
    // A text body that reads as the binary body's base64 is another request too.
    const lookalike = await send(btoa(String.fromCharCode(...everyByte())));
    expect(lookalike.response.status).toBe(422);
    expect(first.sent).toHaveLength(1);
    expect([again, other, lookalike].flatMap((s) => s.sent)).toEqual([]);
  });
});
