import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { deliveryMessages, deliveryRow, until } from "../../test/deliveries";
import { client } from "../../test/helpers";
import { PEER_MORE, PEER_OTHER, received, receiver } from "../../test/peers";
import { seedRunnable } from "../../test/runs";
import { PERMISSIONS } from "../auth/permissions";
import { LANE_CONCURRENCY, MAX_RECEIVER_CONCURRENCY } from "./lane-capacity";
import { type DeliveryMessage, laneName, laneObject, laneShardName } from "./message";
import { MAX_GAP_MS, RETRY_DELAYS_SECONDS } from "./policy";
import { rowsInDeliveryStores } from "../../test/delivery-stores";

/**
 * A lane's scheduling and a receiver's concurrency, through the real local Durable Objects: a delivery
 * between attempts holds no connection, retries that are due go before first attempts and keep the
 * spec's gap under a backlog of thousands (receivers that time out included), concurrency 1 is
 * ordered, above 6 the receiver's deliveries are spread over shards. Attempts time out after 2 s here
 * (vitest.config.ts). The attempts' own records in D1 are the evidence: when each began (`at`) and how
 * long its request lasted.
 */

const api = client();

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => undefined);
  vi.spyOn(console, "warn").mockImplementation(() => undefined);
});

afterEach(() => {
  vi.restoreAllMocks();
});

interface AttemptRecord {
  delivery_id: string;
  attempt: number;
  at: number;
  duration_ms: number;
  outcome: string;
}

async function attemptsOf(ids: string[]): Promise<AttemptRecord[]> {
  const rows: AttemptRecord[] = [];
  for (let i = 0; i < ids.length; i += 90) {
    const part = ids.slice(i, i + 90);
    rows.push(
      ...(await rowsInDeliveryStores<AttemptRecord>(
        `SELECT delivery_id, attempt, at, duration_ms, outcome FROM webhook_attempts WHERE delivery_id IN (${part.map(() => "?").join(",")})`,
        part,
      )),
    );
  }
  // Across its stores (each log, D1), in the order they were made.
  return rows.sort((a, b) => a.at - b.at);
}

/** The most requests in flight at once: each attempt's request lies within [at, at + duration] of its slot. */
function mostAtOnce(attempts: AttemptRecord[]): number {
  const edges = attempts.flatMap((a) => [
    { t: a.at, d: 1 },
    { t: a.at + a.duration_ms, d: -1 },
  ]);
  edges.sort((x, y) => x.t - y.t || x.d - y.d);
  let open = 0;
  let most = 0;
  for (const e of edges) most = Math.max(most, (open += e.d));
  return most;
}

/** Every gap from the end of an attempt to the start of the next, per delivery. */
function gaps(attempts: AttemptRecord[]): { id: string; attempt: number; ms: number }[] {
  const byDelivery = Map.groupBy(attempts, (a) => a.delivery_id);
  return [...byDelivery].flatMap(([id, list]) => {
    list.sort((a, b) => a.attempt - b.attempt);
    return list.slice(1).map((a, i) => ({ id, attempt: a.attempt, ms: a.at - (list[i]!.at + list[i]!.duration_ms) }));
  });
}

/** `count` messages of deliveries to `endpoint`, made as the queue carries them (the claim writes the record). */
function messagesTo(projectId: string, endpoint: string, count: number, tag: string): DeliveryMessage[] {
  return Array.from({ length: count }, (_, i) => {
    const body = JSON.stringify({ n: i });
    return {
      v: 1 as const,
      id: `whd_${tag}${i.toString().padStart(5, "0")}`,
      projectId,
      runId: `run_${tag}${i}`,
      endpoint,
      createdAt: Date.now(),
      bodyBytes: body.length,
      body: { inline: body },
      secret: null,
    };
  });
}

