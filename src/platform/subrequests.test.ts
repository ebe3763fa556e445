import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { testDeps } from "../../test/helpers";
import { SubrequestMeter } from "./subrequests";

describe("SubrequestMeter", () => {
  it("counts each D1 round trip, R2 and queue call and outbound request, and nothing else", async () => {
    const meter = new SubrequestMeter();
    // A queue by its shape (a real one's consumer would take the message).
    const queue = { send: async () => undefined, sendBatch: async () => undefined };
    const metered = meter.env({ ...env, TASKS: queue } as Env);
    // D1: each statement run is one; a batch of several is one; binding values or preparing is none.
    const statement = metered.DB.prepare("SELECT ? AS n");
    expect(meter.made).toBe(0);
    expect(await statement.bind(1).first<{ n: number }>()).toEqual({ n: 1 });
    expect((await statement.bind(2).all<{ n: number }>()).results).toEqual([{ n: 2 }]);
    expect(meter.made).toBe(2);
    const results = await metered.DB.batch([statement.bind(3), statement.bind(4), metered.DB.prepare("SELECT 5 AS n")]);
    expect(results.map((r) => r.results)).toEqual([[{ n: 3 }], [{ n: 4 }], [{ n: 5 }]]);
    expect(meter.made).toBe(3);
    // R2 and queues: each call.
    await metered.WEBHOOK_BODIES.put("metered", "x");
    expect(await (await metered.WEBHOOK_BODIES.get("metered"))?.text()).toBe("x");
    await (metered as unknown as { TASKS: typeof queue }).TASKS.send();
    expect(meter.made).toBe(6);
    // A Durable Object's call: lanes.test.ts (an object is addressed only through its class's function).
    // Outbound requests through deps.
    const deps = meter.deps({ ...testDeps(), outbound: { fetch: async () => new Response("ok") } });
    expect(await (await deps.outbound.fetch(new Request("https://example.com/"))).text()).toBe("ok");
    expect(meter.made).toBe(7);
    // Settings pass through as they are.
    expect(metered.SERVICE_DOMAIN).toBe(env.SERVICE_DOMAIN);
  });
});
