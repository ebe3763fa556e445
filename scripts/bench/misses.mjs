// What a missed (or undecided) target costs and what it buys, by the row's `key` (scripts/bench/report.mjs
// `figure(…, { key })`): the text scripts/bench/doc.mjs writes under each miss in docs/benchmarks.md.
// `{piece:<id>}` is replaced by that piece's measured cost per JSON run and per binary answer (section
// runcost, "each cost alone"), `{bodies:<id>}` by its cost per GiB streamed and bytes/s, `{row:<key>}` by
// that row's median and spread. Read each text against the code on main before a doc is made from it:
// a text that no longer describes the code is worse than none.

const RUN_PATH = {
  costs:
    "the gateway's own work on every run beyond (b'): the key checked against the isolate's cache (its SHA-256), the deployment from the isolate's cache, the app request built with the header policy, the answer passed back (or enveloped), the run's outcome recorded in `waitUntil`, and the request's log line. Measured alone in the same repetitions: the rate-limit call {piece:rate-limit} (paid by (b') too, so not in this difference); the log line {piece:log-line}; the request id on every line {piece:log-context}; the header policy {piece:header-policy}; the usage record {piece:usage-record}; routing runs through Hono instead of skipping the router would add {piece:router}",
  buys: "authentication of every run, per-project back-pressure, an app that never sees the caller's credentials and whose headers cannot act on the shared hostname, a run id, a usage record and a log line per run",
  experiment:
    'the table "What each remaining cost buys, measured alone" (each piece taken out of the same built bundle, in the same repetitions); what no piece accounts for is spread over many small costs in a CPU profile of the run (`node scripts/bench/profile-run.mjs`)',
};

const CUSTOM_DOMAIN = {
  ...RUN_PATH,
  costs:
    "what a run on the API hostname costs (the rows of (c) and their pieces above), and on a custom domain also the hostname's project, looked up (and cached per isolate) before the run",
  experiment: "(d) beside (c) in the run path's table: the difference is the hostname's lookup",
};

