import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { sign } from "hono/jwt";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { actingAs } from "../../src/auth/internal";
import type { DeliveryMessage } from "../../src/webhooks/message";
import { consume, interceptedKeepers, keeperUnavailable, startAsync } from "../async-runs";
import { visitor } from "../dashboard-helpers";
import { faultyD1, type Refused } from "../faulty-d1";
import { ADMIN, client, seedBuild } from "../helpers";
import { DOWN, PEER, receiver } from "../peers";
import { person } from "../people";
import { callWith, capturingQueue, seedRunnable } from "../runs";
import { TEST_SECRETS } from "../secrets";
import { drive } from "../webhooks";
import { faultyDeliveryStores } from "../delivery-stores";

/** Every line the gateway wrote to the console while a test ran. */
let logged: string[] = [];

beforeEach(() => {
  logged = [];
  for (const level of ["log", "info", "warn", "error", "debug"] as const) {
    vi.spyOn(console, level).mockImplementation((...args: unknown[]) => {
      logged.push(args.map((a) => (typeof a === "string" ? a : (JSON.stringify(a) ?? String(a)))).join(" "));
    });
  }
});
afterEach(() => {
  vi.restoreAllMocks();
});

describe("secrets never appear in logs or responses", () => {
  it("keeps the admin token, the service keys, tokens, JWTs and webhook secrets out of every log line and response", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const responses: string[] = [];
    const keep = async (response: Response) => {
      responses.push([...response.headers].map(([k, v]) => `${k}: ${v}`).join("\n") + "\n" + (await response.text()));
      return response;
    };
    const webhookSecret = "whsec_c2VjcmV0LW5ldmVyLWxvZ2dlZA==";
    const jwt = await sign(
      { project_id: app.projectId, exp: Math.floor(api.clock.now().getTime() / 1000) + 600 },
      TEST_SECRETS.JWT_SECRET,
      "HS256",
    );
    const guessedAdmin = `${ADMIN.slice(0, -4)}XXXX`;

    // Runs with each kind of key, and with a signed webhook that fails every attempt (error lines).
    for (const token of [app.token, jwt, ADMIN]) {
      await keep(
        await callWith(api, {}, app.runPath, {
          method: "POST",
          token,
          headers: { "Content-Type": "application/json" },
          body: "{}",
        }),
      );
    }
    const capture = capturingQueue();
    await keep(
      await callWith(
        api,
        { ...capture.bindings },
        `${app.runPath}?webhookEndpoint=${encodeURIComponent(`${DOWN}/hook`)}`,
        {
          method: "POST",
          token: app.token,
          headers: { "Content-Type": "application/json", "X-Webhook-Secret": webhookSecret },
          body: "{}",
        },
      ),
    );
    await drive(api, capture.sent[0] as DeliveryMessage);
    const hook = await receiver([{ status: 500 }], webhookSecret);
    const again = capturingQueue();
    await callWith(api, { ...again.bindings }, `${app.runPath}?webhookEndpoint=${encodeURIComponent(hook.url)}`, {
      method: "POST",
      token: app.token,
      headers: { "X-Webhook-Secret": webhookSecret },
    });
    await drive(api, again.sent[0] as DeliveryMessage);
    expect(JSON.stringify([...capture.sent, ...again.sent])).not.toContain(webhookSecret);

    // Refused credentials: wrong, tampered, revoked; each answer and log line must not echo them.
    const tampered = `${jwt.slice(0, -3)}abc`;
    for (const token of [guessedAdmin, tampered, `${app.token.slice(0, -2)}zz`]) {
      await keep(await callWith(api, {}, app.runPath, { token }));
      await keep(await callWith(api, {}, `/v2/projects/${app.projectId}`, { token }));
    }
    await keep(
      await callWith(api, {}, `/v2/projects/${app.projectId}/service-accounts/${app.serviceAccountId}`, {
        method: "DELETE",
        token: ADMIN,
      }),
    );
    await keep(await callWith(api, {}, app.runPath, { token: app.token }));

    // Reads that list what holds secrets.
    await keep(await callWith(api, {}, `/v2/projects/${app.projectId}/service-accounts`, { token: ADMIN }));
    await keep(await callWith(api, {}, `/v2/projects/${app.projectId}/webhook-deliveries`, { token: ADMIN }));

    // The dashboard: a wrong sign-in, then a right one, its pages.
    const browser = visitor(api);
    await browser.signIn(guessedAdmin);
    await browser.signIn();
    responses.push((await browser.get(`/dashboard/projects/${app.projectId}/api-keys`)).html);

    const secrets = { ...TEST_SECRETS, serviceAccountToken: app.token, jwt, webhookSecret, guessedAdmin, tampered };
    expect(logged.length).toBeGreaterThan(0);
    for (const [name, secret] of Object.entries(secrets)) {
      for (const line of logged)
        expect(line.includes(secret), `${name} in a log line: ${line.slice(0, 200)}`).toBe(false);
      for (const response of responses) expect(response.includes(secret), `${name} in a response`).toBe(false);
    }
    // Only the token's visible prefix is ever shown again.
    expect(responses.join("\n")).toContain(app.token.slice(0, 12));
  });
});

