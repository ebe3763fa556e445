import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { text, visitor } from "../../test/dashboard-helpers";
import { type Client, client } from "../../test/helpers";
import { person, signInAs } from "../../test/people";
import { seedRunnable } from "../../test/runs";
import { until } from "../../test/deliveries";
import { newId } from "../platform/ids";
import { utcTime } from "./pages/receiver";

/**
 * A receiver's page (`…/webhook-receivers/{origin}`): its state and controls, figures, the recovery's
 * count and the task it follows, its held and failed deliveries. Deliveries and tasks are written to D1
 * as the pipeline writes them, so that each state of the page is shown exactly (the pipeline itself is
 * src/webhooks/receivers.test.ts's; the page in a browser against wrangler dev, with the progress bar
 * following a real recovery, is test/node/receiver-page.browser.test.ts).
 */

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
});
afterEach(() => {
  vi.restoreAllMocks();
});

const ORIGIN = "https://hooks.example.test";

async function delivery(
  api: Client,
  projectId: string,
  status: "held" | "failed" | "delivered" | "pending",
  extra: { lastError?: string; taskId?: string; at?: number } = {},
) {
  const id = newId("whd");
  const at = extra.at ?? api.clock.now().getTime();
  await env.DB.prepare(
    `INSERT INTO webhook_deliveries (id, project_id, run_id, endpoint, signed, body_bytes, status, attempt_count,
       last_status_code, last_error, created_at, updated_at, completed_at, body, message_id, task_id)
     VALUES (?, ?, ?, ?, 0, 8, ?, ?, ?, ?, ?, ?, ?, '{"x":1}', ?, ?)`,
  )
    .bind(
      id,
      projectId,
      `run_${id.slice(4)}`,
      `${ORIGIN}/in`,
      status,
      status === "held" ? 0 : 3,
      status === "failed" ? 503 : status === "delivered" ? 204 : null,
      extra.lastError ?? (status === "failed" ? "attempts_exhausted" : null),
      at,
      at,
      status === "failed" || status === "delivered" ? at : null,
      id,
      extra.taskId ?? null,
    )
    .run();
  api.clock.advance(1);
  return id;
}

async function task(
  api: Client,
  projectId: string,
  fields: { dryRun: boolean; status: string; counted: number; sent?: number; kind?: string },
) {
  const id = newId("wrt");
  const at = api.clock.now().getTime();
  await env.DB.prepare(
    `INSERT INTO webhook_receiver_tasks (id, project_id, origin, kind, dry_run, status, since, until, counted, sent,
       created_by, created_at, updated_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'test', ?, ?, ?)`,
  )
    .bind(
      id,
      projectId,
      ORIGIN,
      fields.kind ?? "recover",
      fields.dryRun ? 1 : 0,
      fields.status,
      at - 3_600_000,
      at,
      fields.counted,
      fields.sent ?? 0,
      at,
      at,
      fields.status === "finished" ? at : null,
    )
    .run();
  return id;
}

/** Waits for the project's tasks (started by the controls, run by their objects) to end, so none outlives its test. */
async function releasesOver(projectId: string) {
  const running = () =>
    env.DB.prepare(
      "SELECT count(*) AS n FROM webhook_receiver_tasks WHERE project_id = ? AND status IN ('counting', 'sending')",
    )
      .bind(projectId)
      .first<{ n: number }>()
      .then((row) => row?.n ?? 0);
  expect(await until(running, (n) => n === 0, 15_000)).toBe(0);
}

async function signedIn() {
  const api = client();
  const seed = await seedRunnable(api);
  const v = visitor(api);
  await v.signIn();
  const page = `/dashboard/projects/${seed.projectId}/webhook-receivers/${encodeURIComponent(ORIGIN)}`;
  return { api, seed, v, page, projectId: seed.projectId };
}