/** Empties a lane's backlog (its attempts in flight end on their own), so a test leaves no work behind. */
async function drop(name: string) {
  await runInDurableObject(laneObject(env, name), (_instance, state) => {
    state.storage.sql.exec("DELETE FROM lane_deliveries");
  });
}

describe("a pause holds no connection; retries that are due go first", () => {
  it("60 deliveries whose first answer asks for a retry: their pauses hold no slot, so all are delivered well before six at a time through each pause could be", async () => {
    const app = await seedRunnable(api);
    const origin = PEER_MORE[0]!;
    const hooks = await Promise.all(
      Array.from({ length: 60 }, () =>
        receiver(
          [
            { status: 404, delayMs: 50 },
            { status: 204, delayMs: 50 },
          ],
          undefined,
          origin,
        ),
      ),
    );
    const messages = (
      await Promise.all(hooks.map((h, i) => deliveryMessages(api, app.projectId, h.url, [`{"n":${i}}`])))
    ).flat();
    const started = Date.now();
    await laneObject(env, laneName(messages[0]!)).accept(messages);
    const ids = messages.map((m) => m.id);
    const rows = await until(
      () => Promise.all(ids.map((id) => deliveryRow(id))),
      (r) => r.every((row) => row?.status === "delivered"),
      60_000,
    );
    expect(rows.map((r) => r?.status)).toEqual(ids.map(() => "delivered"));
    const attempts = await attemptsOf(ids);
    // Two each, unless this machine's load made an answer miss the 2 s timeout.
    expect(attempts.length).toBeGreaterThanOrEqual(120);
    // While the first ones pause, the rest take their slots. Were each slot held from a delivery's first
    // attempt to its last, the 1 s pause included, 60 deliveries on 6 slots would take at least the sum
    // of (attempt 1 + 1 s + attempt 2) ÷ 6 (this machine's own attempt times, measured): well over 10 s.
    const byDelivery = Map.groupBy(attempts, (a) => a.delivery_id);
    const heldThroughPauses =
      [...byDelivery.values()].reduce(
        (sum, list) =>
          sum +
          list.reduce((d, a) => d + a.duration_ms, 0) +
          RETRY_DELAYS_SECONDS.slice(0, list.length - 1).reduce((p, seconds) => p + seconds * 1000, 0),
        0,
      ) / LANE_CONCURRENCY;
    const span = Math.max(...attempts.map((a) => a.at + a.duration_ms)) - started;
    console.log(
      `60 deliveries, each retried once: all delivered ${span} ms after the lane took them (a slot held through each pause: ≥ ${Math.round(heldThroughPauses)} ms)`,
    );
    expect(span).toBeLessThan(0.8 * heldThroughPauses);
    expect(mostAtOnce(attempts)).toBeLessThanOrEqual(LANE_CONCURRENCY);
    for (const gap of gaps(attempts))
      expect(gap.ms, `${gap.id} before attempt ${gap.attempt}`).toBeLessThanOrEqual(MAX_GAP_MS);
    for (const h of hooks) expect(await received(h.key)).toHaveLength(2);
  }, 90_000);

  it("a backlog of 2,000 to a receiver that times out: at most 6 in flight, every retry within 5 s, none waits behind a first attempt", async () => {
    const app = await seedRunnable(api);
    const hook = await receiver([{ status: 200, delayMs: 10_000 }], undefined, PEER_MORE[1]);
    const messages = messagesTo(app.projectId, hook.url, 2_000, `bk${Date.now().toString(36)}`);
    const lane = laneName(messages[0]!);
    for (let i = 0; i < messages.length; i += 500) await laneObject(env, lane).accept(messages.slice(i, i + 500));
    const started = Date.now();
    const ids = messages.map((m) => m.id);
    // Long enough for deliveries to reach their third attempt (2 s timeouts, 1 s and 3 s pauses).
    const attempts = await until(
      () => attemptsOf(ids),
      (a) => a.filter((x) => x.attempt === 3).length >= 6,
      30_000,
    );
    const observedAt = Date.now();
    await drop(lane);
    expect(attempts.filter((a) => a.attempt === 3).length).toBeGreaterThanOrEqual(6);
    expect(mostAtOnce(attempts)).toBeLessThanOrEqual(LANE_CONCURRENCY);
    for (const gap of gaps(attempts))
      expect(gap.ms, `${gap.id} before attempt ${gap.attempt}`).toBeLessThanOrEqual(MAX_GAP_MS);
    // A retry owed for more than 5 s and not begun (nor claimed) would be late too.
    const claims = new Map<string, number>();
    for (const id of new Set(attempts.map((a) => a.delivery_id)))
      claims.set(id, (await deliveryRow(id))?.attempt_count ?? 0);
    const byDelivery = Map.groupBy(attempts, (a) => a.delivery_id);
    for (const [id, list] of byDelivery) {
      const last = list.reduce((a, b) => (b.attempt > a.attempt ? b : a));
      if (last.attempt < 3 && claims.get(id) === last.attempt)
        expect(observedAt - (last.at + last.duration_ms), `${id}: its retry`).toBeLessThanOrEqual(MAX_GAP_MS + 1_000);
    }
    // Retries first: no first attempt began while a retry was due and still waiting for a slot.
    const firsts = attempts.filter((a) => a.attempt === 1).map((a) => a.at);
    for (const [, list] of byDelivery) {
      list.sort((a, b) => a.attempt - b.attempt);
      for (let n = 1; n < list.length; n++) {
        const due = list[n - 1]!.at + list[n - 1]!.duration_ms + RETRY_DELAYS_SECONDS[n - 1]! * 1000;
        const jumped = firsts.filter((at) => at > due + 100 && at < list[n]!.at - 100);
        expect(jumped, `first attempts begun while ${list[n]!.delivery_id}'s attempt ${n + 1} was due`).toEqual([]);
      }
    }
    console.log(
      `backlog of 2,000 to a receiver that times out: ${attempts.length} attempts in ${observedAt - started} ms, ` +
        `longest gap ${Math.max(...gaps(attempts).map((g) => g.ms))} ms`,
    );
  }, 60_000);
});

