import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { text, visitor } from "../../test/dashboard-helpers";
import { client, type Client } from "../../test/helpers";
import { addAccount, addClient, CALLBACK, ISSUER, loginAtProvider, OTHER_ISSUER } from "../../test/oidc";
import { TEST_OIDC } from "../../test/secrets";

type Visitor = ReturnType<typeof visitor>;

/** Starts a sign-in with the provider: the authorization URL the dashboard sends the browser to. */
async function begin(v: Visitor): Promise<URL> {
  const page = await v.get("/dashboard/sign-in");
  expect(text(page.html)).toContain("Sign in with single sign-on");
  const link = /href="(\/dashboard\/sign-in\/oidc\?[^"]+)"/.exec(page.html)![1]!.replace(/&amp;/g, "&");
  const started = await v.get(link);
  expect(started.status).toBe(303);
  return new URL(started.headers.get("location")!);
}

const callbackPath = (url: URL) => `${url.pathname}${url.search}`;

/** A whole sign-in of `login`; the callback's answer. */
async function signIn(v: Visitor, login: string) {
  const back = await loginAtProvider((await begin(v)).toString(), login);
  return v.get(callbackPath(back));
}

/** The gateway's calls to the provider pass here: a test swaps the ID token in the token response. */
function interceptedClient() {
  let swap: string | undefined;
  const seen: string[] = [];
  const api = client({
    outbound: {
      async fetch(request) {
        const response = await fetch(request);
        if (!request.url.endsWith("/token")) return response;
        const body = (await response.json()) as { id_token?: string };
        if (body.id_token) seen.push(body.id_token);
        if (swap) body.id_token = swap;
        return new Response(JSON.stringify(body), {
          status: response.status,
          headers: { "Content-Type": "application/json" },
        });
      },
    },
  });
  return { api, seen, swapWith: (token: string) => (swap = token) };
}

/** An ID token minted by `issuer` for `clientId`, carrying `nonce`: a real one, by a real code flow. */
async function idTokenFrom(
  issuer: string,
  clientId: string,
  secret: string,
  redirectUri: string,
  nonce: string,
  login: string,
) {
  const verifier = "v".repeat(43);
  const challenge = btoa(
    String.fromCharCode(...new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)))),
  )
    .replace(/\+/g, "-")
    .replace(/\//g, "_")
    .replace(/=+$/, "");
  const auth = new URL(`${issuer}/auth`);
  for (const [k, v] of Object.entries({
    client_id: clientId,
    redirect_uri: redirectUri,
    response_type: "code",
    scope: "openid email",
    nonce,
    state: "s",
    code_challenge: challenge,
    code_challenge_method: "S256",
  })) {
    auth.searchParams.set(k, v);
  }
  const back = await loginAtProvider(auth.toString(), login);
  const token = await fetch(`${issuer}/token`, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code: back.searchParams.get("code")!,
      redirect_uri: redirectUri,
      client_id: clientId,
      client_secret: secret,
      code_verifier: verifier,
    }),
  });
  return ((await token.json()) as { id_token: string }).id_token;
}

