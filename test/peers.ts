import { env } from "cloudflare:workers";

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Cloudflare {
    interface Env {
      PEER_URL: string;
      PEER_DOWN_URL: string;
      PEER_OTHER_URL: string;
      PEER_MORE_URLS: string;
    }
  }
}

/** The Node peer of test/global/peers.mjs: app upstreams under `/upstream`, webhook receivers under `/hooks/{key}`. */
export const PEER = env.PEER_URL;
/** The same peer on another origin (another port): its receivers are another lane's. */
export const PEER_OTHER = env.PEER_OTHER_URL;
/** Three more origins of the same receivers, each a lane of its own. */
export const PEER_MORE = env.PEER_MORE_URLS.split(",");
/** A port nothing listens on. */
export const DOWN = env.PEER_DOWN_URL;

export interface ReceiverAnswer {
  status: number;
  delayMs?: number;
  headers?: Record<string, string>;
  hangUp?: boolean;
}

export interface ReceivedRequest {
  at: number;
  method: string;
  headers: Record<string, string>;
  bodyLength: number;
  bodySha256: string;
  body: string | null;
  signatures: { node: boolean; openssl: boolean; standard: boolean } | null;
}

let counter = 0;

/** A fresh receiver that answers with `responses` in order (the last repeats); its URL. */
export async function receiver(
  responses: ReceiverAnswer[] = [{ status: 200 }],
  secret?: string,
  origin = PEER,
): Promise<{ url: string; key: string }> {
  const key = `r${Date.now().toString(36)}${(counter++).toString(36)}`;
  const res = await fetch(`${PEER}/scenarios/${key}`, { method: "POST", body: JSON.stringify({ responses, secret }) });
  if (!res.ok) throw new Error(`peer scenario: ${res.status}`);
  return { url: `${origin}/hooks/${key}`, key };
}

export async function received(key: string): Promise<ReceivedRequest[]> {
  const res = await fetch(`${PEER}/log/${key}`);
  return ((await res.json()) as { requests: ReceivedRequest[] }).requests;
}

export { sha256Hex } from "../src/platform/crypto";

/** An upstream call the peer watches (`?watch={key}`): release its held stream, read its state, or wait until its connection closed. */
export interface WatchState {
  /** The gateway's call reached the peer. */
  arrived: boolean;
  finished: boolean;
  closed: boolean;
  chunks: number;
  /** The `X-Run-Id` the watched call carried (null until it came). */
  runId: string | null;
}
export const releaseStream = async (key: string): Promise<WatchState> =>
  (await fetch(`${PEER}/release/${key}`, { method: "POST" })).json();
export const watchState = async (key: string): Promise<WatchState> => (await fetch(`${PEER}/watch/${key}`)).json();
/** Answers once the watched call's connection closed before the peer finished (or after 10 s, `closed: false`). */
export const whenClosed = async (key: string): Promise<WatchState> => (await fetch(`${PEER}/closed/${key}`)).json();
export const watchKey = () => `w${Date.now().toString(36)}${(counter++).toString(36)}`;

/** How many times the app upstreams of the peer were called with `X-Run-Id: runId`. */
export async function appCalls(runId: string): Promise<number> {
  const res = await fetch(`${PEER}/calls/${runId}`);
  return ((await res.json()) as { calls: number }).calls;
}

/** What the peer's echo app (`/upstream/echo`) answers: the request it got. */
export interface Echo {
  method: string;
  path: string;
  query: [string, string][];
  headers: Record<string, string>;
  body: string | null;
}
