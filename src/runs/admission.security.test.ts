import { sign } from "hono/jwt";
import { describe, expect, it } from "vitest";
import { client } from "../../test/helpers";
import { callWith, seedRunnable } from "../../test/runs";
import { TEST_SECRETS } from "../../test/secrets";

/** Admission against callers that hold it up or feed it values out of range (issue 33, finding 7). */

const api = client();

/** A body that sends 64 KiB and then nothing, never ending: an upload held open. */
function stalledBody() {
  let sent = false;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent) return new Promise<void>(() => undefined);
      sent = true;
      controller.enqueue(new TextEncoder().encode(`{"a":"${"x".repeat(64 * 1024)}`));
    },
  });
}

describe("attack: an upload held open holds the run (33.7)", () => {
  it.each([
    ["an async run", "?async=true"],
    ["a cortex run (its JSON read whole)", ""],
  ])(
    "%s whose caller sends 64 KiB and stalls is answered 408 at the run's deadline (RUN_TIMEOUT_MS), not held",
    async (_kind, query) => {
      const app = await seedRunnable(api);
      const res = await callWith(api, { RUN_TIMEOUT_MS: "200" }, `${app.runPath}${query}`, {
        method: "POST",
        token: app.token,
        headers: { "Content-Type": "application/json" },
        body: stalledBody(),
        // @ts-expect-error workerd's RequestInit takes a streamed body as is
        duplex: "half",
      });
      expect(res.status).toBe(408);
      expect(await res.json()).toMatchObject({ code: "request_timeout" });
    },
  );
});

describe("attack: JWT claims out of range (33.7)", () => {
  it("answers 401, never 500, to a JWT whose exp, nbf or iat is out of range or no number", async () => {
    const app = await seedRunnable(api);
    const now = Math.floor(api.clock.now().getTime() / 1000);
    const base = { project_id: app.projectId, exp: now + 3600 };
    const claims = [
      { ...base, exp: -1e300 },
      { ...base, exp: 1e300 },
      { ...base, exp: "4102444800" },
      { ...base, exp: null },
      { ...base, iat: 1e300 },
      { ...base, iat: now + 86_400 },
      { ...base, iat: "yesterday" },
      { ...base, nbf: -1e300 },
      { ...base, nbf: "now" },
      { ...base, nbf: 1e300 },
    ];
    for (const payload of claims) {
      const token = await sign(payload as never, TEST_SECRETS.JWT_SECRET, "HS256");
      const res = await api.json(app.runPath, { token });
      expect(res.status, JSON.stringify(payload)).toBe(401);
      expect(res.body, JSON.stringify(payload)).toMatchObject({ code: "invalid_token" });
      // RFC 6750: an error_description is printable ASCII, without a quote or a backslash.
      expect(res.headers.get("WWW-Authenticate"), JSON.stringify(payload)).toMatch(
        /^Bearer realm="edge-gateway", error="invalid_token", error_description="[\x20\x21\x23-\x5b\x5d-\x7e]*"$/,
      );
    }
    // In range, it runs.
    const good = await sign({ ...base, iat: now, nbf: now }, TEST_SECRETS.JWT_SECRET, "HS256");
    expect((await api.call(app.runPath, { token: good })).status).toBe(200);
  });
});
