import { describe, expect, it } from "vitest";
import { text, visitor } from "../../test/dashboard-helpers";
import { client } from "../../test/helpers";
import { person, projectOwnedBy, signInAs } from "../../test/people";
import { projectWithRuns } from "../../test/usage-pages";

describe("dashboard usage, runs and receivers: a member of another project", () => {
  it("sees nothing of a project's figures, runs or receivers, by its URL or through their own project's filters", async () => {
    const api = client();
    const p = await projectWithRuns(api);
    const runIds = [...(await p.run(p.ok, 2)), ...(await p.run(p.broken, 1))];
    const email = `usage-outsider-${Date.now()}@example.test`;
    const theirs = await projectOwnedBy(api, email);
    const outsider = await person(api, { email });
    const v = visitor(api);
    await signInAs(v, api, outsider);

    const a = `/dashboard/projects/${p.projectId}`;
    for (const path of [
      `${a}/usage`,
      `${a}/usage?range=7d`,
      `${a}/runs`,
      `${a}/runs?status=5xx`,
      `${a}/webhook-receivers`,
      `${a}/apps/${p.broken.appId}?range=1h`,
      `${a}/runs/${runIds[0]}`,
      `${a}/runs/${runIds[2]}`,
    ]) {
      const page = await v.get(path);
      expect(page.status, path).toBe(404);
      for (const secret of [...runIds, p.broken.appName, p.ok.appName])
        expect(page.html, `${path} shows ${secret}`).not.toContain(secret);
    }
    // Their own project's pages, with the other project's app named in the filter, hold none of it either.
    const own = `/dashboard/projects/${theirs}`;
    expect(text((await v.get(`${own}/usage?range=1h`)).html)).toContain("No runs in this range.");
    // Another project's run id under their own project is no run of theirs.
    const borrowed = await v.get(`${own}/runs/${runIds[2]}`);
    expect(borrowed.status).toBe(404);
    expect(borrowed.html).not.toContain(p.broken.appName);
    const filtered = await v.get(`${own}/runs?app_name=${p.broken.appName}`);
    expect(filtered.status).toBe(200);
    expect(text(filtered.html)).toContain("No runs match these filters.");
    for (const id of runIds) expect(filtered.html).not.toContain(id);

    // The same pages are a viewer's to read once they are a member: the 404s above are about membership.
    const viewerEmail = `usage-viewer-${Date.now()}@example.test`;
    expect(
      (
        await api.json(`/v2/projects/${p.projectId}/invites`, {
          method: "POST",
          body: { email: viewerEmail, role: "viewer" },
        })
      ).status,
    ).toBe(201);
    const viewer = visitor(api);
    await signInAs(viewer, api, await person(api, { email: viewerEmail }));
    const seen = await viewer.get(`${a}/usage?range=1h`);
    expect(seen.status).toBe(200);
    expect(text(seen.html)).toContain("Runs 3 ");
    // A viewer reads a run's page, but a service account's name only as "a service account" (listing keys
    // takes service_accounts:write); its id stays on hover.
    const list = await viewer.get(`${a}/runs`);
    expect(list.html).toMatch(/<span class="caller" title="sa:sa_\w+">a service account</);
    const page = await viewer.get(`${a}/runs/${runIds[2]}`);
    expect(page.status).toBe(200);
    expect(text(page.html)).toContain(`Outcome 500`);
  });
});
