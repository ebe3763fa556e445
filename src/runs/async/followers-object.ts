import { DurableObject } from "cloudflare:workers";

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
 */
export class RunFollowers extends DurableObject<Env> {
  /** A stream joins: the Worker serving it opens a WebSocket here. */
  override async fetch(request: Request): Promise<Response> {
    if (request.headers.get("upgrade")?.toLowerCase() !== "websocket")
      return new Response("A run's followers join by WebSocket.", { status: 426 });
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
