// A real OpenID provider on loopback for local development and tests: `oidc-provider` (a certified
// implementation), authorization code flow with PKCE required. People "sign in" by typing an account's
// login on a one-field form. Tests add accounts and clients over `/__fixture/…`; nothing here is for
// production. Port 0: the system picks a free port, `issuer` says which.
import { generateKeyPairSync, randomUUID } from "node:crypto";
import { createServer } from "node:http";
import Provider from "oidc-provider";
import MemoryAdapter from "oidc-provider/lib/adapters/memory_adapter.js";

const escape = (text) => String(text).replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

/**
 * @param {{ accounts?: Record<string, { email?: string, email_verified?: boolean, name?: string }>,
 *           clients?: object[], host?: string }} options
 */
export async function startOidcProvider(options = {}) {
  const accounts = new Map(Object.entries(options.accounts ?? {}));
  const clients = new Map();
  const addClient = (client) =>
    clients.set(client.client_id, {
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "client_secret_post",
      ...client,
    });
  for (const client of options.clients ?? []) addClient(client);

  // Clients live here, so a test can register one (with its redirect URI) after the provider started.
  class Adapter extends MemoryAdapter {
    constructor(name) {
      super(name);
      this.model = name;
    }
    async find(id) {
      if (this.model === "Client") return clients.get(id);
      return super.find(id);
    }
  }

  const server = createServer();
  await new Promise((resolve) => server.listen(0, options.host ?? "127.0.0.1", resolve));
  const issuer = `http://${options.host ?? "127.0.0.1"}:${server.address().port}`;
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const provider = new Provider(issuer, {
    adapter: Adapter,
    jwks: { keys: [{ ...privateKey.export({ format: "jwk" }), kid: randomUUID(), alg: "RS256", use: "sig" }] },
    cookies: { keys: [randomUUID()] },
    claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"] },
    pkce: { required: () => true },
    features: { devInteractions: { enabled: false } },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    async findAccount(_ctx, id) {
      const account = accounts.get(id);
      if (!account) return undefined;
      return { accountId: id, claims: async () => ({ sub: id, ...account }) };
    },
  });

  async function interaction(req, res, uid) {
    if (req.method === "GET") {
      const details = await provider.interactionDetails(req, res);
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      res.end(`<!doctype html><html lang="en"><head><title>Sign in · local OpenID provider</title></head><body><main>
<h1>Local OpenID provider</h1><p>Signing in to <code>${escape(details.params.client_id)}</code>.</p>
<form method="post" action="/interaction/${escape(uid)}"><label for="login">Login</label> <input id="login" name="login" autofocus>
<button type="submit">Continue</button></form></main></body></html>`);
      return;
    }
    const login = new URLSearchParams(await readBody(req)).get("login") ?? "";
    const details = await provider.interactionDetails(req, res);
    if (!accounts.has(login)) {
      await provider.interactionFinished(
        req,
        res,
        { error: "access_denied", error_description: "unknown login" },
        { mergeWithLastSubmission: false },
      );
      return;
    }
    // Consent is given with the login: a grant of the scopes the client asked for.
    const grant = new provider.Grant({ accountId: login, clientId: details.params.client_id });
    grant.addOIDCScope(String(details.params.scope));
    const grantId = await grant.save();
    await provider.interactionFinished(
      req,
      res,
      { login: { accountId: login }, consent: { grantId } },
      { mergeWithLastSubmission: false },
    );
  }

  async function fixture(req, res, what) {
    const body = JSON.parse((await readBody(req)) || "{}");
    if (what === "accounts")
      accounts.set(body.sub, { email: body.email, email_verified: body.email_verified, name: body.name });
    else if (what === "clients") addClient(body);
    else {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(204).end();
  }

  const callback = provider.callback();
  server.on("request", (req, res) => {
    const url = new URL(req.url, issuer);
    const step = /^\/interaction\/([\w-]+)$/.exec(url.pathname);
    const fix = /^\/__fixture\/(\w+)$/.exec(url.pathname);
    const handled = step
      ? interaction(req, res, step[1])
      : fix && req.method === "POST"
        ? fixture(req, res, fix[1])
        : callback(req, res);
    Promise.resolve(handled).catch((error) => {
      if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
      res.end(String(error));
    });
  });

  return {
    issuer,
    addAccount: (sub, claims) => accounts.set(sub, claims),
    addClient,
    stop: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