describe("a D1 failure on a write that carries caller data leaves none of it in the logs", () => {
  // Drizzle's error for a failed statement reads "Failed query: <sql> params: <every bound value>": the
  // forwarded headers, the query, a webhook URL, a code_verifier. Each write path that takes a caller's
  // data is made to fail here; no planted secret, and no value bound to the refused statement (but our
  // own ids), may reach a log line.
  const APP_KEY = "sk_live_app_key_5b9e0c1d7a";
  const QUERY_SECRET = "q_secret_83fd02ab71";
  const BODY_SECRET = "body_secret_1e7c55aa09";
  const SLACK_PATH = "T0LOGS/B0LOGS/slack_secret_a8c2f4e6";
  const WEBHOOK_SECRET = "whsec_bG9nLXNlY3JldC1uZXZlci1sb2dnZWQ=";
  const ORIGIN_SECRET = "sig_origin_4410fe9d2c";
  const NAME_SECRET = "name_secret_77b0d3e1c5";
  // Our ids (an app id is its project id and name) are what log lines are for.
  const OUR_ID = /^[a-z]+_[0-9a-hjkmnp-tv-z]{30}(-[a-z0-9-]+)?$/;

  /** Checks the logs after `refused` statements failed: the failure was logged, without what it carried. */
  function expectNoneLogged(refused: Refused[], planted: string[]) {
    expect(refused.length, "the write path failed as planned").toBeGreaterThan(0);
    expect(
      logged.some((line) => /unavailable|not written|not recorded|crashed|error/i.test(line)),
      "the failure has its log line",
    ).toBe(true);
    const bound = refused
      .flatMap((r) => r.values)
      .filter((v): v is string => typeof v === "string" && v.length >= 12 && !OUR_ID.test(v) && !/^\d+$/.test(v));
    for (const secret of [...planted, ...bound]) {
      for (const line of logged)
        expect(line.includes(secret), `${secret.slice(0, 60)} in a log line: ${line.slice(0, 300)}`).toBe(false);
    }
    for (const line of logged) expect(line, "a statement's parameter list").not.toMatch(/params: (?!\[redacted\])/);
  }

  /**
   * A `RUN_KEEPER` binding whose keepers fail `op` on their runs (async runs are kept there, not in D1):
   * the arguments it refused are recorded as a refused statement's values, every string in them.
   */
  function faultyKeepers(op: string, refused: Refused[]) {
    const strings = (value: unknown): string[] =>
      typeof value === "string"
        ? [value]
        : value !== null && typeof value === "object"
          ? Object.values(value).flatMap(strings)
          : [];
    return interceptedKeepers((called, args, call) => {
      if (called !== op) return call();
      refused.push({ sql: `keeper runs(${op})`, values: args.flatMap(strings) });
      return Promise.reject(keeperUnavailable());
    });
  }

  it("async run accepted with forwarded headers, a query and a body", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const refused: Refused[] = [];
    const broken = faultyKeepers("insert", refused);
    const response = await callWith(api, { RUN_KEEPER: broken }, `${app.runPath}?async=true&token=${QUERY_SECRET}`, {
      method: "POST",
      token: app.token,
      headers: { "Content-Type": "application/json", "X-Api-Key": APP_KEY, "Idempotency-Key": "order-1" },
      body: JSON.stringify({ secret: BODY_SECRET }),
    });
    expect(response.status).toBe(503);
    expectNoneLogged(refused, [APP_KEY, QUERY_SECRET, BODY_SECRET]);
  });

  it("async run whose result (the app's answer, echoing the request) cannot be written", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const started = await startAsync(api, app, {
      query: `token=${QUERY_SECRET}`,
      headers: { "X-Api-Key": APP_KEY },
      body: { secret: BODY_SECRET },
    });
    const refused: Refused[] = [];
    const broken = faultyKeepers("end", refused);
    expect(await consume(api, started.message, { bindings: { RUN_KEEPER: broken } })).toMatchObject({
      acked: false,
      retried: true,
    });
    expectNoneLogged(refused, [APP_KEY, QUERY_SECRET, BODY_SECRET]);
  });

  it("webhook delivery's pending record with a Slack-style secret URL and a signing secret", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const refused: Refused[] = [];
    const broken = faultyDeliveryStores((sql) => /^insert into "webhook_deliveries"/i.test(sql), refused);
    const endpoint = `${PEER}/services/${SLACK_PATH}?token=${QUERY_SECRET}`;
    const response = await callWith(
      api,
      { ...broken, ...capturingQueue().bindings },
      `${app.runPath}?webhookEndpoint=${encodeURIComponent(endpoint)}`,
      {
        method: "POST",
        token: app.token,
        headers: { "Content-Type": "application/json", "X-Webhook-Secret": WEBHOOK_SECRET },
        body: "{}",
      },
    );
    expect(response.status).toBe(200);
    expectNoneLogged(refused, [SLACK_PATH, QUERY_SECRET, WEBHOOK_SECRET]);
  });

  it("service account creation", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const refused: Refused[] = [];
    const broken = faultyD1(env.DB, (sql) => /^insert into "service_accounts"/i.test(sql), refused);
    const expires = new Date(api.clock.now().getTime() + 24 * 3600 * 1000).toISOString();
    const response = await callWith(api, { DB: broken }, `/v2/projects/${app.projectId}/service-accounts`, {
      method: "POST",
      token: ADMIN,
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: NAME_SECRET, expires_at: expires }),
    });
    expect(response.status).toBe(503);
    expectNoneLogged(refused, [NAME_SECRET]);
  });

  it("OpenID Connect sign-in state (state, nonce, code_verifier)", async () => {
    const refused: Refused[] = [];
    const broken = client({}, { DB: faultyD1(env.DB, (sql) => /^insert into "sign_in_requests"/i.test(sql), refused) });
    const started = await visitor(broken).get("/dashboard/sign-in/oidc");
    expect(started.status).toBeGreaterThanOrEqual(500);
    expectNoneLogged(refused, []);
  });

  it("custom domain creation (its ownership record's random value)", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const refused: Refused[] = [];
    const broken = faultyD1(env.DB, (sql) => /^insert into "domains"/i.test(sql), refused);
    const response = await callWith(api, { DB: broken }, `/v2/projects/${app.projectId}/domains`, {
      method: "POST",
      token: app.token,
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ domain: `logs-${Date.now().toString(36)}.example.com`, region: "us-east-1" }),
    });
    expect(response.status).toBe(503);
    expectNoneLogged(refused, []);
  });

  it("a build's report with an origin URL that carries a signature", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const buildId = await seedBuild(api, app);
    const refused: Refused[] = [];
    const broken = faultyD1(env.DB, (sql) => /^update "builds"/i.test(sql), refused);
    const response = await callWith(
      api,
      { DB: broken },
      `/v2/projects/${app.projectId}/apps/${app.appId}/builds/${buildId}`,
      {
        method: "PATCH",
        token: app.token,
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ status: "succeeded", origin_url: `${PEER}/upstream/echo?sig=${ORIGIN_SECRET}` }),
      },
    );
    expect(response.status).toBe(503);
    expectNoneLogged(refused, [ORIGIN_SECRET]);
  });
});

