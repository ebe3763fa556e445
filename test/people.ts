import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { actingAs } from "../src/auth/internal";
import { upsertUser } from "../src/auth/users";
import { encodeSession, newSession, sessionKey } from "../src/dashboard/session";
import { storeSession } from "../src/dashboard/session-store";
import { createDb } from "../src/db/client";
import type { User } from "../src/db/schema";
import { claimInvites } from "../src/members/store";
import type { Client } from "./helpers";
import { ISSUER } from "./oidc";
import { TEST_SECRETS } from "./secrets";

let people = 0;

/**
 * A person as their sign-in leaves them (a user row, their invites claimed), without the provider
 * round trip: for tests about roles. The sign-in itself is tested in src/dashboard/sign-in-oidc.test.ts.
 */
export async function person(
  api: Client,
  claims: { email?: string; verified?: boolean; name?: string } = {},
): Promise<User> {
  const n = people++;
  const db = createDb(env.DB);
  const now = api.clock.now();
  const email = claims.email ?? `person-${Date.now().toString(36)}-${n}@example.test`;
  const user = await upsertUser(
    db,
    {
      issuer: ISSUER,
      subject: `sub-${Date.now().toString(36)}-${n}`,
      email,
      emailVerified: claims.verified ?? true,
      name: claims.name ?? null,
    },
    now,
  );
  await claimInvites(db, user, now);
  return user;
}

/** The management API called as `user`, the way the dashboard calls it for them (in-process). */
export function asPerson(api: Client, user: Pick<User, "id" | "email">) {
  return async function json<T = Record<string, unknown>>(
    path: string,
    options: { method?: string; body?: unknown } = {},
  ) {
    const request = new Request(`http://localhost${path}`, {
      method: options.method ?? "GET",
      headers: options.body === undefined ? {} : { "Content-Type": "application/json" },
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    });
    actingAs(request, { kind: "user", userId: user.id, email: user.email });
    const ctx = createExecutionContext();
    const response = await api.worker.fetch(request, env, ctx);
    // An event stream (`…/runs/events`) stays open: its status is the answer, its body is let go.
    if (response.headers.get("content-type")?.startsWith("text/event-stream")) {
      await response.body?.cancel();
      await waitOnExecutionContext(ctx);
      return { status: response.status, body: null as T, headers: response.headers };
    }
    await waitOnExecutionContext(ctx);
    const text = await response.text();
    // JSON (problems included) parsed; any other answer (the metrics' text, a CSV) as its text.
    const json = /json/.test(response.headers.get("content-type") ?? "");
    return {
      status: response.status,
      body: (text ? (json ? JSON.parse(text) : text) : null) as T,
      headers: response.headers,
    };
  };
}

/** A project whose owner is `owner` (invited by the operator, claimed at sign-in). */
export async function projectOwnedBy(api: Client, ownerEmail: string) {
  const project = await api.json<{ project_id: string }>("/v2/projects", {
    method: "POST",
    body: { name: `people-${people++}` },
  });
  const invite = await api.json(`/v2/projects/${project.body.project_id}/invites`, {
    method: "POST",
    body: { email: ownerEmail, role: "owner" },
  });
  if (invite.status !== 201) throw new Error(`invite: ${JSON.stringify(invite.body)}`);
  return project.body.project_id;
}

/** Gives a dashboard visitor the session a sign-in of `user` leaves (the provider round trip is tested elsewhere). */
export async function signInAs(v: { cookie: string }, api: Client, user: Pick<User, "id">) {
  const session = newSession(api.clock.now().getTime(), true, user.id);
  await storeSession(createDb(env.DB), session, api.clock.now());
  v.cookie = `eg_session=${await encodeSession(await sessionKey(TEST_SECRETS.ADMIN_TOKEN), session)}`;
}
