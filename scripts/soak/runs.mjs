// The runs soak: mixed runs (sync, `Prefer: wait`, `?async=true`) through the built Worker under
// Miniflare, with callers that hang up (a TCP reset, as Cloudflare sees a client leave), deadlines
// (`Cancel-After`) shorter than the app, and the local runtime restarted once mid-soak on its persisted
// storage (D1, R2, Durable Objects). Then it checks, from the app's side and the callers' side:
//   - no app was called twice: the app counts its calls per run id and per soak run;
//   - no result was lost (LOST, defined below);
//   - every run the gateway took on (a 202, or a run the app saw that has a status URL) is final.
import { request as httpRequest, Agent } from "node:http";
import { buildBundle, seedRunnableApp, startGateway, storedRuns } from "../bench/gateway.mjs";
import { answerOf, startCountingApp } from "./app.mjs";

/**
 * What "lost" means here, printed with the figures. A run's result is LOST when the app answered it
 * whole (its answer left the app) and that answer reached neither its caller (sync, or a waited run
 * answered in time: the caller's body holds the app's answer) nor its status URL (async, or a waited
 * run handed over: `succeeded` with the app's answer as its result), unless the run says why: it ended
 * `failed` with `interrupted` (its owner was stopped by the restart with the answer in flight). A run
 * whose status URL holds another answer than the app's is LOST too; so is a run the gateway took on
 * that never reaches a final state. A caller who hung up before the answer loses nothing the gateway
 * owed it (sync), or finds it at the status URL (wait, async).
 */
export const LOST_MEANS =
  "the app answered in full, yet neither the caller got that answer nor the status URL holds it (and the run does not say it was interrupted); or a status URL holds another answer; or a run taken on (202, or handed over) never ended";

const FINAL = new Set(["succeeded", "failed", "cancelled"]);
const MODES = ["sync", "wait", "async"];

/** A small seeded PRNG (mulberry32): the same `seed` plans the same soak. */
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The plan of soak run `i`: its mode, how long the app takes, its deadline, its `Prefer: wait`, and
 * when (if ever) its caller hangs up. Async runs are mostly fast: the local queue runs one consumer
 * batch at a time (one run each), so a slow async run holds every other one back.
 */
export function planRuns(count, seed) {
  const random = prng(seed);
  const plans = [];
  for (let i = 0; i < count; i++) {
    const mode = MODES[Math.floor(random() * 3)];
    const r = random();
    const slowShare = mode === "async" ? 0.1 : 0.35;
    const pastDeadlineShare = mode === "async" ? 0.03 : 0.1;
    let ms;
    let cancelAfter = null;
    if (r < pastDeadlineShare) {
      // An app slower than its deadline (Cancel-After's minimum is 5 s).
      ms = 7000;
      cancelAfter = "5s";
    } else if (r < pastDeadlineShare + slowShare) {
      ms = mode === "async" ? 800 + Math.floor(random() * 700) : 1500 + Math.floor(random() * 2500);
      if (random() < 0.2) cancelAfter = "30s";
    } else {
      ms = Math.floor(random() * 30);
    }
    const wait = mode === "wait" ? 1 + Math.floor(random() * 2) : null;
    const hangUpMs = random() < 0.12 ? 50 + Math.floor(random() * 2500) : null;
    plans.push({ i, mode, ms, cancelAfter, wait, hangUpMs });
  }
  return plans;
}

const keepAlive = new Agent({ keepAlive: true, maxSockets: 64 });

/**
 * One HTTP request whose caller may hang up: after `hangUpMs` the socket is reset (RST), which is how
 * a departed client reaches workerd (a FIN alone is not seen before the answer's headers locally).
 */
function call(url, { method = "POST", headers = {}, body, hangUpMs = null }) {
  return new Promise((resolve) => {
    let hungUp = false;
    let done = false;
    const finish = (value) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(value);
    };
    const req = httpRequest(url, { method, headers, agent: hangUpMs === null ? keepAlive : false });
    const timer =
      hangUpMs === null
        ? undefined
        : setTimeout(() => {
            hungUp = true;
            if (req.socket) req.socket.resetAndDestroy();
            else req.destroy();
          }, hangUpMs);
    req.on("response", (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () =>
        finish({ status: res.statusCode, headers: res.headers, text: Buffer.concat(chunks).toString("utf8") }),
      );
      res.on("error", () => finish(hungUp ? { hungUp: true } : { error: "answer broke off" }));
      res.on("aborted", () => finish(hungUp ? { hungUp: true } : { error: "answer broke off" }));
    });
    req.on("error", (error) => finish(hungUp ? { hungUp: true } : { error: error.code ?? error.message }));
    req.end(body);
  });
}