export const MISSES = {
  "c-rps": RUN_PATH,
  "c-cpu": RUN_PATH,
  "c-p99": RUN_PATH,
  "d-rps": CUSTOM_DOMAIN,
  "d-cpu": CUSTOM_DOMAIN,
  "d-p99": CUSTOM_DOMAIN,
  binary: {
    ...RUN_PATH,
    costs: `${RUN_PATH.costs}. A binary answer passes through (no envelope): the header policy both ways is its largest piece of its own`,
  },
  "first-byte-bprime": {
    costs:
      "the run's admission before the app is called (key, deployment, limits, the app request) and the first chunk's way through the silence watch",
    buys: "the same as the run path's: every stream is an authenticated, limited, recorded run",
    experiment:
      "the pieces of the run path measured alone (JSON run and binary answer columns); the event stream itself passes each chunk at once",
  },
  chunked: {
    costs:
      "the silence watch on a body without a length (`relay` in src/runs/call.ts): each chunk is read into JavaScript (two buffers taking turns, the next read overlapping the caller taking the last chunk) and written into the runtime's pipe, where (b) hands the body on natively: {bodies:silence-watch}. The runtime's own share, measured alone: the bare Worker reading the same body in JavaScript with nothing else done streams at {row:chunked-runtime} of its own bytes/s and costs {row:chunked-runtime-cpu} of its CPU per GiB",
    buys: "`RUN_STREAM_IDLE_MS`: a call whose app goes silent mid-stream is ended instead of holding the caller and a connection; the body's bytes are counted (usage, limits) as they pass",
    experiment:
      "the piece `silence-watch` (the same bundle with `stream()` handing on the app's body itself), streamed in the same repetitions; the bare Worker with the body read in JavaScript (`readInJs`, scripts/bench/passthrough.mjs) beside (b)",
  },
  "chunked-cpu": {
    costs:
      "the silence watch's read and write of every byte: {bodies:silence-watch}. Most of it is what the runtime charges any JavaScript that sees a stream's bytes: the bare Worker reading the same body in JavaScript, with no watch and no count, costs {row:chunked-runtime-cpu} of its CPU per GiB (on this runtime, reads of at least 768 KiB still cost about 2×, a pass-through `TransformStream` about 21×, `pipeTo` into an `IdentityTransformStream` what (b) costs); a watch that never sees the bytes could not count them nor tell silence from a stalled caller",
    buys: "the idle limit and the byte count, as for the chunked body's bytes/s",
    experiment:
      "the piece `silence-watch`, streamed in the same repetitions; the bare Worker reading the body in JavaScript beside (b)",
  },
  rss: {
    costs: "what the silence watch holds while the body streams",
    buys: "the idle limit and the byte count",
    experiment: "the piece `silence-watch`: the RSS growth with and without the watch",
  },
  declared: {
    costs:
      "a body with its length is handed to the runtime's own pipe; what remains is the run's admission and the count of the body",
    buys: "a run record with the body's size",
    experiment: "not itemized in this run",
  },
  "declared-cpu": {
    costs: "as for the body's bytes/s",
    buys: "as for the body's bytes/s",
    experiment: "not itemized in this run",
  },
  "async-cpu": {
    costs:
      "what an async run with a webhook does beyond a synchronous one with a webhook: its row written in its keeper at acceptance (a Durable Object call) and the queue send, the claim `queued → running` and the end, each a call to its keeper that serializes the run, the secret sealed at acceptance and opened at the end, the delivery's record written by the keeper to the delivery log after the end, and a share of a consumer invocation (its dispatch, its usage flush): the runs of a backlog share one in batches of 3 (wrangler.toml), a run alone has one of its own. Against one run per invocation, measured in the same repetitions: {row:async-cpu-side-by-side} the CPU of its synchronous runs, {row:async-batch-against-side} per async run for the batches",
    buys: "at-most-once execution, a status URL, a result kept for its retention, the delivery recorded or swept; each run of a batch still has the invocation's 15 minutes (side by side), one connection at a time (src/runs/async/consumer.ts)",
    experiment:
      "the same bundle beside it with its async consumer given 1 run per invocation (`--async-side-batch=1`), interleaved in the same repetitions; where the CPU goes, by V8's sampling profiler over the gateway's isolate (its Durable Objects included): `node scripts/bench/profile-async.mjs async|sync`",
  },
  "e-drained": {
    costs:
      "a delivery's way through its lane beyond the floor's single consumer: the run's own call to the delivery's lane (one Durable Object call per delivery, where the floor's queue send is one too: {row:unit-accept10} per delivery when ten share a call), the lane's SQLite insert and delete ({row:unit-settle10}), its alarm, the attempt's claim and outcome in D1 (grouped when deliveries arrive together)",
    buys: "a slow receiver delays only its own lane (the fairness rows), a delivery attempted at once rather than after the queue's batch wait, never more than 3 attempts ≤ 5 s apart, a record per delivery",
    experiment: "the fairness rows and the unit costs (section 2)",
  },
  "e-cpu": {
    costs:
      "as for (e)'s drained throughput: the lane's call, storage and alarm per delivery, and the claim of each attempt in D1 before it is sent",
    buys: "fairness between receivers, the first attempt without the queue's batch wait, and the outcome table's attempts",
    experiment: "the fairness rows and the unit costs (section 2)",
  },
  "latency-p50-1": {
    costs:
      "a delivery handed straight to its lane by the run (src/webhooks/hand-off.ts): the lane's durable SQLite insert, its alarm, the attempt's claim in D1 before the POST; only a delivery its lane could not take waits for the webhook queue's batch (`max_batch_timeout`, 1 s)",
    buys: "a delivery that survives a restart of the runtime between the run and its first attempt (the lane's storage holds it, the queue when the lane cannot)",
    experiment:
      "the p50 and p95 at 1 run/s side by side: a delivery handed to its lane arrives in tens of milliseconds, one through the queue in about a second",
  },
  "latency-p95-1": {
    costs:
      "as for the p50: the lane's durable insert, its alarm and the attempt's claim in D1; a delivery through the queue's fallback waits for its batch (1 s)",
    buys: "a delivery that survives a restart of the runtime between the run and its first attempt",
    experiment: "the p50 and p95 at 1 run/s side by side",
  },
  "latency-p95-100": {
    costs: "at 100 runs/s the lanes' attempts and the local D1 share the Worker's core with the runs themselves",
    buys: "as at 1 run/s",
    experiment: "the p50 and p95 at 100 runs/s side by side, and the section's noise",
  },
  "usage-worst": {
    costs:
      "the ledger's query over the project's minute rollups (7 days) or its records (24 hours, exact percentiles) in its Durable Object",
    buys: "usage a customer can see, with exact percentiles where the record count allows",
    experiment: "each query's own row in section 7",
  },
  "wait-p50": {
    costs:
      'a waited run crosses into its keeper (a Durable Object per project and shard of run ids), which makes the app call and streams the answer back; before the call the keeper writes "called" to its SQLite storage, and the output gate holds the call until that commit is durable (no explicit sync(); allowUnconfirmed was weighed and refused: a keeper reset before the commit would leave a run the app saw with no record, status URL, usage record or webhook; docs/runs.md): that write measured alone costs {row:wait-write-p50} of p50 and {row:wait-write-cpu} of CPU, locally a SQLite commit and its fsync in the workerd process, on Cloudflare a replicated write (I/O, not the Worker\'s CPU)',
    buys: "the app is called exactly once whatever happens to the caller, the runtime or the keeper, and a run whose caller stops waiting goes on and keeps its result",
    experiment:
      'the same fast app with and without `Prefer: wait`, and the same bundle without the keeper\'s "called" write, interleaved in the same repetitions',
  },
  "wait-cpu": {
    costs:
      "the keeper's RPC and its durable \"called\" write, a SQLite commit before the call and the record's removal after it (the write measured alone: {row:wait-write-cpu} of CPU), in the same workerd process locally (on Cloudflare the keeper's CPU is its own object's and the commit is replicated storage I/O)",
    buys: "the app is called exactly once, and a run whose caller stops waiting keeps its result",
    experiment:
      'the same fast app with and without `Prefer: wait`, and the same bundle without the keeper\'s "called" write',
  },
  "wait-202": {
    costs: "the keeper's alarm and the hand-over's D1 write before the 202",
    buys: "a run resource that can be followed as soon as the 202 is read",
    experiment: "the 202's time, three per repetition",
  },
  "status-event": {
    costs: "the state change's D1 write, then one call to the run's followers' hub, which writes the event",
    buys: "a followed run's change seen without polling; an unfollowed run pays nothing",
    experiment: "the end event timed from the app's answer (an upper bound: the change itself comes after it)",
  },
};
