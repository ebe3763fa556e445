import { describe, expect, it } from "vitest";
import { client, seedBuild, seedProject } from "../../test/helpers";

const api = client();

async function setup() {
  const seed = await seedProject(api);
  const buildId = await seedBuild(api, seed);
  const path = `/v2/projects/${seed.projectId}/apps/${seed.appId}/builds/${buildId}`;
  const report = (body: unknown) => api.json(path, { method: "PATCH", token: seed.token, body });
  const cancel = () => api.json(path, { method: "DELETE", token: seed.token });
  return { ...seed, buildId, path, report, cancel };
}

describe("cancel build (DELETE /v2/projects/{project_id}/apps/{app_id}/builds/{build_id})", () => {
  it("cancels a queued build: 200 with status cancelled and cancelled_at", async () => {
    const { cancel, buildId } = await setup();
    const { status, body } = await cancel();
    expect(status).toBe(200);
    expect(body).toMatchObject({ build_id: buildId, status: "cancelled", cancelled_at: api.clock.now().toISOString() });
  });

  it("cancels a building build", async () => {
    const { cancel, report } = await setup();
    expect((await report({ status: "building" })).status).toBe(200);
    const { status, body } = await cancel();
    expect(status).toBe(200);
    expect(body.status).toBe("cancelled");
  });

  it("answers 200 with the same body when the build is already cancelled", async () => {
    const { cancel } = await setup();
    const first = await cancel();
    api.clock.advance(5_000);
    const second = await cancel();
    expect(second.status).toBe(200);
    expect(second.body).toEqual(first.body);
  });

  it.each(["succeeded", "failed"] as const)("refuses a %s build with 409 build_not_cancellable", async (final) => {
    const { cancel, report } = await setup();
    await report({ status: "building" });
    await report(final === "succeeded" ? { status: final, origin_url: "https://app.example.net" } : { status: final });
    const { status, body, headers } = await cancel();
    expect(status).toBe(409);
    expect(headers.get("content-type")).toBe("application/problem+json");
    expect(body).toMatchObject({ code: "build_not_cancellable", status: 409 });
  });

  it("answers 404 for an unknown build, app or project", async () => {
    const { projectId, appId, token } = await setup();
    const unknownBuild = await api.json(
      `/v2/projects/${projectId}/apps/${appId}/builds/bld_0000000000aaaaaaaaaaaaaaaaaaaa`,
      { method: "DELETE", token },
    );
    expect(unknownBuild.status).toBe(404);
    expect(unknownBuild.body.code).toBe("not_found");
    const malformed = await api.json(`/v2/projects/${projectId}/apps/${appId}/builds/nope`, {
      method: "DELETE",
      token,
    });
    expect(malformed.status).toBe(404);
    const otherApp = await api.json(
      `/v2/projects/${projectId}/apps/${projectId}-other/builds/bld_0000000000aaaaaaaaaaaaaaaaaaaa`,
      {
        method: "DELETE",
        token,
      },
    );
    expect(otherApp.status).toBe(404);
  });

  it("has one winner when a cancel races the builder's succeeded report", async () => {
    for (let round = 0; round < 5; round++) {
      const { cancel, report, path, token } = await setup();
      await report({ status: "building" });
      const [cancelled, succeeded] = await Promise.all([
        cancel(),
        report({ status: "succeeded", origin_url: "https://app.example.net" }),
      ]);
      expect([cancelled.status, succeeded.status].sort()).toEqual([200, 409]);
      const final = await api.json(path, { token });
      expect(final.body.status).toBe(cancelled.status === 200 ? "cancelled" : "succeeded");
      const loser = cancelled.status === 409 ? cancelled : succeeded;
      expect(loser.body.code).toBe(cancelled.status === 409 ? "build_not_cancellable" : "build_cancelled");
    }
  });
});

describe("build lifecycle", () => {
  it("starts queued, then building, then succeeded with origin_url", async () => {
    const { report, path, token } = await setup();
    const created = await api.json(path, { token });
    expect(created.body).toMatchObject({ status: "queued", started_at: null, finished_at: null, origin_url: null });
    const building = await report({ status: "building" });
    expect(building.body).toMatchObject({ status: "building", started_at: api.clock.now().toISOString() });
    api.clock.advance(60_000);
    const done = await report({ status: "succeeded", origin_url: "https://app.example.net" });
    expect(done.body).toMatchObject({
      status: "succeeded",
      origin_url: "https://app.example.net",
      finished_at: api.clock.now().toISOString(),
    });
  });

  it("tells the builder to stop with 409 build_cancelled after a cancel", async () => {
    const { report, cancel } = await setup();
    await cancel();
    const { status, body } = await report({ status: "building" });
    expect(status).toBe(409);
    expect(body.code).toBe("build_cancelled");
  });

  it("refuses transitions the state machine does not have", async () => {
    const { report } = await setup();
    const skipped = await report({ status: "succeeded", origin_url: "https://app.example.net" });
    expect(skipped.status).toBe(409);
    expect(skipped.body.code).toBe("invalid_transition");
    await report({ status: "failed", error: "compile error" });
    const revived = await report({ status: "building" });
    expect(revived.body.code).toBe("invalid_transition");
  });

  it("answers 200 to a repeated report of the current state", async () => {
    const { report } = await setup();
    await report({ status: "building" });
    await report({ status: "succeeded", origin_url: "https://app.example.net" });
    const again = await report({ status: "succeeded", origin_url: "https://app.example.net" });
    expect(again.status).toBe(200);
    const different = await report({ status: "succeeded", origin_url: "https://other.example.net" });
    expect(different.status).toBe(409);
  });

  it("validates reports: succeeded needs origin_url, unknown fields and statuses are refused", async () => {
    const { report } = await setup();
    await report({ status: "building" });
    for (const bad of [
      { status: "succeeded" },
      { status: "done" },
      { status: "building", extra: 1 },
      { status: "succeeded", origin_url: "ftp://x" },
    ]) {
      const { status, body } = await report(bad);
      expect(status, JSON.stringify(bad)).toBe(400);
      expect(body.code).toBe("validation_failed");
      expect(Array.isArray(body.errors)).toBe(true);
    }
  });

  it("lists builds newest first with cursor pagination", async () => {
    const seed = await seedProject(api);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push(await seedBuild(api, seed));
      api.clock.advance(1_000);
    }
    const base = `/v2/projects/${seed.projectId}/apps/${seed.appId}/builds`;
    const first = await api.json<{ data: { build_id: string }[]; next_cursor: string }>(`${base}?limit=2`, {
      token: seed.token,
    });
    expect(first.body.data.map((b) => b.build_id)).toEqual([ids[4], ids[3]]);
    const second = await api.json<{ data: { build_id: string }[]; next_cursor: string | null }>(
      `${base}?limit=2&cursor=${first.body.next_cursor}`,
      { token: seed.token },
    );
    expect(second.body.data.map((b) => b.build_id)).toEqual([ids[2], ids[1]]);
    const last = await api.json<{ data: unknown[]; next_cursor: string | null }>(
      `${base}?limit=2&cursor=${second.body.next_cursor}`,
      {
        token: seed.token,
      },
    );
    expect(last.body.data).toHaveLength(1);
    expect(last.body.next_cursor).toBeNull();
  });
});
