#!/usr/bin/env node
// Seeds a demo project whose app runs on the sample app (examples/sample-app/server.mjs), then prints
// the commands to try it. Talks to the gateway's own API only.
//
//   node scripts/seed-demo.mjs BASE_URL ADMIN_TOKEN [ORIGIN_URL]
//   node scripts/seed-demo.mjs http://127.0.0.1:8787 "$ADMIN_TOKEN" http://127.0.0.1:8790/run
const [base = "http://127.0.0.1:8787", admin, origin = "http://127.0.0.1:8790/run"] = process.argv.slice(2);
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

const project = await api("POST", "/v2/projects", admin, { name: `demo-${new Date().toISOString().slice(0, 19)}` });
const p = `/v2/projects/${project.project_id}`;
const account = await api("POST", `${p}/service-accounts`, admin, {
  name: "demo",
  expires_at: new Date(Date.now() + 30 * 24 * 3600 * 1000).toISOString(),
});
const app = await api("POST", `${p}/apps`, account.token, { name: "hello-world", region: "us-east-1", runtime: "custom" });
const build = await api("POST", `${p}/apps/${app.app_id}/builds`, account.token, {});
const b = `${p}/apps/${app.app_id}/builds/${build.build_id}`;
await api("PATCH", b, account.token, { status: "building" });
await api("PATCH", b, account.token, { status: "succeeded", origin_url: origin });

const run = `${baseUrl}/v4/${project.project_id}/hello-world/run`;
const hook = encodeURIComponent(new URL("/webhook", origin).href);
console.log(`Seeded project ${project.project_id}, app hello-world → ${origin}

export TOKEN=${account.token}

# Run it:
curl -s -X POST '${run}' -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{"inputs":{"name":"edge"}}'

# Run it and have the response delivered, signed, to the sample app's /webhook (watch its log):
curl -s -X POST '${run}?webhookEndpoint=${hook}' -H "Authorization: Bearer $TOKEN" -H 'X-Webhook-Secret: demo-webhook-secret' -H 'Content-Type: application/json' -d '{"name":"webhooks"}'

# The deliveries and their attempts:
curl -s '${baseUrl}${p}/webhook-deliveries' -H "Authorization: Bearer $TOKEN"`);