describe("a receiver's page", () => {
  it("shows its state, figures, and its failed and held deliveries, newest first, with links to the whole lists; the list links to it", async () => {
    const { api, v, page, projectId } = await signedIn();
    await delivery(api, projectId, "delivered");
    const older = await delivery(api, projectId, "failed");
    const newer = await delivery(api, projectId, "failed", { lastError: "connection_failed" });

    const list = await v.get(`/dashboard/projects/${projectId}/webhook-receivers`);
    expect(list.html).toContain(`<a href="${page}"><code>${ORIGIN}</code></a>`);

    const shown = await v.get(page);
    expect(shown.status).toBe(200);
    const words = text(shown.html);
    expect(words).toContain(`Receiver ${ORIGIN}`);
    expect(words).toMatch(/State Failing Active: its deliveries are sent as they come\. Pause/);
    expect(words).toMatch(/Delivered 1 Failed 2 not delivered since Recovered 0/);
    expect(words).toContain("Last failure: connection_failed (could not connect)");
    // Failed: newest first, each with its outcome; the whole list is the deliveries page, filtered.
    const failed = /<section id="failed-deliveries".*?<\/section>/s.exec(shown.html)![0];
    expect(failed.indexOf(newer)).toBeGreaterThan(0);
    expect(failed.indexOf(newer)).toBeLessThan(failed.indexOf(older));
    expect(failed).toContain(
      `href="/dashboard/projects/${projectId}/webhook-deliveries?status=failed&amp;origin=${encodeURIComponent(ORIGIN)}"`,
    );
    expect(text(/<section id="held-deliveries".*?<\/section>/s.exec(shown.html)![0])).toContain(
      "None: nothing is waiting for this receiver.",
    );
    // The recovery's form: the window from the page's range (7 days), until empty (now); the count first.
    expect(shown.html).toMatch(
      /id="recover-since" name="since" type="datetime-local" step="1" value="\d{4}-\d\d-\d\dT\d\d:00"/,
    );
    expect(words).toContain("Count failed deliveries");
    expect(words).not.toContain("Recover 2");
  });

  it("an unknown or malformed origin is the API's 404 problem, as a page", async () => {
    const { v, projectId } = await signedIn();
    for (const origin of ["https://never.example.test", "not an origin"]) {
      const page = await v.get(`/dashboard/projects/${projectId}/webhook-receivers/${encodeURIComponent(origin)}`);
      expect(page.status, origin).toBe(404);
      expect(text(page.html)).toContain("Receiver not found");
      expect(text(page.html)).toMatch(/No webhook receiver/);
      expect(page.html).not.toContain("Count failed deliveries");
    }
  });

  it("pauses from its page (its held deliveries listed), then resumes, following the release of what was held", async () => {
    const { api, v, page, projectId } = await signedIn();
    await delivery(api, projectId, "delivered");
    const control = `/dashboard/projects/${projectId}/webhook-receivers/control`;
    const paused = await v.post(control, { origin: ORIGIN, action: "pause" });
    expect(paused.status).toBe(303);
    expect(paused.location).toBe(page);
    const held = await delivery(api, projectId, "held", { lastError: "receiver_paused" });
    const shown = await v.get(page);
    expect(text(shown.html)).toMatch(
      /State Paused Paused \(since .* UTC \)\. Its new deliveries are held until it is resumed\. Resume/,
    );
    const heldList = text(/<section id="held-deliveries".*?<\/section>/s.exec(shown.html)![0]);
    expect(heldList).toContain(held);
    expect(heldList).toContain("Held");
    expect(heldList).toContain("receiver_paused (held: its receiver is paused)");
    // Nothing is sent from here on (the hold ended otherwise): the releases below have nothing to send.
    await env.DB.prepare("DELETE FROM webhook_deliveries WHERE id = ?").bind(held).run();
    // From the list, Pause and Resume lead back to the list.
    const fromList = await v.post(control, { origin: ORIGIN, action: "resume", back: "list" });
    expect(fromList.location).toBe(`/dashboard/projects/${projectId}/webhook-receivers`);
    await releasesOver(projectId);
    await v.post(control, { origin: ORIGIN, action: "pause" });
    // From its page, Resume follows the task that sends what was held.
    const resumed = await v.post(control, { origin: ORIGIN, action: "resume" });
    expect(resumed.status).toBe(303);
    expect(resumed.location).toMatch(new RegExp(`^${page.replace(/[.?]/g, "\\$&")}\\?task=wrt_[0-9a-z]{30}$`));
    const following = await v.get(resumed.location!);
    expect(text(following.html)).toContain("Sending what was held");
    expect(text(following.html)).toMatch(/State Healthy Active/);
    await releasesOver(projectId);
    // Two release tasks on real Durable Objects, each to its end: over 4 s on a quiet machine, past the default 5 s on a busy one.
  }, 20_000);

  it("a dry run's count offers the recovery; a running recovery is a progress bar with Refresh and Cancel, and its card alone for the script", async () => {
    const { api, v, page, projectId } = await signedIn();
    await delivery(api, projectId, "failed");
    const counted = await task(api, projectId, { dryRun: true, status: "finished", counted: 3 });
    const count = await v.get(`${page}?task=${counted}`);
    expect(text(count.html)).toMatch(/3 failed deliveries made from .* UTC to .* UTC can be sent again\./);
    const recoverForm = /<form[^>]*>(?:(?!<\/form>).)*name="action" value="recover"(?:(?!<\/form>).)*<\/form>/s.exec(
      count.html,
    )![0];
    expect(recoverForm).toMatch(/name="since" value="\d{4}-\d\d-\d\dT[\d:.]+Z"/);
    expect(text(recoverForm)).toContain("Recover 3 deliveries");
    expect(count.html).not.toContain("data-running");

    const recovering = await task(api, projectId, { dryRun: false, status: "sending", counted: 5, sent: 3 });
    await delivery(api, projectId, "delivered", { taskId: recovering });
    await delivery(api, projectId, "delivered", { taskId: recovering });
    await delivery(api, projectId, "pending", { taskId: recovering });
    const self = `${page}?task=${recovering}`;
    const progress = await v.get(self);
    const words = text(progress.html);
    expect(words).toContain("Recovery 2 of 5 delivered , 0 failed again, 1 on their way · sending.");
    expect(progress.html).toMatch(/<progress max="5" value="2" aria-label="Recovery: 2 of 5 settled">/);
    expect(progress.html).toContain(`id="task-card" data-task="${recovering}" data-running=""`);
    expect(progress.html).toContain(`<a href="${self}&amp;range=7d" class="refresh">Refresh</a>`);
    expect(words).toContain("Cancel");

    // Come back to the page without the task in its address: it still follows the recovery under way.
    const back = await v.get(page);
    expect(back.html).toContain(`id="task-card" data-task="${recovering}" data-running=""`);
    const detail = await api.json<{ running_task_id: string | null }>(
      `/v2/projects/${projectId}/webhook-receivers/${encodeURIComponent(ORIGIN)}`,
    );
    expect(detail.body.running_task_id).toBe(recovering);

    // The card alone, as the dashboard's script asks for it.
    const card = await api.call(
      `/dashboard/projects/${projectId}/webhook-receivers/${encodeURIComponent(ORIGIN)}/tasks/${recovering}`,
      { token: null, headers: { Cookie: v.cookie } },
    );
    expect(card.status).toBe(200);
    const json = (await card.json()) as { running: boolean; html: string };
    expect(json.running).toBe(true);
    expect(json.html).toMatch(/^<div class="card" id="task-card"/);
    expect(json.html).toContain('<progress max="5" value="2"');

    // Cancel: the task says so, and is no longer followed.
    const cancelled = await v.post(`/dashboard/projects/${projectId}/webhook-receivers/control`, {
      origin: ORIGIN,
      action: "cancel",
      task: recovering,
    });
    expect(cancelled.status).toBe(303);
    expect(cancelled.location).toBe(self);
    const after = await v.get(self);
    expect(text(after.html)).toMatch(/2 of 5 delivered .* · cancelled: 2 not sent\./);
    expect(after.html).not.toContain("data-running");
    expect(after.html).not.toContain('class="refresh"');
    expect(
      (
        await api.json<{ running_task_id: string | null }>(
          `/v2/projects/${projectId}/webhook-receivers/${encodeURIComponent(ORIGIN)}`,
        )
      ).body.running_task_id,
    ).toBeNull();
  });

  it("counts from its form (a UTC time as the field gives it); a window the API refuses is its problem, shown", async () => {
    const { api, v, page, projectId } = await signedIn();
    await delivery(api, projectId, "failed");
    const control = `/dashboard/projects/${projectId}/webhook-receivers/control`;
    const since = new Date(api.clock.now().getTime() - 2 * 3_600_000).toISOString().slice(0, 16);
    const counted = await v.post(control, { origin: ORIGIN, action: "count", since, until: "" });
    expect(counted.status).toBe(303);
    expect(counted.location).toMatch(new RegExp(`^${page.replace(/[.?]/g, "\\$&")}\\?task=wrt_[0-9a-z]{30}$`));
    expect(text((await v.get(counted.location!)).html)).toMatch(/Counting the failed deliveries|can be sent again/);
    await releasesOver(projectId);

    const refused = await v.post(control, { origin: ORIGIN, action: "count", since: "yesterday" });
    expect(refused.status).toBe(400);
    expect(text(refused.html)).toContain("The receiver was not changed");
    expect(text(refused.html)).toContain("since");
    expect(refused.html).toContain(`href="${page}"`);
  });

  it("a viewer reads it but sees no control, and is told why", async () => {
    const { api, projectId, page } = await signedIn();
    await delivery(api, projectId, "failed");
    const email = `receiver-viewer-${Date.now()}@example.test`;
    const invited = await api.json(`/v2/projects/${projectId}/invites`, {
      method: "POST",
      body: { email, role: "viewer" },
    });
    expect(invited.status).toBe(201);
    const viewer = visitor(api);
    await signInAs(viewer, api, await person(api, { email }));
    const counted = await task(api, projectId, { dryRun: true, status: "finished", counted: 1 });
    const shown = await viewer.get(`${page}?task=${counted}`);
    expect(shown.status).toBe(200);
    const words = text(shown.html);
    expect(words).toContain(`Receiver ${ORIGIN}`);
    expect(words).toContain("Your role in this project is viewer");
    expect(words).toContain("attempts_exhausted");
    for (const control of ["Pause", "Count failed deliveries", "Recover 1", "Cancel"])
      expect(words, control).not.toContain(control);
    expect(shown.html).not.toContain('name="action"');
    // The list shows no control to a viewer either.
    const list = await viewer.get(`/dashboard/projects/${projectId}/webhook-receivers`);
    expect(list.html).not.toContain('name="action"');
  });
});

