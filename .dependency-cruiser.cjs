// The layering of src/ (docs/architecture.md), checked by `npm run lint`:
//   the root (src/*.ts: index, worker, deps, http, management, queue, scheduled) wires everything;
//   capability folders (apps, auth, builds, dashboard, docs, domains, projects, routing, runs,
//   service-accounts, usage, webhooks, …) import the ground floor and, downwards, each other, never in
//   a loop between folders; the ground floor (platform/, db/) imports no capability folder and nothing
//   of the root.
const CAPABILITY = "^src/(?!platform/|db/)[^/]+/";
const GROUND = "^src/(platform|db)/";
const ROOT = "^src/[^/]+\\.tsx?$";

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "ground-floor-stays-down",
      severity: "error",
      comment: "platform/ and db/ are the ground floor: they import no capability folder (docs/architecture.md).",
      from: { path: GROUND },
      to: { path: CAPABILITY },
    },
    {
      name: "nothing-imports-the-root",
      severity: "error",
      comment: "The root wires the Worker together; code below it must not depend on the wiring.",
      from: { path: "^src/.+/", pathNot: "\\.test\\.tsx?$" },
      to: { path: ROOT },
    },
    {
      name: "no-sideways-into-runs",
      severity: "error",
      comment:
        "runs/ is the top of the request path: capabilities below it do not reach into it (a cache lives with its data); the dashboard and docs, above it, may read its schemas.",
      from: { path: CAPABILITY, pathNot: ["^src/runs/", "^src/routing/", "^src/(dashboard|docs)/", "\\.test\\.tsx?$"] },
      to: { path: "^src/runs/", pathNot: "^src/runs/(outcome|urls)\\.ts$" },
    },
    {
      name: "usage-reads-only-the-outcome",
      severity: "error",
      comment:
        "A run hands usage its outcome through a port the root wires (src/runs/outcome.ts, OutcomePort): usage may know the outcome's types and a run's URL (src/runs/urls.ts, which imports nothing), and nothing else of runs/; runs/ never imports usage/.",
      from: { path: "^src/usage/", pathNot: "\\.test\\.tsx?$" },
      to: { path: "^src/runs/(?!(outcome|urls)\\.ts$)" },
    },
    {
      name: "runs-owners-apart",
      severity: "error",
      comment:
        "Each mode's owner (runs/sync/, runs/wait/, runs/async/) builds on the shared core of runs/ and not on another owner; a waited run's keeper may use the async store, since a handed-over run is stored and read as an async run (docs/runs.md), and an async run's owners find its keeper from its ids (runs/wait/shard.ts), since the keeper keeps async runs too.",
      from: { path: "^src/runs/(sync|async)/", pathNot: "\\.test\\.tsx?$" },
      to: { path: "^src/runs/(sync|wait|async)/", pathNot: ["^src/runs/$1/", "^src/runs/wait/shard\\.ts$"] },
    },
    {
      name: "runs-wait-not-into-sync",
      severity: "error",
      comment:
        "A waited run's keeper builds on the core (and the async store), never on the Worker's synchronous owner.",
      from: { path: "^src/runs/wait/", pathNot: "\\.test\\.tsx?$" },
      to: { path: "^src/runs/sync/" },
    },
    {
      name: "runs-core-below-owners",
      severity: "error",
      comment:
        "The shared core of runs/ (admission, the admitted run, app request, call, answer, outcome) imports no owner folder: only run.ts and router.ts, which hand a run or a route to its owner, do. Admission reads the keepers' run-id shards (runs/wait/shard.ts: a keyed run's id is in its key's shard).",
      from: { path: "^src/runs/[^/]+$", pathNot: ["^src/runs/(run|router)\\.ts$", "\\.test\\.tsx?$"] },
      to: { path: "^src/runs/(sync|wait|async)/", pathNot: "^src/runs/wait/shard\\.ts$" },
    },
    {
      name: "runs-never-import-usage",
      severity: "error",
      comment: "A run's outcome reaches usage through the root (OutcomePort), never by an import.",
      from: { path: "^src/runs/" },
      to: { path: "^src/usage/" },
    },
    {
      name: "the-dashboard-and-docs-sit-on-top",
      severity: "error",
      comment: "The dashboard and the docs page use the API; no capability depends on them.",
      from: { path: CAPABILITY, pathNot: ["^src/(dashboard|docs)/", "\\.test\\.tsx?$"] },
      to: { path: "^src/(dashboard|docs)/" },
    },
    {
      name: "no-circular",
      severity: "error",
      comment:
        "No module reaches back into one that imports it, directly or through others: each stage of a run or a delivery reads top to bottom, and a file can be read without the ones that use it.",
      from: { path: "^src/", pathNot: "\\.test\\.tsx?$" },
      to: { circular: true },
    },
    {
      name: "no-cycles-between-folders",
      severity: "error",
      comment:
        "Folders depend on each other in one direction only: a loop between two capability folders (auth → members → auth) is one even when no single module closes it, so this rule looks at the folders themselves.",
      scope: "folder",
      from: { path: "^src/[^/]+$" },
      to: { path: "^src/[^/]+$", circular: true },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "\\.test\\.tsx?$" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { extensions: [".ts", ".tsx", ".js", ".mjs"] },
  },
};
