/**
 * Telling and joining a run's followers: the hub (`followers-object.ts`, a Durable Object per followed
 * run) between the run's owner and the streams of its status (`stream.ts`).
 */
import { log } from "../../platform/log";
import type { Scope } from "../../platform/scope";

/** The hub of run `runId`. */
const hubOf = (env: Env, runId: string) => env.RUN_FOLLOWERS.get(env.RUN_FOLLOWERS.idFromName(runId));

/**
 * Tells the followers of run `runId` that its state is now `status`. Called by an owner only when its
 * conditional write answered that the run is followed. Never throws: a follower that misses the word
 * reads the state again within `RECHECK_EVERY` keep-alives (`stream.ts`), and the run goes on regardless.
 */
export async function tellFollowers(env: Env, runId: string, status: string): Promise<void> {
  try {
    await hubOf(env, runId).changed(status);
  } catch (error) {
    log("warn", "run followers not told", { run_id: runId, run_status: status, error });
  }
}

/**
 * An owner's write changed the run's state to `status`: its followers are told when the write said the
 * run is `followed`, beside the owner's work (`waitUntil`), which never waits for them.
 */
export function tellIfFollowed(
  scope: Pick<Scope, "env" | "ctx">,
  runId: string,
  status: string,
  followed: boolean | undefined,
): void {
  if (followed) scope.ctx.waitUntil(tellFollowers(scope.env, runId, status));
}

/** A stream's line to the hub of run `runId`: words of state changes arrive as messages. */
export async function joinFollowers(env: Env, runId: string): Promise<WebSocket> {
  const response = await hubOf(env, runId).fetch("https://run-followers/join", { headers: { Upgrade: "websocket" } });
  const socket = response.webSocket;
  if (!socket) throw new Error(`run followers hub answered ${response.status} without a WebSocket`);
  socket.accept();
  return socket;
}
