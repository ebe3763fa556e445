import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, request, type Server } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { convertV4MiniflareOptions, Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
// @ts-expect-error: plain JavaScript modules of `npm run dev`, without declarations
import { formatLine, startFront } from "../../scripts/dev/front.mjs";
// @ts-expect-error: as above
import { formatLog, MIGRATE_ENV, migrationsSummary, parseInspected } from "../../scripts/dev/logs.mjs";

/**
 * The front of `npm run dev` (scripts/dev/front.mjs) before a real workerd: a caller who closes its
 * connection (a FIN, as `curl --max-time` does) while the Worker waits reaches the Worker as
 * `request.signal`, which workerd alone would not notice; and the terminal's one line per request.
 */
let mf: Miniflare;
let witness: Server;
let front: { port: number; close(): Promise<void> };
let origin: string;
const aborted: string[] = [];
const lines: string[] = [];

// Waits for its signal or 20 s; tells the witness when its signal fired (in waitUntil: the request is gone).
const WORKER = `export default {
  async fetch(request, env, ctx) {
    const id = new URL(request.url).searchParams.get("id");
    request.signal.addEventListener("abort", () => ctx.waitUntil(fetch(env.WITNESS + "/" + id)));
    if (new URL(request.url).pathname === "/fast") return Response.json({ ok: true }, { headers: { "X-Run-Id": "run_1" } });
    if (new URL(request.url).pathname === "/body")
      return Response.json({ body: request.body === null ? null : await request.text(), length: request.headers.get("content-length") });
    await new Promise((resolve) => { const t = setTimeout(resolve, 20000); request.signal.addEventListener("abort", () => (clearTimeout(t), resolve())); });
    return new Response("late");
  },
};`;

beforeAll(async () => {
  witness = createServer((req, res) => {
    aborted.push(req.url!.slice(1));
    res.end();
  });
  await new Promise<void>((resolve) => witness.listen(0, "127.0.0.1", resolve));
  mf = new Miniflare(
    convertV4MiniflareOptions({
      host: "127.0.0.1",
      port: 0,
      workers: [
        {
          name: "probe",
          modules: true,
          script: WORKER,
          compatibilityDate: "2026-10-01",
          compatibilityFlags: ["enable_request_signal"],
          bindings: { WITNESS: `http://127.0.0.1:${(witness.address() as AddressInfo).port}` },
        },
      ],
    }),
  );
  origin = (await mf.ready).origin;
  front = await startFront({ port: 0, target: async () => origin, print: (line: string) => lines.push(line) });
}, 60_000);

afterAll(async () => {
  await front?.close();
  await mf?.dispose();
  witness?.close();
});

/** A request through the front that the client closes (FIN, not RST) after `ms`, as curl --max-time does. */
function leaveAfter(path: string, ms: number) {
  return new Promise<void>((resolve) => {
    const req = request({ host: "127.0.0.1", port: front.port, path, method: "POST" }, () => undefined);
    req.on("error", () => resolve());
    req.end("{}");
    setTimeout(() => {
      req.socket?.end();
      req.socket?.destroy();
      resolve();
    }, ms);
  });
}

describe("the dev front", () => {
  it("passes a caller's hang-up before the answer on to the Worker: request.signal fires", async () => {
    await leaveAfter("/slow?id=left", 200);
    await expect.poll(() => aborted, { timeout: 10_000 }).toContain("left");
    await expect.poll(() => lines.join("\n")).toMatch(/--- POST \/slow\?id=left \d+ ms caller left before the answer/);
  });

  it("leaves a request that is answered alone, and prints it as one line with its ids", async () => {
    const answer = await fetch(`http://127.0.0.1:${front.port}/fast?id=served`);
    expect(await answer.json()).toEqual({ ok: true });
    expect(answer.headers.get("x-run-id")).toBe("run_1");
    await expect.poll(() => lines.join("\n")).toMatch(/ 200 GET \/fast\?id=served \d+ ms run_1$/m);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(aborted).not.toContain("served");
  });

  it("passes a request on as it came: no body stays no body, a body its bytes", async () => {
    // What `curl -X POST` sends: no Content-Length, no Transfer-Encoding, no body. The Worker sees what it
    // sees without the front in between.
    const raw = (port: number) =>
      new Promise<string>((resolve) => {
        const socket = connect(port, "127.0.0.1", () =>
          socket.write("POST /body HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"),
        );
        let text = "";
        socket.on("data", (chunk) => (text += chunk.toString()));
        socket.on("end", () => resolve(text.slice(text.indexOf("\r\n\r\n") + 4)));
      });
    expect(await raw(front.port)).toBe(await raw(Number(new URL(origin).port)));
    const some = await fetch(`http://127.0.0.1:${front.port}/body`, { method: "POST", body: '{"a":1}' });
    expect(await some.json()).toEqual({ body: '{"a":1}', length: "7" });
  });
});

describe("a request's line", () => {
  const at = Date.parse("2026-11-25T12:00:00Z");
  const base = { method: "POST", path: "/v4/p/a/run", started: at, problem: null, left: null };

  it("names an app's own failure as the app's, and the gateway's problem by its code", () => {
    const app = { ...base, status: 503, headers: { request: "req_1", run: "run_1" } };
    expect(formatLine(app, at + 12)).toBe(
      "12:00:00 503 POST /v4/p/a/run 12 ms req_1 run_1 app answered 503 Service Unavailable",
    );
    const gateway = { ...app, status: 502, problem: "bad_gateway" };
    expect(formatLine(gateway, at + 5)).toBe("12:00:00 502 POST /v4/p/a/run 5 ms req_1 run_1 gateway: bad_gateway");
  });

  it("says when a run was handed over (a 202 with its run id)", () => {
    const handed = { ...base, status: 202, headers: { request: "req_1", run: "run_1", waited: true } };
    expect(formatLine(handed, at + 2001)).toBe(
      "12:00:00 202 POST /v4/p/a/run 2001 ms req_1 run_1 handed over: the run goes on without its caller",
    );
    const queued = { ...handed, headers: { request: "req_1", run: "run_1", waited: false } };
    expect(formatLine(queued, at + 20)).toBe(
      "12:00:00 202 POST /v4/p/a/run 20 ms req_1 run_1 accepted: the run goes on without its caller",
    );
  });

  it("says when a retry under an Idempotency-Key answered the key's run, not that it handed one over", () => {
    // A run that ended: its retry is a 202 with its end, and nothing goes on without its caller.
    const replayed = {
      ...base,
      status: 202,
      headers: { request: "req_2", run: "run_1", waited: true, replayed: true },
    };
    expect(formatLine(replayed, at + 90)).toBe(
      "12:00:00 202 POST /v4/p/a/run 90 ms req_2 run_1 Idempotency-Key: the key's run, the app not called again",
    );
    const joined = { ...replayed, status: 200 };
    expect(formatLine(joined, at + 2900)).toBe(
      "12:00:00 200 POST /v4/p/a/run 2900 ms req_2 run_1 Idempotency-Key: the key's run, the app not called again",
    );
  });

  it("says when the caller left, and before or during the answer", () => {
    expect(formatLine({ ...base, status: null, headers: {}, left: "before the answer" }, at + 3000)).toBe(
      "12:00:00 --- POST /v4/p/a/run 3000 ms caller left before the answer",
    );
  });
});

describe("the gateway's log lines in the dev terminal", () => {
  it("reads the console's inspect form, on one line or many", () => {
    expect(parseInspected("{ level: 'info', n: 3, ok: true, none: null, nested: { a: \"it's\" } }")).toEqual({
      level: "info",
      n: 3,
      ok: true,
      none: null,
      nested: { a: "it's" },
    });
    expect(parseInspected("{\n  level: 'error',\n  message: 'boom',\n  list: [ 1, 'two' ]\n}")).toEqual({
      level: "error",
      message: "boom",
      list: [1, "two"],
    });
    expect(parseInspected("not an object {")).toBeNull();
  });

  it("leaves out request lines and everything below a warning, and writes a warning or an error as one line", () => {
    expect(formatLog({ level: "log", message: "{ level: 'info', message: 'request', status: 200 }" })).toBeNull();
    expect(formatLog({ level: "log", message: "{ level: 'info', message: 'queue batch', outcome: 'ok' }" })).toBeNull();
    expect(
      formatLog({ level: "log", message: "{ level: 'info', message: 'webhook lane alarm', deliveries: 1 }" }),
    ).toBeNull();
    expect(
      formatLog({ level: "warn", message: "{ level: 'warn', message: 'sign-in refused', reason: 'bad_token' }" }),
    ).toBe("gateway warn: sign-in refused reason=bad_token");
    expect(
      formatLog({
        level: "error",
        message:
          "{\n  level: 'error',\n  message: 'queue batch',\n  queue: 'usage-records',\n  outcome: 'error',\n  error: { name: 'Error', message: 'boom', stack: '    at x' },\n  request_id: 'req_1'\n}",
      }),
    ).toBe("gateway error: queue batch queue=usage-records outcome=error error=name:Error,message:boom req_1");
    expect(formatLog({ level: "log", message: "plain\ntext" })).toBe("worker log: plain text");
  });
});

describe("the migrations in the dev terminal", () => {
  it("says in one line how many wrangler applied, then that the database is up to date, even when the terminal is at warn", () => {
    const dir = mkdtempSync(join(tmpdir(), "dev-migrations-"));
    try {
      // As `npm run dev` runs it, from a process whose own wrangler logs only warnings and errors.
      const apply = () =>
        spawnSync("npx", ["wrangler", "d1", "migrations", "apply", "DB", "--local", "--persist-to", dir], {
          encoding: "utf8",
          env: { ...process.env, WRANGLER_LOG: "warn", WRANGLER_SEND_METRICS: "false", ...MIGRATE_ENV },
        });
      const first = apply();
      expect(first.status).toBe(0);
      expect(migrationsSummary(first.stdout)).toMatch(
        /^D1 migrations: applied \d+ to the local database \(0000_init\.sql … \d{4}_[\w-]+\.sql\)$/,
      );
      const again = apply();
      expect(again.status).toBe(0);
      expect(migrationsSummary(again.stdout)).toBe("D1 migrations: the local database is up to date");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
