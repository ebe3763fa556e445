import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { text, visitor } from "../../test/dashboard-helpers";
import { client } from "../../test/helpers";
import { PEER, releaseStream, watchKey, watchState } from "../../test/peers";
import { seedRunnable } from "../../test/runs";

/** The dashboard's live pages: a run under way on the Runs page and its own page, and the events they follow. */

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

describe("the dashboard's live pages", () => {
  it("shows a synchronous run under way on the Runs page and its page, follows the project's events, and ends", async () => {
    const api = client();
    const key = watchKey();
    const app = await seedRunnable(api, `${PEER}/upstream/echo?hold=${key}&watch=${key}`);
    const v = visitor(api);
    await v.signIn();

    // The events, as the session's caller: the API's stream passed on.
    const events = await api.call(`/dashboard/projects/${app.projectId}/runs/events`, {
      token: null,
      headers: { Cookie: v.cookie },
    });
    expect(events.status).toBe(200);
    expect(events.headers.get("content-type")).toBe("text/event-stream");
    expect(events.headers.get("content-security-policy")).toContain("connect-src 'self'");
    const reader = events.body!.getReader();

    const answering = api.call(app.runPath, { method: "POST", token: app.token, body: {} });
    await expect.poll(async () => (await watchState(key)).arrived).toBe(true);
    const runId = (await watchState(key)).runId!;
    expect(new TextDecoder().decode((await reader.read()).value)).toContain("event: runs");

    const list = await v.get(`/dashboard/projects/${app.projectId}/runs`);
    expect(text(list.html)).toMatch(new RegExp(`Under way ${runId} ${app.appName} sync since`));
    const page = await v.get(`/dashboard/projects/${app.projectId}/runs/${runId}`);
    expect(page.status).toBe(200);
    expect(text(page.html)).toMatch(/Outcome Running under way: its outcome, duration and bytes come with its end/);
    expect(page.html).toContain(`data-live="/dashboard/projects/${app.projectId}/runs/events"`);

    await releaseStream(key);
    await (await answering).text();
    let said = "";
    while (!said.includes("event: runs")) said += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    // Ended: on record, no longer under way, and the page no longer follows anything.
    const ended = await v.get(`/dashboard/projects/${app.projectId}/runs/${runId}`);
    expect(text(ended.html)).toContain("the app answered, and its answer reached its end");
    expect(ended.html).not.toContain("data-live=");
    expect(text((await v.get(`/dashboard/projects/${app.projectId}/runs`)).html)).not.toContain("Under way");
  });

  it("follows nothing without a session, nor a project the API does not show the caller", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const stranger = await api.call(`/dashboard/projects/${app.projectId}/runs/events`, { token: null });
    expect(stranger.status).toBe(303);
    expect(stranger.headers.get("location")).toContain("/dashboard/sign-in");
    const v = visitor(api);
    await v.signIn();
    const missing = await api.call(`/dashboard/projects/proj_${"0".repeat(26)}/runs/events`, {
      token: null,
      headers: { Cookie: v.cookie },
    });
    expect([403, 404]).toContain(missing.status);
    expect(missing.headers.get("content-type")).not.toBe("text/event-stream");
  });
});