describe("a receiver's concurrency, set by its customer", () => {
  const patch = (projectId: string, origin: string, body: unknown, token: string) =>
    api.json<Record<string, unknown>>(`/v2/projects/${projectId}/webhook-receivers/${encodeURIComponent(origin)}`, {
      method: "PATCH",
      token,
      body,
    });

  it("1 is ordered: the next delivery's first attempt waits until the one before it settled; the list shows it", async () => {
    const app = await seedRunnable(api);
    const origin = PEER_MORE[2]!;
    expect(await patch(app.projectId, origin, { concurrency: 1 }, app.token)).toMatchObject({
      status: 200,
      body: { origin, concurrency: 1 },
    });
    const hooks = await Promise.all(
      Array.from({ length: 4 }, () => receiver([{ status: 404 }, { status: 204 }], undefined, origin)),
    );
    const messages = (
      await Promise.all(hooks.map((h, i) => deliveryMessages(api, app.projectId, h.url, [`{"n":${i}}`])))
    ).flat();
    await laneObject(env, laneName(messages[0]!)).accept(messages);
    const ids = messages.map((m) => m.id);
    await until(
      () => Promise.all(ids.map((id) => deliveryRow(id))),
      (r) => r.every((row) => row?.status === "delivered"),
      20_000,
    );
    const requests = await Promise.all(hooks.map((h) => received(h.key)));
    for (let k = 1; k < requests.length; k++)
      expect(requests[k]![0]!.at, `delivery ${k + 1} began after delivery ${k} settled`).toBeGreaterThanOrEqual(
        requests[k - 1]![1]!.at,
      );
    const list = await api.json<{ data: { origin: string; concurrency: number }[] }>(
      `/v2/projects/${app.projectId}/webhook-receivers`,
      { token: app.token },
    );
    expect(list.body.data.find((r) => r.origin === origin)?.concurrency).toBe(1);
  }, 40_000);

  it("12 is spread over two shards of the lane: more than 6 requests at once, never more than 12", async () => {
    const app = await seedRunnable(api);
    const origin = PEER_OTHER;
    expect((await patch(app.projectId, origin, { concurrency: 12 }, app.token)).status).toBe(200);
    const hook = await receiver([{ status: 200, delayMs: 500 }], undefined, origin);
    const messages = messagesTo(app.projectId, hook.url, 36, `sh${Date.now().toString(36)}`);
    const lane = laneName(messages[0]!);
    expect(await laneObject(env, lane).accept(messages)).toEqual({ stored: messages.map(() => true) });
    const ids = messages.map((m) => m.id);
    await until(
      () => Promise.all(ids.map((id) => deliveryRow(id))),
      (r) => r.every((row) => row?.status === "delivered"),
      20_000,
    );
    const attempts = await attemptsOf(ids);
    // One attempt each, unless this machine's load made a 500 ms answer miss the 2 s timeout.
    expect(new Set(attempts.map((a) => a.delivery_id)).size).toBe(36);
    const most = mostAtOnce(attempts);
    expect(most).toBeGreaterThan(LANE_CONCURRENCY);
    expect(most).toBeLessThanOrEqual(12);
    // The second shard took its share and forgot each delivery once settled; a copy adds nothing.
    expect(await laneObject(env, laneShardName(lane, 1)).pending()).toEqual([]);
    expect((await laneObject(env, lane).accept(messages.slice(0, 3))).stored).toEqual([true, true, true]);
    await until(
      () => laneObject(env, laneShardName(lane, 1)).pending(),
      (p) => p.length === 0,
      5_000,
    );
    expect(await attemptsOf(ids)).toHaveLength(attempts.length);
  }, 60_000);

  it("turns away a concurrency out of range, a path that is not an origin, and a token without deliveries:write", async () => {
    const app = await seedRunnable(api);
    const origin = "https://hooks.example.com";
    for (const body of [
      { concurrency: 0 },
      { concurrency: MAX_RECEIVER_CONCURRENCY + 1 },
      { concurrency: 2.5 },
      {},
      { concurrency: "6" },
    ]) {
      const res = await patch(app.projectId, origin, body, app.token);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.headers.get("content-type")).toContain("application/problem+json");
    }
    // A path parameter that cannot name a receiver names nothing: 404, as an id that cannot be one.
    for (const bad of [
      "hooks.example.com",
      "https://hooks.example.com/path",
      "ftp://hooks.example.com",
      "https://hooks.example.com/",
    ]) {
      const res = await patch(app.projectId, bad, { concurrency: 2 }, app.token);
      expect(res.status, bad).toBe(404);
      expect(res.headers.get("content-type")).toContain("application/problem+json");
      // The problem says what an origin is, so that a caller who sent the endpoint knows to drop its path.
      expect(res.body.detail).toBe(
        `No origin '${bad}': expected an origin such as https://hooks.example.com (scheme, host and port only, URL-encoded in the path).`,
      );
    }
    const expires = new Date(api.clock.now().getTime() + 24 * 3600 * 1000).toISOString();
    const reader = await api.json<{ token: string }>(`/v2/projects/${app.projectId}/service-accounts`, {
      method: "POST",
      body: {
        name: `reader-${Date.now()}`,
        expires_at: expires,
        scopes: PERMISSIONS.filter((p) => p !== "deliveries:write"),
      },
    });
    expect((await patch(app.projectId, origin, { concurrency: 2 }, reader.body.token)).status).toBe(403);
    expect(await patch(app.projectId, origin, { concurrency: MAX_RECEIVER_CONCURRENCY }, app.token)).toMatchObject({
      status: 200,
      body: { origin, concurrency: MAX_RECEIVER_CONCURRENCY },
    });
  });
});
