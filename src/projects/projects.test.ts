import { describe, expect, it } from "vitest";
import { client } from "../../test/helpers";

const api = client();

describe("projects", () => {
  it("creates a project with an unguessable prefixed id and reads it back", async () => {
    const created = await api.json<{ project_id: string; name: string; created_at: string }>("/v2/projects", {
      method: "POST",
      body: { name: "  Acme production  " },
    });
    expect(created.status).toBe(201);
    expect(created.body.project_id).toMatch(/^proj_[0-9a-z]{30}$/);
    expect(created.body).toMatchObject({ name: "Acme production", created_at: api.clock.now().toISOString() });
    const read = await api.json(`/v2/projects/${created.body.project_id}`);
    expect(read.status).toBe(200);
    expect(read.body).toEqual(created.body);
  });

  it("refuses an empty or over-long name", async () => {
    for (const name of ["", "   ", "x".repeat(101), 42]) {
      const response = await api.json("/v2/projects", { method: "POST", body: { name } });
      expect(response.status, JSON.stringify(name)).toBe(400);
    }
  });

  it("lists projects newest first, paginated", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      api.clock.advance(1000);
      ids.push(
        (await api.json<{ project_id: string }>("/v2/projects", { method: "POST", body: { name: `p${i}` } })).body
          .project_id,
      );
    }
    const first = await api.json<{ data: { project_id: string }[]; next_cursor: string }>("/v2/projects?limit=2");
    expect(first.body.data.map((p) => p.project_id)).toEqual([ids[2], ids[1]]);
    const second = await api.json<{ data: { project_id: string }[] }>(
      `/v2/projects?limit=2&cursor=${first.body.next_cursor}`,
    );
    expect(second.body.data[0]!.project_id).toBe(ids[0]);
  });

  it("answers 404 for an unknown or malformed project id, also to the admin", async () => {
    expect((await api.json("/v2/projects/proj_0000000000aaaaaaaaaaaaaaaaaaaa")).status).toBe(404);
    const malformed = await api.json("/v2/projects/hello");
    expect(malformed.status).toBe(404);
    expect(malformed.body.detail).toBe("No project with id 'hello'.");
  });
});
