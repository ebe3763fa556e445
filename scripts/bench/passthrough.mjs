// The baseline Worker: forwards every request to the upstream and returns its answer untouched.
// Whatever the gateway costs is measured against this, in the same runtime.
export const passthroughScript = (upstream) => `
const UPSTREAM = ${JSON.stringify(upstream)};
export default {
  async fetch(request) {
    const url = new URL(request.url);
    return fetch(UPSTREAM + url.pathname + url.search, { method: request.method, headers: request.headers, body: request.body });
  },
};
`;

// The floor of a run with a webhook: the baseline plus what any design that records the delivery
// before the run (issue 12, Must 4) and hands it to a queue after must do on the caller's invocation,
// one D1 write before the upstream call and one queue send after it, carried in waitUntil as the
// gateway does (the caller does not wait for it). Its consumer only acks: no receiver, no records.
export const floorScript = (upstream) => `
const UPSTREAM = ${JSON.stringify(upstream)};
export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    const id = crypto.randomUUID();
    await env.DB.prepare("INSERT INTO pending (id, at) VALUES (?, ?)").bind(id, Date.now()).run();
    const response = await fetch(UPSTREAM + url.pathname + url.search, { method: request.method, headers: request.headers, body: request.body });
    const body = await response.text();
    ctx.waitUntil(env.QUEUE.send({ id, body }, { contentType: "json" }));
    return new Response(body, { status: response.status, headers: response.headers });
  },
  async queue(batch) {
    for (const message of batch.messages) message.ack();
  },
};
`;
