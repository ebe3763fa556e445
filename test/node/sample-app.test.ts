import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { crc32, inflateSync } from "node:zlib";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/**
 * The sample app of `npm run dev` on its own (what the demo's apps are made of), checked with the clients
 * the README shows: raw event streams, a PNG decoder of our own, and the official OpenAI SDK.
 */
let app: ChildProcess;
let base: string;
/** What the app has printed so far. */
let printed = "";

beforeAll(async () => {
  app = spawn(process.execPath, ["examples/sample-app/server.mjs"], {
    env: { ...process.env, PORT: "0", TOKEN_MS: "30" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const [line] = (await once(app.stdout!, "data")) as [Buffer];
  base = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(line.toString())![1]!;
  app.stdout!.on("data", (chunk: Buffer) => (printed += chunk.toString()));
});

afterAll(() => {
  app?.kill();
});

/** The body's chunks with the time each arrived after the request was sent. */
async function chunks(response: Response) {
  const started = performance.now();
  const out: { text: string; at: number }[] = [];
  const decoder = new TextDecoder();
  for await (const chunk of response.body!) out.push({ text: decoder.decode(chunk), at: performance.now() - started });
  return out;
}

describe("the sample app", () => {
  it("streams its function's words as server-sent events one at a time when asked, and answers JSON otherwise", async () => {
    const body = JSON.stringify({ inputs: { name: "edge" } });
    const streamed = await fetch(`${base}/stream`, { method: "POST", headers: { Accept: "text/event-stream" }, body });
    expect(streamed.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const parts = await chunks(streamed);
    const events = parts
      .map((p) => p.text)
      .join("")
      .split("\n\n")
      .filter(Boolean);
    expect(events[0]).toBe('data: {"token":"Hello,"}');
    expect(events.at(-1)).toBe("event: done\ndata: {}");
    // One write per word, TOKEN_MS apart: the first arrived long before the last.
    expect(parts.length).toBeGreaterThan(5);
    expect(parts.at(-1)!.at - parts[0]!.at).toBeGreaterThan(5 * 30);
    const whole = await (await fetch(`${base}/stream`, { method: "POST", body })).json();
    expect(whole).toEqual({ text: "Hello, edge! These words come one by one, as a model writes them." });
  });

  it("fails with the status asked for, as an app's own error (Retry-After on 429 and 503), and refuses a status that is no error", async () => {
    const flat = await fetch(`${base}/fail`, { method: "POST", body: JSON.stringify({ status: 503 }) });
    expect(flat.status).toBe(503);
    expect(flat.headers.get("retry-after")).toBe("5");
    expect(await flat.json()).toEqual({ error: { message: "failed on purpose with 503", status: 503 } });
    const nested = await fetch(`${base}/fail`, { method: "POST", body: JSON.stringify({ inputs: { status: 422 } }) });
    expect(nested.status).toBe(422);
    expect(nested.headers.get("retry-after")).toBeNull();
    expect((await fetch(`${base}/fail?status=502`)).status).toBe(502);
    expect((await fetch(`${base}/fail`)).status).toBe(500);
    const refused = await fetch(`${base}/fail?status=200`);
    expect(refused.status).toBe(400);
    expect(await refused.json()).toEqual({
      error: { message: "status must be a whole number from 400 to 599, not 200" },
    });
  });

  it("answers slowly when asked, and says in its log when the caller left before the answer", async () => {
    const started = performance.now();
    const answer = await fetch(`${base}/slow?ms=300`, { method: "POST", body: JSON.stringify({ name: "slow" }) });
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    expect(await answer.json()).toMatchObject({ greeting: "Hello, slow!" });
    expect((await fetch(`${base}/slow?ms=soon`)).status).toBe(400);

    const leaving = new AbortController();
    const pending = fetch(`${base}/slow`, {
      method: "POST",
      headers: { "X-Run-Id": "run_left" },
      body: JSON.stringify({ inputs: { ms: 60_000 } }),
      signal: leaving.signal,
    }).catch((error: unknown) => error);
    await new Promise((resolve) => setTimeout(resolve, 100));
    leaving.abort();
    await pending;
    await expect
      .poll(() => printed, { timeout: 5000 })
      .toMatch(/the caller left after \d+ ms of 60000; call ended \(run_left\)/);
  });

  it("draws a valid PNG whose colour follows the name", async () => {
    const response = await fetch(`${base}/image?name=edge`);
    expect(response.headers.get("content-type")).toBe("image/png");
    const png = Buffer.from(await response.arrayBuffer());
    expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
    const found: string[] = [];
    let idat = Buffer.alloc(0);
    for (let at = 8; at < png.length;) {
      const length = png.readUInt32BE(at);
      const type = png.toString("ascii", at + 4, at + 8);
      expect(png.readUInt32BE(at + 8 + length), `CRC of ${type}`).toBe(crc32(png.subarray(at + 4, at + 8 + length)));
      if (type === "IDAT") idat = png.subarray(at + 8, at + 8 + length);
      found.push(type);
      at += 12 + length;
    }
    expect(found).toEqual(["IHDR", "IDAT", "IEND"]);
    expect(inflateSync(idat).length).toBe(64 * (1 + 64 * 3));
    const other = Buffer.from(await (await fetch(`${base}/image?name=other`)).arrayBuffer());
    expect(other.equals(png)).toBe(false);
  });

  it("serves OpenAI's API: the official SDK lists its model, completes and streams", async () => {
    const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0 });
    const models = await openai.models.list();
    expect(models.data.map((m) => m.id)).toEqual(["sample-echo"]);
    const messages = [{ role: "user" as const, content: "hello there" }];
    const completion = await openai.chat.completions.create({ model: "sample-echo", messages });
    expect(completion.choices[0]!.message.content).toBe("You said: hello there");
    const stream = await openai.chat.completions.create({ model: "sample-echo", messages, stream: true });
    const tokens: string[] = [];
    for await (const chunk of stream) tokens.push(chunk.choices[0]?.delta.content ?? "");
    expect(tokens.join("")).toBe("You said: hello there");
    expect(tokens.filter(Boolean)).toEqual(["You", " said:", " hello", " there"]);
  });
});
