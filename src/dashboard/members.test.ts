import { describe, expect, it } from "vitest";
import { text, visitor } from "../../test/dashboard-helpers";
import { client } from "../../test/helpers";
import { asPerson, person, projectOwnedBy, signInAs } from "../../test/people";

type Member = { member_id: string; user_id: string };

describe("Members page", () => {
  it("lets an owner invite and change roles, offers no way to remove the last owner, and says so when asked anyway", async () => {
    const api = client();
    const ownerEmail = `page-owner-${Date.now()}@example.test`;
    const projectId = await projectOwnedBy(api, ownerEmail);
    const owner = await person(api, { email: ownerEmail, name: "Olive Owner" });
    const v = visitor(api);
    await signInAs(v, api, owner);
    const page = await v.get(`/dashboard/projects/${projectId}/members`);
    expect(page.status).toBe(200);
    expect(text(page.html)).toContain("Olive Owner (you)");
    expect(text(page.html)).toContain("Last owner");
    expect(page.html).not.toContain(">Leave<");

    const invited = await v.post(`/dashboard/projects/${projectId}/members/invites`, {
      email: "Newcomer@Example.test",
      role: "developer",
    });
    expect(invited.status).toBe(200);
    expect(text(invited.html)).toContain("newcomer@example.test is invited as developer");

    const [mine] = (await asPerson(api, owner)<{ data: Member[] }>(`/v2/projects/${projectId}/members`)).body.data;
    const refused = await v.post(`/dashboard/projects/${projectId}/members/${mine!.member_id}/remove`, {});
    expect(refused.status).toBe(409);
    expect(text(refused.html)).toContain("last owner");
    const demoted = await v.post(`/dashboard/projects/${projectId}/members/${mine!.member_id}/role`, {
      role: "viewer",
    });
    expect(demoted.status).toBe(409);

    // A second owner: now the first may leave, and lands on their (now empty) project list.
    const second = await person(api);
    await asPerson(api, owner)(`/v2/projects/${projectId}/members`, {
      method: "POST",
      body: { email: second.email, role: "owner" },
    });
    const left = await v.post(`/dashboard/projects/${projectId}/members/${mine!.member_id}/remove`, {});
    expect(left.status).toBe(303);
    expect(left.location).toBe("/dashboard/projects");
    expect((await v.get(`/dashboard/projects/${projectId}/members`)).status).toBe(404);
  });

  it("says which API keys end before removing a member or making them a viewer, and which ended after", async () => {
    const api = client();
    const ownerEmail = `page-tokens-${Date.now()}@example.test`;
    const projectId = await projectOwnedBy(api, ownerEmail);
    const owner = await person(api, { email: ownerEmail });
    const developer = await person(api, { name: "Dana Dev" });
    const asOwner = asPerson(api, owner);
    const member = (
      await asOwner<Member>(`/v2/projects/${projectId}/members`, {
        method: "POST",
        body: { email: developer.email, role: "developer" },
      })
    ).body;
    const expires_at = new Date(api.clock.now().getTime() + 86_400_000).toISOString();
    for (const name of ["dana-ci", "dana-deploy"]) {
      await asPerson(api, developer)(`/v2/projects/${projectId}/service-accounts`, {
        method: "POST",
        body: { name, expires_at },
      });
    }
    const v = visitor(api);
    await signInAs(v, api, owner);

    // API Keys says who made each key (they end with their creator).
    const keys = text((await v.get(`/dashboard/projects/${projectId}/api-keys`)).html);
    expect(keys).toContain("Created by");
    expect(keys).toMatch(/dana-ci .*a member/);

    const list = await v.get(`/dashboard/projects/${projectId}/members`);
    expect(list.html).toContain(`href="/dashboard/projects/${projectId}/members/${member.member_id}/remove"`);
    const confirm = await v.get(`/dashboard/projects/${projectId}/members/${member.member_id}/remove`);
    expect(confirm.status).toBe(200);
    expect(text(confirm.html)).toContain("Remove Dana Dev?");
    expect(text(confirm.html)).toMatch(/2 API keys created by Dana Dev \(or by their keys\) stop working at once/);
    expect(text(confirm.html)).toContain("dana-ci");
    expect(text(confirm.html)).toContain("dana-deploy");

    // Made a viewer: asked first, with the same list; confirmed, the keys end.
    const ask = await v.post(`/dashboard/projects/${projectId}/members/${member.member_id}/role`, { role: "viewer" });
    expect(ask.status).toBe(200);
    expect(text(ask.html)).toContain("Make Dana Dev a viewer?");
    expect(text(ask.html)).toContain("dana-deploy");
    expect(
      (await asOwner<{ data: { role: string }[] }>(`/v2/projects/${projectId}/members`)).body.data
        .map((m) => m.role)
        .sort(),
    ).toEqual(["developer", "owner"]);
    const done = await v.post(`/dashboard/projects/${projectId}/members/${member.member_id}/role`, {
      role: "viewer",
      confirmed: "yes",
    });
    expect(text(done.html)).toMatch(/Dana Dev is now viewer\. 2 API keys they created stopped working/);

    // Nothing left to end: removal says so before, and removes.
    const again = await v.get(`/dashboard/projects/${projectId}/members/${member.member_id}/remove`);
    expect(text(again.html)).toContain("created no API key that is still working");
    const removed = await v.post(`/dashboard/projects/${projectId}/members/${member.member_id}/remove`, {});
    expect(text(removed.html)).toContain("Dana Dev was removed.");
  });
});