describe("log lines carry ids, never a path, a client address or an audit row", () => {
  // A path is the caller's data (an app's route can name a person and carry a reset token); an address
  // and an audit row's emails are people's data. The request id finds the rest.
  const PATH_SECRET = "reset_9f3c1d0e7b5a42c6";
  const PATH_EMAIL = "alice.planted@example.com";
  const ADDRESS = "198.51.100.237";
  const INVITED = "invitee.planted@example.com";
  const ACTOR_EMAIL = "actor.planted@example.com";

  /** A D1 that fails every statement while `down.now` is true. */
  function switchableD1() {
    const down = { now: false };
    return { down, db: faultyD1(env.DB, () => down.now) };
  }
  const expectInNoLine = (planted: string[]) => {
    expect(logged.length, "something was logged").toBeGreaterThan(0);
    for (const secret of planted)
      for (const line of logged)
        expect(line.includes(secret), `${secret} in a log line: ${line.slice(0, 300)}`).toBe(false);
  };

  it("a path with D1 down: a run's (the run entry), a management route's (the router) and a dashboard page's", async () => {
    const { down, db } = switchableD1();
    const api = client({}, { DB: db });
    const app = await seedRunnable(api);
    const browser = visitor(api);
    await browser.signIn();
    down.now = true;
    logged = [];
    const run = await api.call(`${app.appPath}/users/${PATH_EMAIL}/reset/${PATH_SECRET}`, {
      method: "POST",
      token: app.token,
      body: {},
    });
    expect(run.status).toBe(503);
    const managed = await api.call(`/v2/projects/${app.projectId}/domains/${PATH_SECRET}.example.com`);
    expect(managed.status).toBe(503);
    const page = await browser.get(`/dashboard/projects/${app.projectId}/domains/${PATH_SECRET}.example.com`);
    expect(page.status).toBe(500);
    expect(logged.filter((line) => /storage unavailable/.test(line)).length, "both API failures have their line").toBe(
      2,
    );
    expect(
      logged.some((line) => /dashboard error/.test(line)),
      "the page's failure has its line",
    ).toBe(true);
    expectInNoLine([PATH_SECRET, PATH_EMAIL]);
  });

  it("the client address of a sign-in refused and then throttled", async () => {
    const api = client();
    const browser = visitor(api, { ip: ADDRESS });
    logged = [];
    let last = 0;
    for (let i = 0; i < 7; i++) last = (await browser.signIn(`${ADMIN.slice(0, -4)}XXXX`)).status;
    expect(last).toBe(429);
    expect(
      logged.some((line) => /sign-in refused/.test(line)) && logged.some((line) => /sign-in throttled/.test(line)),
    ).toBe(true);
    expectInNoLine([ADDRESS]);
  });

  it("an audit entry D1 would not take: its ids are logged, not its address, emails or details", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const user = await person(api, { email: ACTOR_EMAIL });
    await api.json(`/v2/projects/${app.projectId}/members`, {
      method: "POST",
      body: { email: ACTOR_EMAIL, role: "owner" },
    });
    const broken = faultyD1(env.DB, (sql) => /^insert into "audit_log"/i.test(sql));
    const request = new Request(`http://localhost/v2/projects/${app.projectId}/invites`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "CF-Connecting-IP": ADDRESS },
      body: JSON.stringify({ email: INVITED, role: "viewer" }),
    });
    actingAs(request, { kind: "user", userId: user.id, email: user.email });
    logged = [];
    const ctx = createExecutionContext();
    const response = await api.worker.fetch(request, { ...env, DB: broken }, ctx);
    await waitOnExecutionContext(ctx);
    expect(response.status).toBe(201);
    const line = logged.find((l) => /audit entry not written/.test(l));
    expect(line, "the lost entry has its line").toBeDefined();
    expect(line).toContain('"action":"invite.create"');
    expect(line).toContain(`"actor_id":"${user.id}"`);
    expectInNoLine([ADDRESS, INVITED, ACTOR_EMAIL]);
  });
});

