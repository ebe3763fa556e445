import { describe, expect, it } from "vitest";
import { client, seedProject } from "../../test/helpers";
import { asPerson, person, projectOwnedBy } from "../../test/people";

type Member = { member_id: string; user_id: string; role: string; email: string };
type List<T> = { data: T[]; next_cursor: string | null };

describe("members and invites", () => {
  it("claims an invite at sign-in only with that email verified by the provider", async () => {
    const api = client();
    const email = `claim-${Date.now()}@example.test`;
    const projectId = await projectOwnedBy(api, `owner-${Date.now()}@example.test`);
    expect(
      (
        await api.json(`/v2/projects/${projectId}/invites`, {
          method: "POST",
          body: { email: email.toUpperCase(), role: "developer" },
        })
      ).status,
    ).toBe(201);

    // The same address, unverified: no membership, the invite stays open.
    const impostor = await person(api, { email, verified: false });
    expect((await asPerson(api, impostor)("/v2/projects")).body).toEqual({ data: [], next_cursor: null });
    expect((await asPerson(api, impostor)(`/v2/projects/${projectId}`)).status).toBe(404);
    expect(
      (await api.json<List<{ email: string }>>(`/v2/projects/${projectId}/invites`)).body.data.map((i) => i.email),
    ).toContain(email);

    const invited = await person(api, { email, verified: true });
    const projects = await asPerson(api, invited)<List<{ project_id: string }>>("/v2/projects");
    expect(projects.body.data.map((p) => p.project_id)).toEqual([projectId]);
    const members = await api.json<List<Member>>(`/v2/projects/${projectId}/members`);
    expect(members.body.data.find((m) => m.user_id === invited.id)?.role).toBe("developer");
    expect(
      (await api.json<List<{ email: string }>>(`/v2/projects/${projectId}/invites`)).body.data.map((i) => i.email),
    ).not.toContain(email);
  });

  it("keeps the last owner: they can neither leave, be removed nor demoted until another owner exists", async () => {
    const api = client();
    const ownerEmail = `last-owner-${Date.now()}@example.test`;
    const projectId = await projectOwnedBy(api, ownerEmail);
    const owner = await person(api, { email: ownerEmail });
    const asOwner = asPerson(api, owner);
    const mine = (await asOwner<List<Member>>(`/v2/projects/${projectId}/members`)).body.data.find(
      (m) => m.user_id === owner.id,
    )!;
    expect(mine.role).toBe("owner");

    const leave = await asOwner(`/v2/projects/${projectId}/members/${mine.member_id}`, { method: "DELETE" });
    expect(leave.status).toBe(409);
    expect(leave.body).toMatchObject({ code: "last_owner" });
    expect((await api.json(`/v2/projects/${projectId}/members/${mine.member_id}`, { method: "DELETE" })).status).toBe(
      409,
    );
    expect(
      (
        await asOwner(`/v2/projects/${projectId}/members/${mine.member_id}`, {
          method: "PATCH",
          body: { role: "viewer" },
        })
      ).status,
    ).toBe(409);

    // With a second owner, the first may leave; the second is then the last.
    const second = await person(api);
    const added = await asOwner<Member>(`/v2/projects/${projectId}/members`, {
      method: "POST",
      body: { email: second.email, role: "owner" },
    });
    expect(added.status).toBe(201);
    expect((await asOwner(`/v2/projects/${projectId}/members/${mine.member_id}`, { method: "DELETE" })).status).toBe(
      200,
    );
    expect((await asOwner(`/v2/projects/${projectId}`)).status).toBe(404);
    expect(
      (await asPerson(api, second)(`/v2/projects/${projectId}/members/${added.body.member_id}`, { method: "DELETE" }))
        .status,
    ).toBe(409);
  });

  it("lets only owners and the operator manage members; anyone may leave; service accounts see no members", async () => {
    const api = client();
    const ownerEmail = `mgr-owner-${Date.now()}@example.test`;
    const projectId = await projectOwnedBy(api, ownerEmail);
    const owner = await person(api, { email: ownerEmail });
    const developer = await person(api);
    const viewer = await person(api);
    const asOwner = asPerson(api, owner);
    const dev = await asOwner<Member>(`/v2/projects/${projectId}/members`, {
      method: "POST",
      body: { email: developer.email, role: "developer" },
    });
    const view = await asOwner<Member>(`/v2/projects/${projectId}/members`, {
      method: "POST",
      body: { email: viewer.email, role: "viewer" },
    });
    expect([dev.status, view.status]).toEqual([201, 201]);
    expect(
      (
        await asOwner(`/v2/projects/${projectId}/members`, {
          method: "POST",
          body: { email: viewer.email, role: "viewer" },
        })
      ).status,
    ).toBe(409);
    expect(
      (
        await asOwner(`/v2/projects/${projectId}/members`, {
          method: "POST",
          body: { email: "nobody@example.test", role: "viewer" },
        })
      ).status,
    ).toBe(404);

    for (const someone of [developer, viewer]) {
      const as = asPerson(api, someone);
      expect((await as(`/v2/projects/${projectId}/members`)).status).toBe(200);
      expect((await as(`/v2/projects/${projectId}/invites`)).status).toBe(403);
      expect(
        (
          await as(`/v2/projects/${projectId}/invites`, {
            method: "POST",
            body: { email: "x@example.test", role: "owner" },
          })
        ).status,
      ).toBe(403);
      expect(
        (
          await as(`/v2/projects/${projectId}/members/${dev.body.member_id}`, {
            method: "PATCH",
            body: { role: "owner" },
          })
        ).status,
      ).toBe(403);
      expect(
        (
          await as(`/v2/projects/${projectId}/members`, {
            method: "POST",
            body: { email: someone.email, role: "owner" },
          })
        ).status,
      ).toBe(403);
    }
    expect(
      (await asPerson(api, developer)(`/v2/projects/${projectId}/members/${view.body.member_id}`, { method: "DELETE" }))
        .status,
    ).toBe(403);
    expect(
      (await asPerson(api, viewer)(`/v2/projects/${projectId}/members/${view.body.member_id}`, { method: "DELETE" }))
        .status,
    ).toBe(200);

    const changed = await asOwner<Member>(`/v2/projects/${projectId}/members/${dev.body.member_id}`, {
      method: "PATCH",
      body: { role: "viewer" },
    });
    expect(changed.body.role).toBe("viewer");

    const { token } = await seedProject(api);
    const own = await api.json<{ data: { project_id: string }[] }>("/v2/projects", { token });
    const tokenProject = own.body.data[0]!.project_id;
    expect((await api.json(`/v2/projects/${tokenProject}/members`, { token })).status).toBe(403);
    expect(
      (
        await api.json(`/v2/projects/${tokenProject}/invites`, {
          token,
          method: "POST",
          body: { email: "x@example.test", role: "owner" },
        })
      ).status,
    ).toBe(403);
  });

  it("refuses a second open invite of one address, bad roles and bad emails; a withdrawn invite is not claimed", async () => {
    const api = client();
    const projectId = await projectOwnedBy(api, `inv-owner-${Date.now()}@example.test`);
    const email = `twice-${Date.now()}@example.test`;
    const first = await api.json<{ invite_id: string }>(`/v2/projects/${projectId}/invites`, {
      method: "POST",
      body: { email, role: "viewer" },
    });
    expect(first.status).toBe(201);
    expect(
      (await api.json(`/v2/projects/${projectId}/invites`, { method: "POST", body: { email, role: "viewer" } })).status,
    ).toBe(409);
    expect(
      (await api.json(`/v2/projects/${projectId}/invites`, { method: "POST", body: { email, role: "admin" } })).status,
    ).toBe(400);
    expect(
      (
        await api.json(`/v2/projects/${projectId}/invites`, {
          method: "POST",
          body: { email: "not an email", role: "viewer" },
        })
      ).status,
    ).toBe(400);
    expect(
      (await api.json(`/v2/projects/${projectId}/invites/${first.body.invite_id}`, { method: "DELETE" })).status,
    ).toBe(200);
    expect(
      (await api.json(`/v2/projects/${projectId}/invites/${first.body.invite_id}`, { method: "DELETE" })).status,
    ).toBe(404);
    const late = await person(api, { email });
    expect((await asPerson(api, late)(`/v2/projects/${projectId}`)).status).toBe(404);
  });

  it("lets an invite lapse after its time", async () => {
    const api = client();
    const projectId = await projectOwnedBy(api, `lapse-owner-${Date.now()}@example.test`);
    const email = `lapse-${Date.now()}@example.test`;
    await api.json(`/v2/projects/${projectId}/invites`, { method: "POST", body: { email, role: "viewer" } });
    api.clock.advance(15 * 24 * 60 * 60 * 1000);
    const late = await person(api, { email });
    expect((await asPerson(api, late)(`/v2/projects/${projectId}`)).status).toBe(404);
  });
});
