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

    const invited = await v.post(`/dashboard/projects/${projectId}/members/invites`, { email: "Newcomer@Example.test", role: "developer" });
    expect(invited.status).toBe(200);
    expect(text(invited.html)).toContain("newcomer@example.test is invited as developer");

    const [mine] = (await asPerson(api, owner)<{ data: Member[] }>(`/v2/projects/${projectId}/members`)).body.data;
    const refused = await v.post(`/dashboard/projects/${projectId}/members/${mine!.member_id}/remove`, {});
    expect(refused.status).toBe(409);
    expect(text(refused.html)).toContain("last owner");
    const demoted = await v.post(`/dashboard/projects/${projectId}/members/${mine!.member_id}/role`, { role: "viewer" });
    expect(demoted.status).toBe(409);

    // A second owner: now the first may leave, and lands on their (now empty) project list.
    const second = await person(api);
    await asPerson(api, owner)(`/v2/projects/${projectId}/members`, { method: "POST", body: { email: second.email, role: "owner" } });
    const left = await v.post(`/dashboard/projects/${projectId}/members/${mine!.member_id}/remove`, {});
    expect(left.status).toBe(303);
    expect(left.location).toBe("/dashboard/projects");
    expect((await v.get(`/dashboard/projects/${projectId}/members`)).status).toBe(404);
  });
});
