import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { consume, keptRun, keptSql, startAsync } from "../../../test/async-runs";
import { type Client, client } from "../../../test/helpers";
import { PEER } from "../../../test/peers";
import { seedRunnable } from "../../../test/runs";
import { createDb } from "../../db/client";
import { appPathOfRun } from "../app-request";
import { runById } from "./store";

// An async run keeps the app's path it calls (`app_path`) from its acceptance, for its outcome; a row
// from before that column reads it back from its stored `target` (less the origin's base path).

const api = client();
const db = createDb(env.DB);

/** The path of the run's usage record, once its consumer handed it on. */
async function recordedPath(api: Client, projectId: string, runId: string): Promise<string> {
  let path = "";
  await vi.waitFor(
    async () => {
      const read = await api.json<{ path: string }>(`/v2/projects/${projectId}/runs/${runId}`);
      expect(read.status).toBe(200);
      path = read.body.path;
    },
    { timeout: 15_000, interval: 50 },
  );
  return path;
}

describe("an async run's app path", () => {
  it("is read from the row, or from the stored app URL on a row without it", () => {
    const appUrl = "https://app.example/base/v1/things?q=1";
    expect(appPathOfRun({ appPath: "v1/things", appUrl }, null)).toBe("v1/things");
    expect(appPathOfRun({ appPath: null, appUrl }, "https://app.example/base/")).toBe("v1/things");
    // The app's deployment unknown (deleted since): the whole path, as before the column.
    expect(appPathOfRun({ appPath: null, appUrl }, null)).toBe("base/v1/things");
  });

  it("is stored at acceptance and named by the run's record; an old row without it still runs", async () => {
    const app = await seedRunnable(api, `${PEER}/upstream/echo/base`, "custom");
    const path = `${app.appPath}/v1/things`;
    const started = await startAsync(api, { runPath: path, token: app.token }, { query: "q=1" });
    expect(started.response.status).toBe(202);
    // Kept by the run's keeper, never in D1.
    expect(await runById(db, started.body.run_id)).toBeUndefined();
    const row = await keptRun(started.body);
    expect(row!.appPath).toBe("v1/things");
    expect(await consume(api, started.message)).toMatchObject({ acked: true, retried: false });
    expect(await recordedPath(api, app.projectId, started.body.run_id)).toBe("v1/things");

    // A row accepted before `app_path` existed.
    const old = await startAsync(api, { runPath: path, token: app.token }, { query: "q=2" });
    await keptSql(old.body, "UPDATE async_runs SET app_path = NULL WHERE id = ?", old.body.run_id);
    expect((await keptRun(old.body))!.appPath).toBeNull();
    expect(await consume(api, old.message)).toMatchObject({ acked: true, retried: false });
    expect((await keptRun(old.body))!.status).toBe("succeeded");
    expect(await recordedPath(api, app.projectId, old.body.run_id)).toBe("v1/things");
  });
});
