import { describe, expect, it } from "vitest";
import { client } from "../../test/helpers";
import { seedRunnable } from "../../test/runs";

/**
 * A caller's mistakes answered with what to do: a malformed `Prefer: wait` refused before the app is
 * called, a run's URL without the app's function, a body over the limit. Each answer says which part of
 * the request was wrong and the form that works.
 */

type Problem = { code: string; detail: string; errors?: { location: string; field: string; message: string }[] };

describe("a caller's mistakes", () => {
  it.each(["wait=abc", "wait=1.5", "wait=0"])(
    "Prefer: %s is a 400 naming the header, and the app is not called",
    async (prefer) => {
      let calls = 0;
      const api = client({
        outbound: {
          fetch: (request: Request) => {
            calls++;
            return fetch(request);
          },
        },
      });
      const app = await seedRunnable(api);
      const { status, body } = await api.json<Problem>(app.runPath, {
        method: "POST",
        token: app.token,
        headers: { Prefer: prefer },
        body: { hello: "world" },
      });
      expect(status).toBe(400);
      expect(body.code).toBe("validation_failed");
      expect(body.errors).toEqual([expect.objectContaining({ location: "header", field: "Prefer" })]);
      expect(body.errors![0]!.message).toContain("from 1 to 60");
      // The detail alone (what a curl user reads first) names the header and what it must be.
      expect(body.detail).toBe(`The header field 'Prefer' is invalid: ${body.errors![0]!.message}.`);
      expect(body.detail).toContain("from 1 to 60");
      expect(calls).toBe(0);
    },
  );

  it("a run's URL without the app's function says a function path such as /run is needed, and shows the form", async () => {
    const api = client();
    const app = await seedRunnable(api);
    for (const path of [app.appPath, `${app.appPath}/`]) {
      const { status, body } = await api.json<Problem>(path, { method: "POST", token: app.token, body: {} });
      expect(status).toBe(404);
      expect(body.detail).toContain("/v4/{project_id}/{app_name}/{path}");
      expect(body.detail).toContain(`${app.appPath}/run`);
    }
    // Any other unknown path stays a plain 404.
    const other = await api.json<Problem>("/v4", { method: "POST", token: app.token });
    expect(other.status).toBe(404);
    expect(other.body.detail).not.toContain("{path}");
  });

  it("a body over the limit is a 413 that says the limit in MiB and what to send instead", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const { status, body } = await api.json<Problem & { limit_bytes: number }>(app.runPath, {
      method: "POST",
      token: app.token,
      headers: { "Content-Type": "application/json" },
      rawBody: new Uint8Array(6 * 1024 * 1024 + 1),
    });
    expect(status).toBe(413);
    expect(body.code).toBe("payload_too_large");
    expect(body.limit_bytes).toBe(6 * 1024 * 1024);
    expect(body.detail).toContain("6 MiB");
    expect(body.detail).toContain("?async=true");
    expect(body.detail).toMatch(/smaller body/);
    expect(body.detail).toMatch(/URL/);
  });
});
