import type { Client } from "./helpers";
import { PEER } from "./peers";
import { deploy, seedRunnable } from "./runs";

/**
 * A project with two apps behind the peer's echo upstream: `ok` answers 200, `broken` answers the
 * app's 500. `run(app, n)` makes n synchronous runs through the gateway and returns their run ids,
 * oldest first.
 */
export async function projectWithRuns(api: Client) {
  const ok = await seedRunnable(api);
  const created = await api.json<{ app_id: string; name: string }>(`/v2/projects/${ok.projectId}/apps`, {
    method: "POST",
    token: ok.token,
    body: { name: `${ok.appName}-broken`, region: "us-east-1", runtime: "cortex" },
  });
  if (created.status !== 201) throw new Error(`seed app: ${JSON.stringify(created.body)}`);
  await deploy(
    api,
    { projectId: ok.projectId, appId: created.body.app_id, token: ok.token },
    `${PEER}/upstream/echo?status=500`,
  );
  const broken = {
    appId: created.body.app_id,
    appName: created.body.name,
    runPath: `/v4/${ok.projectId}/${created.body.name}/run`,
  };
  async function run(app: { runPath: string }, n: number) {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const response = await api.call(app.runPath, { method: "POST", token: ok.token, body: { inputs: { i } } });
      ids.push(response.headers.get("x-run-id") ?? ((await response.json()) as { run_id?: string }).run_id ?? "");
      // One run per millisecond, so "newest first" has one answer.
      api.clock.advance(1);
    }
    return ids;
  }
  return { api, projectId: ok.projectId, token: ok.token, ok, broken, run };
}
