// Types of d1-bytes.mjs for the Node test that measures a few runs per mode.
export type ModeId = "sync" | "sync+webhook" | "wait" | "wait+webhook" | "async" | "async+webhook" | "websocket";

/** The database's used bytes at one point; `file`: the same read from the persisted file (sqlite3 CLI), or null. */
export interface D1State {
  usedBytes: number;
  file: { pageCount: number; freelistCount: number; pageSize: number; usedBytes: number } | null;
}

export interface ModeBytes {
  mode: ModeId;
  label: string;
  runs: number;
  /** The change in (page_count − freelist_count) × page_size, ÷ runs. */
  usedBytesPerRun: number;
  /** The change in the sum of length() of every column of every table, ÷ runs. */
  rowBytesPerRun: number;
  /** Rows per run, by table: the tables of interest, and every table whose rows changed. */
  rowsPerRun: Record<string, number>;
  rowBytesPerRunByTable: Record<string, number>;
  before: D1State;
  after: D1State;
  /**
   * Per class of Durable Object, what its objects gained per run: used bytes (pages), row bytes (every
   * column's length()) and rows by table. Null without the sqlite3 CLI.
   */
  objectsPerRun: Record<string, { usedBytes: number; rowBytes: number; rowsByTable: Record<string, number> }> | null;
  /** Waited runs answered 202 (handed over) rather than in time. */
  handedOver: number;
  /** The final states the runs' status URLs said (async, or a waited run handed over). */
  statuses: Record<string, number>;
  deliveriesReceived: number;
  /** False: the settle timeout passed before D1 was still. */
  settled: boolean;
}

export interface D1BytesResult {
  runs: number;
  pageSize: number;
  modes: ModeBytes[];
}

export const TABLES_OF_INTEREST: string[];
export const MODES: {
  id: ModeId;
  label: string;
  webhook?: boolean;
  wait?: boolean;
  async?: boolean;
  webSocket?: boolean;
}[];

export function d1Bytes(options: {
  bundle: string;
  runs?: number;
  persistDir: string;
  modes?: ModeId[];
  settleTimeoutMs?: number;
  quietMs?: number;
  log?: (...args: unknown[]) => void;
  /** Where deliveries are recorded (`DELIVERY_LOG_STORE`): each project's logs (the default) or D1. */
  deliveryLogStore?: "d1" | "objects";
}): Promise<D1BytesResult>;

export function printD1Bytes(result: D1BytesResult): void;

export function buildBundle(outdir: string): string;
