import { describe, expect, it } from "vitest";
import { consume, poll, startAsync } from "../../../test/async-runs";
import { client } from "../../../test/helpers";
import { PEER } from "../../../test/peers";
import { seedRunnable } from "../../../test/runs";

const api = client();

describe("async runs of passed-through answers", () => {
  it("store the document of a custom app's event stream as their result", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream`, "custom");
    const started = await startAsync(
      api,
      { runPath: `${app.appPath}/v1/chat/completions`, token: app.token },
      { query: "events=3", headers: { Accept: "text/event-stream" } },
    );
    expect(started.response.status).toBe(202);
    await consume(api, started.message);
    const done = await poll(api, started.body.status_url, app.token);
    expect(done.body.status).toBe("succeeded");
    expect(done.body.result).toEqual({
      run_id: started.body.run_id,
      status_code: 200,
      content_type: "text/event-stream",
      run_time_ms: expect.any(Number),
      timestamp: expect.any(String),
      text: 'data: {"i":0}\n\ndata: {"i":1}\n\ndata: {"i":2}\n\n',
    });
  });

  it("keep a cortex app's JSON answer in its envelope", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream`);
    const started = await startAsync(api, app, { body: { a: 1 } });
    await consume(api, started.message);
    const done = await poll(api, started.body.status_url, app.token);
    expect(Object.keys(done.body.result as object)).toEqual(["run_id", "result", "run_time_ms", "timestamp"]);
  });
});