describe("run path: revoked and tampered credentials", () => {
  it("refuses a revoked token at once in the isolate that revoked it, and a token with one character changed", async () => {
    let upstreamCalls = 0;
    const api = client({ outbound: { fetch: (r) => (upstreamCalls++, fetch(r)) } });
    const app = await seedRunnable(api);
    const run = (token: string) =>
      callWith(api, {}, app.runPath, {
        method: "POST",
        token,
        headers: { "Content-Type": "application/json" },
        body: "{}",
      });
    expect((await run(app.token)).status).toBe(200);
    const last = app.token.at(-1)!;
    const tampered = `${app.token.slice(0, -1)}${last === "a" ? "b" : "a"}`;
    const refused = await run(tampered);
    expect(refused.status).toBe(401);
    expect(refused.headers.get("www-authenticate")).toMatch(/invalid_token/);
    await api.json(`/v2/projects/${app.projectId}/service-accounts/${app.serviceAccountId}`, { method: "DELETE" });
    const revoked = await run(app.token);
    expect(revoked.status).toBe(401);
    expect(await revoked.text()).toMatch(/revoked/);
    expect(upstreamCalls).toBe(1);
  });
});

declare global {
  interface ImportMeta {
    /** Vite's static import of many files (resolved when the test is bundled). */
    glob<T>(patterns: string[], options: { query: string; import: string; eager: true }): Record<string, T>;
  }
}

