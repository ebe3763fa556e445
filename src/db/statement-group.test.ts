import { env } from "cloudflare:workers";
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { countingRoundTrips } from "../../test/runs";
import { createDb } from "./client";
import { webhookAttempts, webhookDeliveries } from "./schema";
import { prepared, StatementGroup } from "./statement-group";

const select = (d1: D1Database, value: number) => d1.prepare("SELECT ? AS value").bind(value);
const turn = () => new Promise((resolve) => setTimeout(resolve, 0));

describe("StatementGroup", () => {
  it("sends the statements of one turn as one batch, each caller getting its own result", async () => {
    const d1 = countingRoundTrips(env.DB);
    const group = new StatementGroup(createDb(d1.db), 60_000);
    const results = await Promise.all([1, 2, 3].map((n) => group.run<{ value: number }>(select(d1.db, n))));
    expect(results.map((r) => r.results)).toEqual([[{ value: 1 }], [{ value: 2 }], [{ value: 3 }]]);
    expect(d1.trips()).toBe(1);
    expect([group.trips, group.statements]).toEqual([1, 3]);
  });

  it("holds a statement while a write is coming, and sends it with that write", async () => {
    const d1 = countingRoundTrips(env.DB);
    const group = new StatementGroup(createDb(d1.db), 60_000);
    const coming = group.hold();
    const first = group.run(select(d1.db, 1));
    for (let i = 0; i < 5; i++) await turn();
    expect(d1.trips()).toBe(0);
    const second = group.run(select(d1.db, 2));
    coming();
    await Promise.all([first, second]);
    expect(d1.trips()).toBe(1);
  });

  it("waits for a hold no longer than its window", async () => {
    const group = new StatementGroup(createDb(env.DB), 30);
    group.hold();
    const started = Date.now();
    await group.run(select(env.DB, 1));
    expect(Date.now() - started).toBeGreaterThanOrEqual(25);
    expect(group.trips).toBe(1);
  });

  it("fails every statement of a failed batch with its error, as D1 runs a batch as one transaction", async () => {
    const group = new StatementGroup(createDb(env.DB), 60_000);
    const outcomes = await Promise.allSettled([
      group.run(select(env.DB, 1)),
      group.run(env.DB.prepare("SELECT * FROM no_such_table")),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(["rejected", "rejected"]);
    expect(String((outcomes[0] as PromiseRejectedResult).reason)).toContain("no_such_table");
  });
});

describe("prepared", () => {
  it("renders once and binds each use's values with the columns' own encoding", async () => {
    const db = createDb(env.DB);
    let renders = 0;
    const statement = prepared<{ at: Date; flag: boolean }>(() => {
      renders++;
      return sql`SELECT ${sql.param(sql.placeholder("at"), webhookAttempts.at)} AS at, ${sql.param(sql.placeholder("flag"), webhookDeliveries.signed)} AS flag`;
    });
    const first = await statement(db, { at: new Date(1000), flag: true }).first();
    const second = await statement(db, { at: new Date(2000), flag: false }).first();
    expect([first, second]).toEqual([
      { at: 1000, flag: 1 },
      { at: 2000, flag: 0 },
    ]);
    expect(renders).toBe(1);
  });
});
