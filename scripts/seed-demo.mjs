#!/usr/bin/env node
// Seeds a demo project whose two apps run on the sample app (examples/sample-app/server.mjs), then
// prints the commands to try them: `hello-world`, a `cortex` app (functions run, stream, image), and
// `llm`, a `custom` app serving OpenAI's API. Talks to the gateway's own API only. Seeds once: what it
// made is remembered in .wrangler/demo.json (beside the local D1 it lives in, so removing .wrangler
// starts both afresh), and a later start that finds it still working only prints the commands again.
//
//   node scripts/seed-demo.mjs BASE_URL ADMIN_TOKEN [ORIGIN_URL] [--quiet]
//   node scripts/seed-demo.mjs http://127.0.0.1:8787 "$ADMIN_TOKEN" http://127.0.0.1:8790
//
// --quiet prints only the first line (what was seeded); `npm run dev` prints its own closing banner.
//
// ORIGIN_URL is the deployment's base URL: a run of `/v4/{project_id}/{app_name}/{path}` calls `{ORIGIN_URL}/{path}`.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";

const STATE = process.env.DEMO_STATE ?? ".wrangler/demo.json";
// Each app's name and runtime; a demo seeded before these were (one custom `hello-world`) is seeded afresh.
const APPS = { "hello-world": "cortex", llm: "custom" };
const args = process.argv.slice(2).filter((arg) => arg !== "--quiet");
const quiet = args.length < process.argv.length - 2;
const [base = "http://127.0.0.1:8787", admin, given = "http://127.0.0.1:8790"] = args;
const origin = given.replace(/\/+$/, "");
if (!admin) {
  console.error("usage: node scripts/seed-demo.mjs BASE_URL ADMIN_TOKEN [ORIGIN_URL]");
  process.exit(2);
}
const baseUrl = base.replace(/\/$/, "");

async function api(method, path, token, body) {
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body ? { "Content-Type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const json = await res.json().catch(() => null);
  if (!res.ok) throw new Error(`${method} ${path} → ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** The demo seeded before, if its token still reads its apps as they should be; null when there is none or it is gone. */
async function seededBefore() {
  if (!existsSync(STATE)) return null;
  try {
    const state = JSON.parse(readFileSync(STATE, "utf8"));
    const apps = [];
    for (const [name, runtime] of Object.entries(APPS)) {
      const app = await api("GET", `/v2/projects/${state.project_id}/apps/${state.project_id}-${name}`, state.token);
      if (app.runtime !== runtime) return null;
      apps.push(app);
    }
    return { ...state, apps };
  } catch {
    return null; // a fresh local database, a revoked or expired token, an older demo: seed again
  }
}

/** A succeeded build pointing at `origin`: the app's deployment follows the sample app's port. */
async function deploy(p, appId, token) {
  const build = await api("POST", `${p}/apps/${appId}/builds`, token, {});
  const b = `${p}/apps/${appId}/builds/${build.build_id}`;
  await api("PATCH", b, token, { status: "building" });
  await api("PATCH", b, token, { status: "succeeded", origin_url: origin });
}

let demo = await seededBefore();
if (demo) {
  for (const app of demo.apps) {
    if (app.current_deployment?.origin_url !== origin)
      await deploy(`/v2/projects/${demo.project_id}`, app.app_id, demo.token);
  }
  console.log(`The demo project ${demo.project_id} is already seeded (${STATE}); not seeding another.`);
} else {
  const project = await api("POST", "/v2/projects", admin, { name: "demo" });
  const p = `/v2/projects/${project.project_id}`;
  const account = await api("POST", `${p}/service-accounts`, admin, {
    name: "demo",
    expires_at: new Date(Date.now() + 365 * 24 * 3600 * 1000).toISOString(),
  });
  for (const [name, runtime] of Object.entries(APPS)) {
    const app = await api("POST", `${p}/apps`, account.token, { name, region: "us-east-1", runtime });
    await deploy(p, app.app_id, account.token);
  }
  demo = { project_id: project.project_id, token: account.token };
  mkdirSync(dirname(STATE), { recursive: true });
  writeFileSync(STATE, JSON.stringify({ project_id: demo.project_id, token: demo.token }, null, 2) + "\n", {
    mode: 0o600,
  });
  console.log(`Seeded project ${demo.project_id}, apps ${Object.keys(APPS).join(" and ")} → ${origin}`);
}
if (quiet) process.exit(0);
const v4 = `${baseUrl}/v4/${demo.project_id}`;
const hook = encodeURIComponent(`${origin}/webhook`);
console.log(`
export TOKEN=${demo.token}

# Run it (the envelope around the function's JSON):
curl -s -X POST '${v4}/hello-world/run' -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{"inputs":{"name":"edge"}}'

# A run that fails (the app's own 503) and a slow one (8 s; curl gives up after 3, and the app's call is ended):
curl -s -X POST '${v4}/hello-world/fail' -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{"inputs":{"status":503}}'
curl -s --max-time 3 -X POST '${v4}/hello-world/slow' -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{"inputs":{"ms":8000}}'

# A streamed run: the words arrive one by one as the function writes them (server-sent events):
curl -N -X POST '${v4}/hello-world/stream' -H "Authorization: Bearer $TOKEN" -H 'Accept: text/event-stream' -H 'Content-Type: application/json' -d '{"inputs":{"name":"edge"}}'

# An image (image/png, the app's bytes as they are):
curl -s -o hello.png '${v4}/hello-world/image?name=edge' -H "Authorization: Bearer $TOKEN" && file hello.png

# The official OpenAI SDK against the custom app llm (models, a completion, a streamed completion):
OPENAI_BASE_URL='${v4}/llm/v1' OPENAI_API_KEY=$TOKEN node examples/openai-client.mjs

# Run it and have the response delivered, signed, to the sample app's /webhook (watch its log):
curl -s -X POST '${v4}/hello-world/run?webhookEndpoint=${hook}' -H "Authorization: Bearer $TOKEN" -H 'X-Webhook-Secret: demo-webhook-secret' -H 'Content-Type: application/json' -d '{"inputs":{"name":"webhooks"}}'

# The deliveries and their attempts:
curl -s '${baseUrl}/v2/projects/${demo.project_id}/webhook-deliveries' -H "Authorization: Bearer $TOKEN"

# Every run on record, newest first, and the figures of the last 24 hours (runs, errors, p50/p95/p99):
curl -s '${baseUrl}/v2/projects/${demo.project_id}/runs' -H "Authorization: Bearer $TOKEN"
curl -s '${baseUrl}/v2/projects/${demo.project_id}/usage' -H "Authorization: Bearer $TOKEN"

# The same as charts, with the runs list and receivers' health (sign in with ADMIN_TOKEN, in .dev.vars):
# ${baseUrl}/dashboard/projects/${demo.project_id}/usage`);
