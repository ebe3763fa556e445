/**
 * Telling and joining a run's followers: the hub (`followers-object.ts`, a Durable Object per followed
 * run) between the run's owner and the streams of its status (`stream.ts`).
 *
 * A word from an owner is the run's new status and, when it is small enough to pass through the hub,
 * the run resource as the owner just wrote it (`status` + "\n" + resource). With it the stream sends the
 * event without reading D1 again: on Cloudflare the stream's Worker may be far from the database's
 * primary, and that read would be most of the event's delay. A larger resource (a result of more than
 * `WORD_RESOURCE_MAX` bytes) is left to the stream to read.
 */
import { log } from "../../platform/log";
import type { Scope } from "../../platform/scope";

/** The largest resource a word carries (a WebSocket message and an RPC argument stay small). */
export const WORD_RESOURCE_MAX = 64 * 1024;

/** What a word says: the run's status, and the resource when it came along. */
export interface Word {
  status: string;
  resource: string | null;
}

export const wordOf = (status: string, resource: string | null): string =>
  resource === null || resource.length > WORD_RESOURCE_MAX ? status : `${status}\n${resource}`;

export function readWord(text: string): Word {
  const at = text.indexOf("\n");
  return at === -1 ? { status: text, resource: null } : { status: text.slice(0, at), resource: text.slice(at + 1) };
}

/** The hub of run `runId`. */
const hubOf = (env: Env, runId: string) => env.RUN_FOLLOWERS.get(env.RUN_FOLLOWERS.idFromName(runId));

/**
 * Tells the followers of run `runId` that its state is now `status` (`resource`: the run as it is now,
 * when the owner has it at hand). Called by an owner only when its conditional write answered that the
 * run is followed. Never throws: a follower that misses the word reads the state again within
 * `RECHECK_EVERY` keep-alives (`stream.ts`), and the run goes on regardless.
 */
export async function tellFollowers(
  env: Env,
  runId: string,
  status: string,
  resource: string | null = null,
): Promise<void> {
  try {
    await hubOf(env, runId).changed(wordOf(status, resource));
  } catch (error) {
    log("warn", "run followers not told", { run_id: runId, run_status: status, error });
  }
}

/**
 * An owner's write changed the run's state to `status`: its followers are told when the write said the
 * run is `followed`, beside the owner's work (`waitUntil`), which never waits for them. `resource`
 * makes the run resource as it now is; it is called only for a followed run.
 */
export function tellIfFollowed(
  scope: Pick<Scope, "env" | "ctx">,
  runId: string,
  status: string,
  followed: boolean | undefined,
  resource?: () => string,
): void {
  if (followed) scope.ctx.waitUntil(tellFollowers(scope.env, runId, status, resource?.() ?? null));
}

/** A stream's line to the hub of run `runId`: words of state changes arrive as messages. */
export async function joinFollowers(env: Env, runId: string): Promise<WebSocket> {
  const response = await hubOf(env, runId).fetch("https://run-followers/join", { headers: { Upgrade: "websocket" } });
  const socket = response.webSocket;
  if (!socket) throw new Error(`run followers hub answered ${response.status} without a WebSocket`);
  socket.accept();
  return socket;
}
