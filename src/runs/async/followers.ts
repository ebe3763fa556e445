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

/**
 * The most streams that follow one run at once. A run's followers are its caller and whoever it shows
 * the run to (a page, a few tabs); each change of the run's state is passed to every one of them, a
 * word of up to `WORD_RESOURCE_MAX` (64 KiB): 8 followers are at most 512 KiB sent per change, and 8
 * readers of a result too large for a word (up to 10 MiB, from R2) at the run's end.
 */
export const FOLLOWERS_PER_RUN_MAX = 8;
/**
 * The most status streams open at once in one project. Each holds a Worker invocation (its memory: the
 * events it sends, a large result at the end) and reads the run's state from the database every
 * project shares once a minute: 64 streams are about one read a second per project. A project that
 * follows more runs at once polls them (`GET` of the status URL) or takes their webhooks.
 */
export const STREAMS_PER_PROJECT_MAX = 64;
/** The header a joiner sends with the most sockets a hub may hold, its own included (`followers-object.ts`). */
export const FOLLOWERS_MAX_HEADER = "X-Followers-Max";

/** The followers object named `name` (a hub or a project's count, below): every one is addressed through this. */
export const followersObject = (env: Env, name: string) => env.RUN_FOLLOWERS.get(env.RUN_FOLLOWERS.idFromName(name));
/** The hub of run `runId`. */
const hubOf = (env: Env, runId: string) => followersObject(env, runId);
/**
 * The count of project `projectId`'s open streams: an object of the same class, addressed by the
 * project (`project:` cannot begin a run id), whose sockets are the streams it counts.
 */
const streamsOf = (env: Env, projectId: string) => followersObject(env, `project:${projectId}`);

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

/** A socket held open to `hub` while it holds fewer than `max`; `null` when it holds `max` already. */
async function holdSocket(hub: DurableObjectStub, max: number): Promise<WebSocket | null> {
  const response = await hub.fetch("https://run-followers/join", {
    headers: { Upgrade: "websocket", [FOLLOWERS_MAX_HEADER]: String(max) },
  });
  if (response.status === 429) return null;
  const socket = response.webSocket;
  if (!socket) throw new Error(`run followers hub answered ${response.status} without a WebSocket`);
  socket.accept();
  return socket;
}

/**
 * A stream's line to the hub of run `runId`: words of state changes arrive as messages. `null` when the
 * run has `FOLLOWERS_PER_RUN_MAX` followers already.
 */
export const joinFollowers = (env: Env, runId: string) => holdSocket(hubOf(env, runId), FOLLOWERS_PER_RUN_MAX);

/**
 * Counts a stream among project `projectId`'s open streams while the returned socket is open (closing
 * it, or the stream's end however it comes, uncounts it). `null` when the project has `STREAMS_PER_PROJECT_MAX`.
 */
export const countStream = (env: Env, projectId: string) =>
  holdSocket(streamsOf(env, projectId), STREAMS_PER_PROJECT_MAX);
