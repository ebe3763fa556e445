import { describe, expect, it } from "vitest";
import { consume, poll, startAsync } from "../async-runs";
import { client } from "../helpers";
import { type Echo, PEER } from "../peers";
import { seedRunnable } from "../runs";

// 36 Must 3: one app request for every mode. The same caller's request run synchronously, waited
// (`Prefer: wait`) and async (`?async=true`, stored, then called by its queue consumer) reaches the app
// as the same request: method, path, query, forwarded headers and body. Through the real entry: the
// Worker's fetch, the run's keeper, and the async-run queue consumer. What may differ is named: the
// run's own id (`X-Run-Id`), and `Prefer`, which reaches the app as sent (headers.ts) and is how the
// waited run was asked for.

const api = client();

/** The caller's request, the same in every mode (but what selects the mode). */
const QUERY = "q=1&tag=a&tag=b";
const BODY = JSON.stringify({ inputs: { n: 1, text: "héllo" } });
// With its length declared, as an HTTP client sends a body it has whole: a custom app's synchronous run
// streams the body to the app as it arrives, framed as the caller framed it (a caller's chunked upload
// reaches the app chunked), while a body stored or handed to a keeper is sent with its length.
const HEADERS = {
  "Content-Type": "application/json",
  "Content-Length": String(new TextEncoder().encode(BODY).byteLength),
  "X-Custom": "kept",
  "X-Webhook-Secret": "never-forwarded-without-a-webhook",
  Cookie: "session=never-forwarded",
  "X-Forwarded-For": "203.0.113.9",
};

type App = Awaited<ReturnType<typeof seedRunnable>>;

/**
 * The app's echo inside a run's answer: a cortex app's is enveloped (`result`), a custom app's is passed
 * through; an async run's stored result is enveloped for either.
 */
const echoOf = (runtime: "cortex" | "custom", answer: unknown, enveloped = runtime === "cortex"): Echo =>
  (enveloped ? (answer as { result: Echo }).result : answer) as Echo;

/** The request as the app saw it, with what is a run's own (its id) taken out and kept apart. */
function seen(echo: Echo) {
  const { "x-run-id": runId, prefer, ...headers } = echo.headers;
  return {
    runId,
    prefer,
    request: { method: echo.method, path: echo.path, query: echo.query, headers, body: echo.body },
  };
}

async function syncRun(app: App, path: string) {
  const response = await api.call(`${path}?${QUERY}`, {
    method: "POST",
    token: app.token,
    headers: HEADERS,
    rawBody: BODY,
  });
  expect(response.status).toBe(200);
  return { runId: response.headers.get("x-run-id"), answer: await response.json() };
}

async function waitedRun(app: App, path: string) {
  const response = await api.call(`${path}?${QUERY}`, {
    method: "POST",
    token: app.token,
    headers: { ...HEADERS, Prefer: "wait=60" },
    rawBody: BODY,
  });
  expect(response.status).toBe(200);
  expect(response.headers.get("preference-applied")).toBe("wait=60");
  return { runId: response.headers.get("x-run-id"), answer: await response.json() };
}

async function asyncRun(app: App, path: string) {
  const started = await startAsync(
    api,
    { runPath: path, token: app.token },
    { query: QUERY, headers: HEADERS, rawBody: BODY },
  );
  expect(started.response.status).toBe(202);
  expect(await consume(api, started.message)).toMatchObject({ acked: true, retried: false });
  const done = await poll(api, started.body.status_url, app.token);
  expect(done.body.status).toBe("succeeded");
  return { runId: started.body.run_id, answer: done.body.result, enveloped: true };
}

describe("one app request for every mode", () => {
  for (const runtime of ["cortex", "custom"] as const) {
    it(`a ${runtime} app gets the same request run sync, waited or async`, async () => {
      // The origin has a base path of its own and a query of its own: both kept, in every mode.
      const app = await seedRunnable(api, `${PEER}/upstream/echo/base?origin=1`, runtime);
      const path = runtime === "cortex" ? app.runPath : `${app.appPath}/v1/things`;
      const runs = {
        sync: await syncRun(app, path),
        wait: await waitedRun(app, path),
        async: await asyncRun(app, path),
      };

      const views = Object.fromEntries(
        Object.entries(runs).map(([mode, run]) => [
          mode,
          seen(echoOf(runtime, run.answer, "enveloped" in run ? run.enveloped : undefined)),
        ]),
      );
      // Each run's own id reached the app as `X-Run-Id`, and it is the id the caller was told.
      for (const [mode, run] of Object.entries(runs)) expect(views[mode]!.runId, mode).toBe(run.runId);
      expect(views.wait!.prefer).toBe("wait=60");
      expect(views.sync!.prefer).toBeUndefined();
      expect(views.async!.prefer).toBeUndefined();

      const sync = views.sync!.request;
      expect(views.wait!.request).toEqual(sync);
      expect(views.async!.request).toEqual(sync);
      // And it is the request the rules make: path under the origin's base, both queries, the body as sent,
      // the caller's credentials, cookies and claims of origin withheld.
      expect(sync.method).toBe("POST");
      expect(sync.path).toBe(`/upstream/echo/base/${runtime === "cortex" ? "run" : "v1/things"}`);
      expect(sync.query).toEqual([
        ["origin", "1"],
        ["q", "1"],
        ["tag", "a"],
        ["tag", "b"],
      ]);
      expect(sync.body).toBe(BODY);
      expect(sync.headers["x-custom"]).toBe("kept");
      for (const name of ["authorization", "cookie", "x-webhook-secret"])
        expect(sync.headers[name], name).toBeUndefined();
      expect(sync.headers["x-forwarded-for"]).toBeUndefined();
      expect(sync.headers["x-forwarded-host"]).toBe("localhost");
    });
  }
});
