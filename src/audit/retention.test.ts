import { env } from "cloudflare:workers";
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { client, testDeps } from "../../test/helpers";
import { seedRunnable } from "../../test/runs";
import { createDb } from "../db/client";
import { getConfig } from "../platform/env";
import { newId } from "../platform/ids";
import { createScope } from "../platform/scope";
import { retentionCron } from "../retention";
import { auditSlice } from "./retention";

const api = client();
const DAY = 86_400_000;

describe("the audit log's retention", () => {
  it("deletes the entries written more than AUDIT_LOG_RETENTION_DAYS ago, in slices, and keeps the rest listed", async () => {
    const app = await seedRunnable(api);
    const now = api.clock.now().getTime();
    // One entry a day for the last 400 days, each a second into its day.
    const written = Array.from({ length: 400 }, (_, i) => now - (400 - i) * DAY + 1_000);
    await env.DB.batch(
      written.map((at) =>
        env.DB.prepare(
          `INSERT INTO audit_log (id, project_id, actor_kind, actor_id, action, target_type, target_id, request_id, at)
           VALUES (?, ?, 'operator', 'operator', 'app.update', 'app', 'retention-test', 'req_test', ?)`,
        ).bind(newId("aud", at), app.projectId, at),
      ),
    );
    const scope = createScope(env, { waitUntil() {} }, testDeps({ now: () => new Date(now) }));
    expect(scope.config.auditRetentionMs).toBe(90 * DAY);
    // Slices of 10 rows: the 310 entries older than 90 days go in 32, and the purge says it caught up.
    const report = await retentionCron(scope, { rows: 10, subrequests: 400, wallMs: 40_000 });
    expect(report).toMatchObject({ done: true, removed: { audit_log: 310 } });
    const kept = (
      await env.DB.prepare("SELECT at FROM audit_log WHERE target_id = 'retention-test' ORDER BY id")
        .bind()
        .all<{ at: number }>()
    ).results.map((r) => r.at);
    expect(kept).toEqual(written.slice(310));
    // The log as its readers see it: the entries kept, newest first (the seeding's own before them).
    const listed = await api.json<{ data: { target: { id: string }; at: string }[] }>(
      `/v2/projects/${app.projectId}/audit-log?limit=100`,
    );
    expect(listed.status).toBe(200);
    const mine = listed.body.data.filter((e) => e.target.id === "retention-test").map((e) => Date.parse(e.at));
    expect(mine).toEqual(written.slice(-mine.length).reverse());
    // A second run finds nothing more to delete.
    expect((await retentionCron(scope, { rows: 10, subrequests: 400, wallMs: 40_000 })).removed.audit_log ?? 0).toBe(0);
  });

  it("takes a slice over the primary key's index: it reads only the rows it deletes", async () => {
    const plan = (
      await createDb(env.DB).all<{ detail: string }>(sql`EXPLAIN QUERY PLAN ${auditSlice(Date.now(), 500)}`)
    )
      .map((r) => r.detail)
      .join(" | ");
    expect(plan).toMatch(/SEARCH audit_log USING (COVERING )?INDEX sqlite_autoindex_audit_log_1 \(id<\?\)/);
    expect(plan).not.toMatch(/SCAN|TEMP B-TREE/);
  });

  it("is a setting from 30 days to 10 years, 90 days by default", () => {
    expect(getConfig({ ...env, AUDIT_LOG_RETENTION_DAYS: "90" }).auditRetentionMs).toBe(90 * DAY);
    expect(() => getConfig({ ...env, AUDIT_LOG_RETENTION_DAYS: "7" })).toThrow(
      /AUDIT_LOG_RETENTION_DAYS must be at least 30/,
    );
    expect(() => getConfig({ ...env, AUDIT_LOG_RETENTION_DAYS: "forever" })).toThrow(
      /AUDIT_LOG_RETENTION_DAYS is not a number of days/,
    );
  });
});
