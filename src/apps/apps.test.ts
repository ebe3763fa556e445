import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { client, seedBuild, seedProject } from "../../test/helpers";

const api = client();

describe("apps", () => {
  it("creates an app whose id is {project_id}-{name}", async () => {
    const { projectId, token, appId } = await seedProject(api, { appName: "hello-world" });
    expect(appId).toBe(`${projectId}-hello-world`);
    const read = await api.json(`/v2/projects/${projectId}/apps/${appId}`, { token });
    expect(read.body).toMatchObject({
      app_id: appId,
      name: "hello-world",
      region: "us-east-1",
      runtime: "cortex",
      current_deployment: null,
    });
  });

  it("refuses a duplicate name with 409, and bad names, regions and runtimes with 400", async () => {
    const { projectId, token } = await seedProject(api, { appName: "dup" });
    const duplicate = await api.json(`/v2/projects/${projectId}/apps`, {
      method: "POST",
      token,
      body: { name: "dup", region: "us-east-1", runtime: "custom" },
    });
    expect(duplicate.status).toBe(409);
    expect(duplicate.body.code).toBe("conflict");
    const bad = [
      { name: "Upper", region: "us-east-1", runtime: "cortex" },
      { name: "-dash", region: "us-east-1", runtime: "cortex" },
      { name: "a".repeat(51), region: "us-east-1", runtime: "cortex" },
      { name: "ok", region: "mars-north-1", runtime: "cortex" },
      { name: "ok", region: "us-east-1", runtime: "lambda" },
    ];
    for (const body of bad) {
      const response = await api.json<{ errors: { field: string }[] }>(`/v2/projects/${projectId}/apps`, {
        method: "POST",
        token,
        body,
      });
      expect(response.status, JSON.stringify(body)).toBe(400);
    }
  });

  it("refuses an app past MAX_APPS_PER_PROJECT with a 409 naming its limit, even to creates at once, and writes no audit entry for it", async () => {
    const capped = client({}, { MAX_APPS_PER_PROJECT: "3" });
    const { projectId, token } = await seedProject(capped, { appName: "first" });
    const creates = await Promise.all(
      ["b", "c", "d", "e", "f"].map((name) =>
        capped.json(`/v2/projects/${projectId}/apps`, {
          method: "POST",
          token,
          body: { name, region: "us-east-1", runtime: "cortex" },
        }),
      ),
    );
    expect(creates.filter((r) => r.status === 201)).toHaveLength(2);
    const refused = creates.filter((r) => r.status !== 201);
    expect(refused).toHaveLength(3);
    for (const r of refused) {
      expect(r.status).toBe(409);
      expect(r.body).toMatchObject({ code: "conflict", limit: 3 });
      expect(r.body.detail).toMatch(/MAX_APPS_PER_PROJECT/);
    }
    const listed = await capped.json<{ data: unknown[] }>(`/v2/projects/${projectId}/apps`, { token });
    expect(listed.body.data).toHaveLength(3);
    const audited = await env.DB.prepare(
      "SELECT count(*) AS n FROM audit_log WHERE project_id = ? AND action = 'app.create'",
    )
      .bind(projectId)
      .first<{ n: number }>();
    expect(audited?.n).toBe(3);
    // A name the project has is still the duplicate's 409, not the limit's.
    const duplicate = await capped.json(`/v2/projects/${projectId}/apps`, {
      method: "POST",
      token,
      body: { name: "first", region: "us-east-1", runtime: "cortex" },
    });
    expect(duplicate.status).toBe(409);
    expect(duplicate.body.limit).toBeUndefined();
  });

  it("shows the newest succeeded build as the current deployment", async () => {
    const seed = await seedProject(api);
    const path = (id: string) => `/v2/projects/${seed.projectId}/apps/${seed.appId}/builds/${id}`;
    const succeed = async (origin: string) => {
      const id = await seedBuild(api, seed);
      await api.json(path(id), { method: "PATCH", token: seed.token, body: { status: "building" } });
      api.clock.advance(1000);
      await api.json(path(id), {
        method: "PATCH",
        token: seed.token,
        body: { status: "succeeded", origin_url: origin },
      });
      return id;
    };
    await succeed("https://v1.example.net");
    const second = await succeed("https://v2.example.net");
    const failed = await seedBuild(api, seed);
    await api.json(path(failed), { method: "PATCH", token: seed.token, body: { status: "failed" } });
    const app = await api.json<{ current_deployment: { build_id: string; origin_url: string } }>(
      `/v2/projects/${seed.projectId}/apps/${seed.appId}`,
      { token: seed.token },
    );
    expect(app.body.current_deployment).toMatchObject({ build_id: second, origin_url: "https://v2.example.net" });
    const list = await api.json<{ data: { current_deployment: unknown }[] }>(`/v2/projects/${seed.projectId}/apps`, {
      token: seed.token,
    });
    expect(list.body.data[0]!.current_deployment).toEqual(app.body.current_deployment);
  });

  it("lists apps by name with pagination", async () => {
    const { projectId, token } = await seedProject(api, { appName: "b-app" });
    for (const name of ["c-app", "a-app"]) {
      await api.json(`/v2/projects/${projectId}/apps`, {
        method: "POST",
        token,
        body: { name, region: "eu-west-2", runtime: "custom" },
      });
    }
    const first = await api.json<{ data: { name: string }[]; next_cursor: string }>(
      `/v2/projects/${projectId}/apps?limit=2`,
      { token },
    );
    expect(first.body.data.map((a) => a.name)).toEqual(["a-app", "b-app"]);
    const second = await api.json<{ data: { name: string }[]; next_cursor: null }>(
      `/v2/projects/${projectId}/apps?limit=2&cursor=${first.body.next_cursor}`,
      { token },
    );
    expect(second.body.data.map((a) => a.name)).toEqual(["c-app"]);
    expect(second.body.next_cursor).toBeNull();
  });
});