describe("sign-in with OpenID Connect, against a real provider", () => {
  it("signs a person in through the provider and back, with state, nonce and a PKCE challenge, and keeps their identity", async () => {
    const api = client();
    const v = visitor(api);
    const sub = await addAccount({ email: "Ada@Example.test", email_verified: true, name: "Ada Lovelace" });
    const authorization = await begin(v);
    expect(authorization.origin).toBe(ISSUER);
    const params = authorization.searchParams;
    expect(params.get("client_id")).toBe(TEST_OIDC.clientId);
    expect(params.get("redirect_uri")).toBe(TEST_OIDC.redirectUri);
    expect(params.get("code_challenge_method")).toBe("S256");
    expect(params.get("state")).toMatch(/^[\w-]{32,}$/);
    expect(params.get("nonce")).toMatch(/^[\w-]{32,}$/);
    // The verifier stays on the server; the challenge sent is its SHA-256.
    const pending = await env.DB.prepare("SELECT code_verifier FROM sign_in_requests WHERE state = ?1")
      .bind(params.get("state"))
      .first<{ code_verifier: string }>();
    const digest = new Uint8Array(
      await crypto.subtle.digest("SHA-256", new TextEncoder().encode(pending!.code_verifier)),
    );
    expect(params.get("code_challenge")).toBe(
      btoa(String.fromCharCode(...digest))
        .replace(/\+/g, "-")
        .replace(/\//g, "_")
        .replace(/=+$/, ""),
    );

    const back = await loginAtProvider(authorization.toString(), sub);
    expect(back.origin + back.pathname).toBe(CALLBACK.toString());
    const done = await v.get(callbackPath(back));
    expect(done.status).toBe(200);
    expect(done.html).toContain('http-equiv="refresh" content="0;url=/dashboard/projects"');
    const session = done.headers.getSetCookie().find((c) => c.startsWith("eg_session="))!;
    expect(session).toMatch(/HttpOnly/i);
    expect(session).toMatch(/SameSite=Strict/i);

    const projects = await v.get("/dashboard/projects");
    expect(projects.status).toBe(200);
    expect(text(projects.html)).toContain("ada@example.test");
    const user = await env.DB.prepare("SELECT issuer, email, email_verified, name FROM users WHERE subject = ?1")
      .bind(sub)
      .first();
    expect(user).toEqual({ issuer: ISSUER, email: "ada@example.test", email_verified: 1, name: "Ada Lovelace" });

    // Signing out ends the session; the copied cookie is worth nothing afterwards.
    const copied = v.cookie;
    await v.post("/dashboard/sign-out", {});
    v.cookie = copied;
    expect((await v.get("/dashboard/projects")).status).toBe(303);
  });

  it("refuses a replayed callback, and one that arrives in another browser", async () => {
    const api = client();
    const sub = await addAccount({ email: "replay@example.test", email_verified: true });
    const v = visitor(api);
    const back = await loginAtProvider((await begin(v)).toString(), sub);
    expect((await v.get(callbackPath(back))).status).toBe(200);
    const replay = await v.get(callbackPath(back));
    expect(replay.status).toBe(400);
    expect(text(replay.html)).toContain("expired, was already used");

    const other = visitor(api);
    const elsewhere = await loginAtProvider((await begin(visitor(api))).toString(), sub);
    expect((await other.get(callbackPath(elsewhere))).status).toBe(400);
  });

  it("refuses a tampered state, and a code from another sign-in (PKCE: only its own verifier redeems a code)", async () => {
    const api = client();
    const sub = await addAccount({ email: "tamper@example.test", email_verified: true });
    const v = visitor(api);
    const back = await loginAtProvider((await begin(v)).toString(), sub);
    back.searchParams.set("state", "forged-state-0123456789abcdefghijklmnop");
    const forged = await v.get(callbackPath(back));
    expect(forged.status).toBe(403);
    expect(text(forged.html)).toContain("Sign-in failed");

    // An attacker's code (from their own sign-in) put into a victim's callback, with the victim's state.
    const attacker = visitor(api);
    const stolen = await loginAtProvider((await begin(attacker)).toString(), sub);
    const victim = visitor(api);
    const victimsOwn = await loginAtProvider((await begin(victim)).toString(), sub);
    victimsOwn.searchParams.set("code", stolen.searchParams.get("code")!);
    const injected = await victim.get(callbackPath(victimsOwn));
    expect(injected.status).toBe(403);
    expect(text(injected.html)).toContain("refused the sign-in");
    expect((await victim.get("/dashboard/projects")).status).toBe(303);
  });

  it("refuses an ID token for another sign-in (nonce), from another issuer, or for another client (audience)", async () => {
    const { api, seen, swapWith } = interceptedClient();
    const sub = await addAccount({ email: "mixup@example.test", email_verified: true });
    expect((await signIn(visitor(api), sub)).status).toBe(200);
    const earlier = seen.at(-1)!;

    const attempt = async (token: (nonce: string) => Promise<string>) => {
      const v = visitor(api);
      const authorization = await begin(v);
      swapWith(await token(authorization.searchParams.get("nonce")!));
      const back = await loginAtProvider(authorization.toString(), sub);
      const answer = await v.get(callbackPath(back));
      expect((await v.get("/dashboard/projects")).status).toBe(303);
      return { status: answer.status, text: text(answer.html) };
    };

    const replayed = await attempt(async () => earlier);
    expect(replayed.status).toBe(403);
    expect(replayed.text).toMatch(/nonce/);

    const otherSub = await addAccount({ email: "mixup@example.test", email_verified: true }, OTHER_ISSUER);
    const foreign = await attempt((nonce) =>
      idTokenFrom(OTHER_ISSUER, TEST_OIDC.clientId, TEST_OIDC.clientSecret, TEST_OIDC.redirectUri, nonce, otherSub),
    );
    expect(foreign.status).toBe(403);
    expect(foreign.text).toMatch(/iss/);

    const other = {
      client_id: "another-client",
      client_secret: "another-client-secret-0123456789abcdef",
      redirect_uris: ["http://localhost/elsewhere"],
    };
    await addClient(other);
    const misaddressed = await attempt((nonce) =>
      idTokenFrom(ISSUER, other.client_id, other.client_secret, other.redirect_uris[0]!, nonce, sub),
    );
    expect(misaddressed.status).toBe(403);
    expect(misaddressed.text).toMatch(/aud/);
  });

  it("keeps the operator's admin-token sign-in beside it", async () => {
    const v = visitor(client());
    const result = await v.signIn();
    expect(result.status).toBe(303);
    expect((await v.get("/dashboard/projects")).status).toBe(200);
  });
});

export type { Client };
