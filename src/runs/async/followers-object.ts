import { DurableObject } from "cloudflare:workers";
import { FOLLOWERS_MAX_HEADER } from "./followers";

/**
 * The followers of one run: a Durable Object per followed run id (`RUN_FOLLOWERS`), the hub between the
 * run's owner and the streams that follow it (`stream.ts`), one WebSocket each; an owner's word
 * (`changed`) goes to every socket. It stores nothing (the state lives in D1). The same class counts a
 * project's open streams (`countStream`). Why: docs/runs.md#how-a-stream-is-told-and-the-limits-it-stays-within.
 * Hibernation API sockets (`acceptWebSocket`): the hub may be evicted, and is not billed, while streams wait.
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
