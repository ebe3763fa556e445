/**
 * The message an accepted async run puts on the `async-runs` queue (`accept.ts` sends it, `consumer.ts`
 * takes it): a contract between two invocations, versioned, holding ids only (the request waits with
 * the run in D1 or R2).
 */
export interface AsyncRunMessage {
  v: 1;
  run_id: string;
  project_id: string;
}

export const isAsyncRunMessage = (body: unknown): body is AsyncRunMessage =>
  typeof body === "object" &&
  body !== null &&
  (body as AsyncRunMessage).v === 1 &&
  typeof (body as AsyncRunMessage).run_id === "string";
