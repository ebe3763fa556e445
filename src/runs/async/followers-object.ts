import { DurableObject } from "cloudflare:workers";
import { FOLLOWERS_MAX_HEADER } from "./followers";

/**
 * The followers of one run: a Durable Object per followed run id (wrangler.toml `RUN_FOLLOWERS`), the
 * hub between the run's owner and the streams that follow it (`stream.ts`). Each stream holds one
 * WebSocket to it; an owner that changes the run's state tells it (`changed`), and it passes the word
 * to every socket. It stores nothing: the run's state lives in D1 (`async_runs`), which a stream reads
 * again for a word that came without the resource, and every minute regardless, so a word lost or a hub
 * restarted costs a follower time, never a state.
 *
 * Only a followed run has a hub. A stream marks its run `followed` in D1 before it reads the state;
 * owners learn it from their own conditional write (`store.ts`), so a run nobody follows never wakes
 * one. The sockets are the hibernation API's (`acceptWebSocket`): while the run goes on, the hub may be
 * evicted from memory and is not billed for the wait, however long the streams stay open; a word from
 * an owner wakes it with its sockets.
 *
 * A hub holds at most the sockets its joiner allows (`FOLLOWERS_MAX_HEADER`): past them a join is
 * refused with 429 and nothing is held. The count is the sockets open now (`getWebSockets`), which the
 * runtime keeps: a stream that ends, however it ends, is uncounted without telling anyone. The same
 * class counts a project's open streams (`followers.ts`, `countStream`): an object of it per project,
 * whose sockets nobody writes to.
 */
export class RunFollowers extends DurableObject<Env> {
  /** A stream joins: the Worker serving it opens a WebSocket here (unless the hub holds its most already). */
  override async fetch(request: Request): Promise<Response> {
    if (request.headers.get("upgrade")?.toLowerCase() !== "websocket")
      return new Response("A run's followers join by WebSocket.", { status: 426 });
    const max = Number(request.headers.get(FOLLOWERS_MAX_HEADER));
    // Counted and accepted with no await between: two joins cannot both take the last socket.
    if (Number.isInteger(max) && max > 0 && this.ctx.getWebSockets().length >= max)
      return new Response("This hub holds its most followers.", { status: 429 });
    const pair = new WebSocketPair();
    this.ctx.acceptWebSocket(pair[1]);
    return new Response(null, { status: 101, webSocket: pair[0] });
  }

  /** The run's owner changed its state (`word`: its status, and the resource when small): every follower hears it. Answers how many did. */
  changed(word: string): number {
    let told = 0;
    for (const socket of this.ctx.getWebSockets()) {
      try {
        socket.send(word);
        told++;
      } catch {
        // A socket closing as it is told: its stream is gone, or reconnects and reads D1 anyway.
      }
    }
    return told;
  }

  /** Followers only listen. */
  override webSocketMessage(): void {}
}
