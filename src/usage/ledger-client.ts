/** The ledger of a project: its Durable Object is `idFromName(project_id)`, one per project. */
export const ledgerOf = (env: Env, projectId: string) => env.USAGE_LEDGER.get(env.USAGE_LEDGER.idFromName(projectId));

/** What a watcher hears after a batch that started or ended runs (src/usage/live.ts). */
export const RUNS_CHANGED = "runs";