/** The source of every module under src/, to check how secrets are compared. */
const sources: Record<string, string> = import.meta.glob<string>(
  ["../../src/**/*.ts", "../../src/**/*.tsx", "!../../src/**/*.test.ts", "!../../src/**/*.test.tsx"],
  {
    query: "?raw",
    import: "default",
    eager: true,
  },
);

/** The receivers' verification package, which src/webhooks/verify.ts re-exports. */
const verifyPackage = Object.values(
  import.meta.glob<string>(["../../packages/verify/index.js"], { query: "?raw", import: "default", eager: true }),
)[0];

describe("secrets are compared in constant time", () => {
  it("reads the sources (the check below is not vacuous)", () => {
    expect(Object.keys(sources).length).toBeGreaterThan(40);
  });

  it("compares the admin token, CSRF tokens and signatures only through timing-safe functions", () => {
    const secretish = /\b(adminToken|jwtSecret|webhookEncryptionKey|csrf\w*|expected|signature\w*|tokenHash|secret)\b/i;
    const offenders: string[] = [];
    for (const [file, text] of Object.entries(sources)) {
      text.split("\n").forEach((line: string, i: number) => {
        const code = line.replace(/\/\/.*$/, "");
        // An equality test with a secret on either side, other than a presence or type check.
        if (
          /[!=]==?/.test(code) &&
          secretish.test(code) &&
          !/(===|!==)\s*(undefined|null|""|"string"|0)\b|typeof |\.length\s*[!=]==|\bstatus\b|header/.test(code)
        ) {
          offenders.push(`${file}:${i + 1}: ${line.trim()}`);
        }
      });
    }
    expect(offenders).toEqual([]);
  });

  it("routes every comparison of a presented credential through secretsEqual, crypto.subtle.verify or a constant-time loop", () => {
    const uses = (file: string, pattern: RegExp) => expect(sources[`../../src/${file}`], file).toMatch(pattern);
    uses("auth/middleware.ts", /secretsEqual\(token, scope\.config\.adminToken\)/);
    uses("runs/run-key.ts", /secretsEqual\(token, scope\.config\.adminToken\)/);
    uses("dashboard/auth.tsx", /secretsEqual\(token, c\.var\.scope\.config\.adminToken\)/);
    uses("dashboard/session.ts", /crypto\.subtle\.verify\("HMAC"/);
    uses("dashboard/session.ts", /secretsEqual\(token, await csrfToken/);
    expect(verifyPackage, "packages/verify/index.js").toMatch(/constantTimeEqual\(candidate/);
    uses("platform/crypto.ts", /crypto\.subtle\.timingSafeEqual/);
    // Service account tokens are looked up by their SHA-256 hash: nothing secret is compared byte by byte.
    uses("auth/lookup.ts", /eq\(serviceAccounts\.tokenHash, hash\)/);
  });
});