/** The gateway started anew on the same port and storage: the local runtime restarted. */
async function restart(gateway, bundle, options) {
  const port = new URL(gateway.url).port;
  await gateway.mf.dispose();
  return startGateway(bundle, {
    ...options,
    sharedOptions: { ...options.sharedOptions, port: Number(port) },
    migrated: true,
  });
}

/**
 * The local queue broker keeps its messages in memory: a restart loses the ones not yet acknowledged,
 * which Cloudflare Queues would deliver again (a queued run's message; a running run's message, to the
 * consumer that died holding it). Each is given back as the platform would: a queued run's message
 * sent again; a running run's message delivered again with its own id (from the run's claim), attempt 2,
 * so the consumer finds its own claim and ends the run `interrupted`. Nothing else is touched.
 */
async function redeliverLostMessages(gateway) {
  const rows = (await storedRuns(gateway)).filter(
    (run) => (run.status === "queued" || run.status === "running") && run.mode === "async",
  );
  const producer = await gateway.mf.getQueueProducer("ASYNC_RUN_QUEUE");
  const worker = await gateway.mf.getWorker();
  let queued = 0;
  let running = 0;
  for (const row of rows) {
    const body = { v: 1, run_id: row.id, project_id: row.project_id };
    if (row.status === "queued") {
      await producer.send(body, { contentType: "json" });
      queued++;
    } else if (row.claimed_by) {
      await worker.queue("async-runs", [{ id: row.claimed_by, timestamp: new Date(), attempts: 2, body }]);
      running++;
    }
  }
  return { queued, running };
}

/**
 * Runs the soak; resolves with the figures and the violations (none when nothing was called twice,
 * nothing lost, everything final). `start` builds the gateway: `startGateway(bundle, options)`.
 */
