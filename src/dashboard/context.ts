import type { Context } from "hono";
import { Hono } from "hono";
import type { Role, User } from "../db/schema";
import type { AppEnv } from "../platform/scope";
import type { ApiCall } from "./api";
import type { Session } from "./session";

/**
 * What the session may do in the page's project: the operator everything, a person what their role
 * allows. Pages show a control only to someone who may use it; the API checks again on every call.
 */
export type Access = { role: Role | "operator" };

export interface DashEnv {
  Bindings: AppEnv["Bindings"];
  Variables: AppEnv["Variables"] & {
    /** The visitor's session (anonymous before sign-in); set for every dashboard request but assets. */
    session: Session;
    sessionKey: CryptoKey;
    /** During an admin token rotation, the previous token's key: it still verifies cookies and forms it signed. */
    previousSessionKey: CryptoKey | undefined;
    /** The synchroniser token every form of this session carries as `_csrf`. */
    csrf: string;
    /** The management API, called as the operator or the person signed in. Only set once signed in. */
    api: ApiCall;
    /** The person signed in with OpenID Connect; undefined for the operator. Only set once signed in. */
    user: User | undefined;
    /** The session's role in the page's project; set by `withProject`. */
    access: Access | undefined;
    /** The project's receivers that are paused, disabled or failing (every project page says so at its top); set by `withProject`. */
    stoppedReceivers: { origin: string; state: string; cause: string | null; failingSince: Date | null }[] | undefined;
  };
}

export type DashContext = Context<DashEnv>;

/** Every dashboard page registers its routes on this router (mounted at DASHBOARD_BASE). */
export const createDashRouter = () => new Hono<DashEnv>();
export type DashRouter = ReturnType<typeof createDashRouter>;

export const DASHBOARD_BASE = "/dashboard";
export const dashPath = (path: string) => `${DASHBOARD_BASE}${path}`;
export const projectPath = (projectId: string, path = "") =>
  dashPath(`/projects/${encodeURIComponent(projectId)}${path}`);

/** A receiver's page (pages/receiver.tsx); `query` (task, range) as given. */
export const receiverPage = (pid: string, origin: string, query?: Record<string, string>) =>
  projectPath(
    pid,
    `/webhook-receivers/${encodeURIComponent(origin)}${query && Object.keys(query).length ? `?${new URLSearchParams(query)}` : ""}`,
  );

/** The deliveries page filtered to one receiver's deliveries of `status`. */
export const filteredDeliveries = (pid: string, origin: string, status: string) =>
  projectPath(pid, `/webhook-deliveries?${new URLSearchParams({ status, origin })}`);

/** A text field of a parsed form (`c.req.parseBody()`); "" when it is missing or a file. */
export function formText(form: Record<string, unknown>, name: string): string {
  const value = form[name];
  return typeof value === "string" ? value : "";
}
