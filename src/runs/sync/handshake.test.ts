import { describe, expect, it } from "vitest";
import { client } from "../../../test/helpers";
import { PEER } from "../../../test/peers";
import { callWith, seedRunnable } from "../../../test/runs";

describe("WebSocket handshake with the app", () => {
  it("does not follow a redirect: the upgrade is refused with 502", async () => {
    const api = client();
    const app = await seedRunnable(api, `${PEER}/upstream/ws-redirect`);
    const res = await api.json(app.runPath, { token: app.token, headers: { Upgrade: "websocket" } });
    expect(res.status).toBe(502);
    expect(String(res.body.detail)).toMatch(/status 302/);
  });

  it("gives up after the run timeout when the app never answers the handshake", async () => {
    const api = client();
    const app = await seedRunnable(api, `${PEER}/upstream/ws-stall`);
    const res = await callWith(api, { RUN_TIMEOUT_MS: "200" }, app.runPath, {
      token: app.token,
      headers: { Upgrade: "websocket" },
    });
    expect(res.status).toBe(504);
    expect(res.headers.get("x-run-id")).toMatch(/^run_/);
  });
});