export async function soakRuns({
  bundle,
  runs = 1000,
  concurrency = 24,
  seed = 1,
  restartAt = Math.floor(runs / 2),
  persistDir,
  settleTimeoutMs = 300_000,
  log = () => undefined,
}) {
  const app = await startCountingApp();
  const options = {
    dnsResolverUrl: "http://127.0.0.1:9/dns-query",
    sharedOptions: { resourcePersistencePath: persistDir, handleStructuredLogs: () => undefined },
  };
  let gateway = await startGateway(bundle, options);
  const plans = planRuns(runs, seed);
  const outcomes = new Array(runs);
  let restarted = null;
  try {
    const seedApp = await seedRunnableApp(gateway.url, app.url);
    const auth = { Authorization: `Bearer ${seedApp.token}` };
    // Probed: a build without `Prefer: wait` or `Cancel-After` still soaks, and says so.
    const probe = await call(`${gateway.url}${seedApp.runPath}?i=-1&ms=0`, {
      headers: { ...auth, "Content-Type": "application/json", Prefer: "wait=1" },
      body: "{}",
    });
    const waits = Boolean(probe.headers?.["preference-applied"]);

    let next = 0;
    let paused = null;
    const started = performance.now();
    const one = async (plan) => {
      const query = `i=${plan.i}&ms=${plan.ms}${plan.mode === "async" ? "&async=true" : ""}`;
      const headers = { ...auth, "Content-Type": "application/json" };
      if (plan.wait !== null) headers.Prefer = `wait=${plan.wait}`;
      if (plan.cancelAfter !== null) headers["Cancel-After"] = plan.cancelAfter;
      const epoch = restarted === null ? 0 : 1;
      const answer = await call(`${gateway.url}${seedApp.runPath}?${query}`, {
        headers,
        body: JSON.stringify({ inputs: { i: plan.i } }),
        hangUpMs: plan.hangUpMs,
      });
      // A connection lost because the runtime was being restarted under it.
      const cutByRestart = epoch === 0 && restarted !== null && "error" in answer;
      outcomes[plan.i] = { ...answer, cutByRestart };
    };
    const worker = async () => {
      while (next < runs) {
        if (paused) await paused;
        const plan = plans[next++];
        if (plan.i === restartAt && restarted === null) {
          // The restart: new runs wait; the ones under way are cut as the runtime stops.
          let resume;
          paused = new Promise((r) => (resume = r));
          log(`${plan.i} runs sent; restarting the local runtime`);
          const at = performance.now();
          restarted = { atRun: plan.i, inFlightAppCalls: app.open };
          gateway = await restart(gateway, bundle, options);
          restarted.redelivered = await redeliverLostMessages(gateway);
          restarted.seconds = (performance.now() - at) / 1000;
          log(
            `restarted in ${restarted.seconds.toFixed(1)} s; ${JSON.stringify(restarted.redelivered)} lost messages given back`,
          );
          paused = null;
          resume();
        }
        await one(plan);
        if ((next + 1) % 250 === 0) log(`${next + 1} runs sent`);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    const sendSeconds = (performance.now() - started) / 1000;
    log(`${runs} runs in ${sendSeconds.toFixed(1)} s; waiting for every run to end`);

    // Settled: the app answers nothing more, and no run with a status URL is queued or running.
    const deadline = Date.now() + settleTimeoutMs;
    let open;
    for (;;) {
      open = (await storedRuns(gateway)).filter((run) => run.status === "queued" || run.status === "running").length;
      if (open === 0 && app.open === 0) break;
      if (Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    const settleSeconds = (performance.now() - started) / 1000 - sendSeconds;

    return await verify({ gateway, app, plans, outcomes, restarted, waits, open, sendSeconds, settleSeconds });
  } finally {
    await gateway.mf.dispose();
    await app.close();
    keepAlive.destroy();
  }
}

/** Holds the callers' answers, the app's counts and the stored runs to one another. */
async function verify({ gateway, app, plans, outcomes, restarted, waits, open, sendSeconds, settleSeconds }) {
  const violations = [];
  const note = (list, text) => list.length < 8 && list.push(text);
  const stored = new Map((await storedRuns(gateway, { withResults: true })).map((r) => [r.id, r]));
  const tally = {
    byMode: { sync: 0, wait: 0, async: 0 },
    callers: { answered: 0, accepted202: 0, hungUp: 0, cutByRestart: 0, otherErrors: 0, statuses: {} },
    app: { runIds: 0, calledTwice: 0, indexCalledTwice: 0, answeredWhole: 0, cut: 0 },
    stored: { final: 0, notFinal: 0, byStatus: {}, errorCodes: {} },
    /** Soak runs that never reached the app, by what came first. */
    notCalled: { hungUp: 0, cutByRestart: 0, deadline: 0, other: 0 },
    lost: 0,
    interruptedByRestart: 0,
    deadlines: 0,
  };
  const lostExamples = [];
  const twiceExamples = [];

  // The app's side: every run id once, every soak run once.
  for (const [runId, seen] of app.runs) {
    if (seen.i < 0) continue;
    tally.app.runIds++;
    if (seen.calls > 1) {
      tally.app.calledTwice++;
      note(twiceExamples, `${runId} (soak run ${seen.i}) called ${seen.calls} times`);
    }
    if (seen.answered) tally.app.answeredWhole++;
    if (seen.cut) tally.app.cut++;
  }
  for (const [i, ids] of app.byIndex) {
    if (i >= 0 && ids.size > 1) {
      tally.app.indexCalledTwice++;
      note(twiceExamples, `soak run ${i} reached the app as ${ids.size} runs: ${[...ids].join(", ")}`);
    }
  }

  // Every run with a status URL (the gateway's own list of what it took on): final.
  for (const row of stored.values()) {
    tally.stored.byStatus[row.status] = (tally.stored.byStatus[row.status] ?? 0) + 1;
    if (row.error_code) tally.stored.errorCodes[row.error_code] = (tally.stored.errorCodes[row.error_code] ?? 0) + 1;
    if (FINAL.has(row.status)) tally.stored.final++;
    else tally.stored.notFinal++;
  }

  const envelopeHolds = (text, i, runId) => {
    try {
      const envelope = JSON.parse(text);
      return JSON.stringify(envelope.result) === JSON.stringify(answerOf(i, runId)) && envelope.run_id === runId;
    } catch {
      return false;
    }
  };
  const resultOf = async (row) => {
    if (!row.result_in_r2) return row.result;
    const object = await (await gateway.mf.getR2Bucket("RUN_PAYLOADS")).get(`runs/${row.id}/result`);
    return object ? object.text() : null;
  };

  for (const plan of plans) {
    tally.byMode[plan.mode]++;
    const got = outcomes[plan.i];
    const caller = tally.callers;
    let runId = null;
    if (got?.hungUp) caller.hungUp++;
    else if (got?.cutByRestart) caller.cutByRestart++;
    else if (got?.error) caller.otherErrors++;
    else if (got) {
      caller.statuses[got.status] = (caller.statuses[got.status] ?? 0) + 1;
      runId = got.headers["x-run-id"] ?? null;
      if (got.status === 202) caller.accepted202++;
      else caller.answered++;
    }
    // The run ids the app saw for this soak run (at most one, checked above).
    const ids = [...(app.byIndex.get(plan.i) ?? [])];
    runId ??= ids[0] ?? null;
    const seen = runId ? app.runs.get(runId) : undefined;
    const row = runId ? stored.get(runId) : undefined;
    if (plan.cancelAfter === "5s" && (row?.error_code === "deadline" || got?.status === 504)) tally.deadlines++;
    if (ids.length === 0) {
      const why = got?.hungUp
        ? "hungUp"
        : got?.cutByRestart
          ? "cutByRestart"
          : row?.error_code === "deadline" || got?.status === 504
            ? "deadline"
            : "other";
      tally.notCalled[why]++;
    }

    if (got?.status === 202 || (row && row.mode === "wait") || (plan.mode === "async" && seen)) {
      // Taken on: its status URL must end, and hold the app's answer when it had one.
      if (!row) {
        tally.lost++;
        note(lostExamples, `soak run ${plan.i} (${plan.mode}): run ${runId} taken on, but no status URL holds it`);
        continue;
      }
      if (!FINAL.has(row.status)) {
        tally.lost++;
        note(lostExamples, `soak run ${plan.i} (${plan.mode}): run ${runId} still ${row.status}`);
        continue;
      }
      if (row.status === "failed" && row.error_code === "interrupted") {
        tally.interruptedByRestart++;
        continue;
      }
      if (row.status === "succeeded") {
        const text = await resultOf(row);
        if (!envelopeHolds(text, plan.i, runId)) {
          tally.lost++;
          note(lostExamples, `soak run ${plan.i} (${plan.mode}): run ${runId} holds another answer than the app's`);
        }
        continue;
      }
      if (seen?.answered && row.status !== "succeeded") {
        tally.lost++;
        note(
          lostExamples,
          `soak run ${plan.i} (${plan.mode}): the app answered run ${runId}, which ended ${row.status}/${row.error_code}`,
        );
      }
      continue;
    }
    // Answered on the caller's own connection (sync, or a waited run answered in time).
    if (got?.status === 200 && !envelopeHolds(got.text, plan.i, runId)) {
      tally.lost++;
      note(lostExamples, `soak run ${plan.i} (${plan.mode}): its caller got another answer than the app's`);
    } else if (seen?.answered && got && !got.hungUp && !got.cutByRestart && got.status !== 200) {
      tally.lost++;
      note(
        lostExamples,
        `soak run ${plan.i} (${plan.mode}): the app answered run ${runId}, its caller got ${got.status ?? got.error}`,
      );
    }
  }

  if (tally.app.calledTwice)
    violations.push(`${tally.app.calledTwice} run(s) called the app twice: ${twiceExamples.join("; ")}`);
  if (tally.app.indexCalledTwice)
    violations.push(`${tally.app.indexCalledTwice} soak run(s) reached the app as two runs`);
  if (tally.lost) violations.push(`${tally.lost} result(s) lost: ${lostExamples.join("; ")}`);
  if (tally.stored.notFinal || open) violations.push(`${tally.stored.notFinal} run(s) with a status URL not final`);
  if (tally.callers.otherErrors)
    violations.push(
      `${tally.callers.otherErrors} caller(s) got a broken connection outside the restart and their own hang-up`,
    );
  return {
    runs: plans.length,
    lostMeans: LOST_MEANS,
    waitApplied: waits,
    restart: restarted,
    sendSeconds,
    settleSeconds,
    ...tally,
    violations,
  };
}

export { buildBundle };