describe("GET …/webhook-receivers/{origin}", () => {
  it("is one receiver's state and figures alone (zeros outside its deliveries' range); an origin never delivered to is a 404", async () => {
    const { api, projectId } = await signedIn();
    const path = (origin: string, query = "") =>
      `/v2/projects/${projectId}/webhook-receivers/${encodeURIComponent(origin)}${query}`;
    const since = api.clock.now().toISOString();
    await delivery(api, projectId, "delivered");
    await delivery(api, projectId, "failed");
    // Another receiver's delivery of the same project counts for it, not for this one.
    await env.DB.prepare(
      "INSERT INTO webhook_deliveries (id, project_id, run_id, endpoint, signed, body_bytes, status, attempt_count, created_at, updated_at) VALUES (?, ?, 'run_x', 'https://other.example.test/in', 0, 8, 'failed', 3, ?, ?)",
    )
      .bind(newId("whd"), projectId, api.clock.now().getTime(), api.clock.now().getTime())
      .run();
    const one = await api.json<Record<string, unknown>>(path(ORIGIN));
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({
      origin: ORIGIN,
      state: "active",
      state_cause: null,
      state_changed_at: null,
      delivered: 1,
      failed: 1,
      held: 0,
      concurrency: 6,
    });
    // Paused, and asked about a range before its deliveries: its state, figures of zero.
    await api.json(path(ORIGIN, "/pause"), { method: "POST" });
    const before = await api.json<Record<string, unknown>>(
      path(
        ORIGIN,
        `?from=${encodeURIComponent(new Date(Date.parse(since) - 3_600_000).toISOString())}&to=${encodeURIComponent(since)}`,
      ),
    );
    expect(before.body).toMatchObject({
      origin: ORIGIN,
      state: "paused",
      state_cause: "paused",
      delivered: 0,
      failed: 0,
    });
    expect(before.body.state_changed_at).toEqual(expect.stringMatching(/^\d{4}-/));
    const unknown = await api.json<{ code: string }>(path("https://never.example.test"));
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe("not_found");
  });
});

describe("utcTime", () => {
  it("reads a datetime-local field's value as UTC, and passes anything else on as typed", () => {
    expect(utcTime("2026-11-27T16:05")).toBe("2026-11-27T16:05:00Z");
    expect(utcTime("2026-11-27T16:05:09")).toBe("2026-11-27T16:05:09Z");
    expect(utcTime(" 2026-11-27T16:05:00Z ")).toBe("2026-11-27T16:05:00Z");
    expect(utcTime("yesterday")).toBe("yesterday");
  });
});
