import type { z } from "@hono/zod-openapi";
import type { AppSchema } from "../apps/routes";
import type { BuildSchema } from "../builds/routes";
import type { DomainSchema } from "../domains/routes";
import type { ChangedMemberSchema, InviteSchema, MemberSchema } from "../members/routes";
import type { ProjectSchema } from "../projects/routes";
import type { CreatedServiceAccountSchema, ServiceAccountSchema } from "../service-accounts/routes";
import type { listRunsUnderWay, RunUnderWaySchema } from "../usage/live";
import type {
  listReceivers,
  ReceiverDetailSchema,
  ReceiverHealthSchema,
  RunRecordList as RunRecordListSchema,
  RunRecordSchema,
  UsageSchema,
} from "../usage/routes";
import type { ReceiverSchema, ResumeAnswer, TaskSchema } from "../webhooks/receiver-routes";
import type { AttemptSchema, DeliverySchema } from "../webhooks/routes";

/**
 * What the dashboard reads from the API: the routes' own schemas, inferred, never copied, so a field the
 * API changes is a type error on the page that shows it (test/node/dashboard-types.test.ts keeps it so).
 * Requests are not typed here on purpose: a page sends the form's values as they were typed, and the API
 * judges them (its problem names the field).
 */

/** The JSON a route answers with `status`, inferred from the route's schema (for answers with no schema of their own). */
type AnswerOf<
  R extends { responses: object },
  S extends keyof R["responses"] = 200 & keyof R["responses"],
> = R["responses"][S] extends { content: { "application/json": { schema: infer T extends z.ZodType } } }
  ? z.infer<T>
  : never;

export type ProjectItem = z.infer<typeof ProjectSchema>;
export type AppItem = z.infer<typeof AppSchema>;
export type BuildItem = z.infer<typeof BuildSchema>;
export type DomainItem = z.infer<typeof DomainSchema>;
export type Member = z.infer<typeof MemberSchema>;
export type ChangedMember = z.infer<typeof ChangedMemberSchema>;
export type Invite = z.infer<typeof InviteSchema>;
export type ServiceAccountItem = z.infer<typeof ServiceAccountSchema>;
export type CreatedServiceAccount = z.infer<typeof CreatedServiceAccountSchema>;
export type Attempt = z.infer<typeof AttemptSchema>;
export type Delivery = z.infer<typeof DeliverySchema>;

export type RunRecordItem = z.infer<typeof RunRecordSchema>;
export type RunRecordPage = z.infer<typeof RunRecordListSchema>;
export type RunUnderWay = z.infer<typeof RunUnderWaySchema>;
export type RunUnderWayList = AnswerOf<typeof listRunsUnderWay>;
export type Usage = z.infer<typeof UsageSchema>;
export type UsageTotals = Usage["totals"];
export type Receiver = z.infer<typeof ReceiverHealthSchema>;
export type ReceiverList = AnswerOf<typeof listReceivers>;
export type ReceiverDetail = z.infer<typeof ReceiverDetailSchema>;
/** A receiver's controls: what pause answers (its settings), what resume answers (and the task releasing what was held). */
export type ReceiverState = z.infer<typeof ReceiverSchema>;
export type ReceiverResumed = z.infer<typeof ResumeAnswer>;
export type ReceiverTask = z.infer<typeof TaskSchema>;
