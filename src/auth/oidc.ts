import * as oauth from "oauth4webapi";

/**
 * People's sign-in with OpenID Connect: the authorization code flow with PKCE (S256), state and nonce,
 * through `oauth4webapi` (maintained, certified, Web APIs only, so it runs in Workers). The provider is
 * found by discovery from `OIDC_ISSUER`, so any OpenID provider works.
 */
export interface OidcSettings {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** `http:` endpoints: only for a provider on loopback in development and tests (ALLOW_INSECURE_TARGETS). */
  allowInsecure: boolean;
  fetch: (request: Request) => Promise<Response>;
}

/** What the callback needs again, kept server-side between the redirect out and the way back. */
export interface PendingSignIn {
  state: string;
  nonce: string;
  codeVerifier: string;
}

export interface Identity {
  issuer: string;
  subject: string;
  /** Lower case; null when the provider gave none. */
  email: string | null;
  /** Only a literal `true` from the provider counts. */
  emailVerified: boolean;
  name: string | null;
}

/** A sign-in that cannot complete; `message` is safe to show (it names no secret). */
export class SignInError extends Error {}

/** Each call to the provider is one subrequest; none may hold the sign-in longer than this. */
const PROVIDER_TIMEOUT_MS = 10_000;
/** Provider metadata and keys change rarely: one discovery per isolate and issuer per 10 minutes. */
const DISCOVERY_TTL_MS = 10 * 60 * 1000;
const discovered = new Map<string, { at: number; server: Promise<oauth.AuthorizationServer> }>();
const jwks = new Map<string, oauth.ExportedJWKSCache>();

function httpOptions(settings: OidcSettings) {
  return {
    [oauth.allowInsecureRequests]: settings.allowInsecure,
    [oauth.customFetch]: (url: string, init: oauth.CustomFetchOptions<string, unknown>) =>
      settings.fetch(
        new Request(url, {
          method: init.method,
          headers: init.headers,
          body: init.body as BodyInit | null | undefined,
          redirect: "manual",
        }),
      ),
    signal: AbortSignal.timeout(PROVIDER_TIMEOUT_MS),
  };
}

async function authorizationServer(settings: OidcSettings, now: number): Promise<oauth.AuthorizationServer> {
  const key = `${settings.issuer}\n${settings.allowInsecure}`;
  const cached = discovered.get(key);
  if (cached && now - cached.at < DISCOVERY_TTL_MS) return cached.server;
  const issuer = new URL(settings.issuer);
  const server = oauth
    .discoveryRequest(issuer, { ...httpOptions(settings), algorithm: "oidc" })
    .then((response) => oauth.processDiscoveryResponse(issuer, response));
  discovered.set(key, { at: now, server });
  // A failed discovery is not kept: the next sign-in tries again.
  server.catch(() => discovered.delete(key));
  return server;
}

const clientOf = (settings: OidcSettings): oauth.Client => ({ client_id: settings.clientId });

/** The provider's authorization URL to send the browser to, and what the callback must find again. */
export async function beginSignIn(
  settings: OidcSettings,
  redirectUri: string,
  now: number,
): Promise<{ url: URL; pending: PendingSignIn }> {
  const server = await reach(() => authorizationServer(settings, now));
  if (!server.authorization_endpoint)
    throw new SignInError("The sign-in provider publishes no authorization endpoint.");
  const pending = {
    state: oauth.generateRandomState(),
    nonce: oauth.generateRandomNonce(),
    codeVerifier: oauth.generateRandomCodeVerifier(),
  };
  const url = new URL(server.authorization_endpoint);
  url.searchParams.set("client_id", settings.clientId);
  url.searchParams.set("redirect_uri", redirectUri);
  url.searchParams.set("response_type", "code");
  url.searchParams.set("scope", "openid email profile");
  url.searchParams.set("state", pending.state);
  url.searchParams.set("nonce", pending.nonce);
  url.searchParams.set("code_challenge", await oauth.calculatePKCECodeChallenge(pending.codeVerifier));
  url.searchParams.set("code_challenge_method", "S256");
  return { url, pending };
}

/**
 * Checks the provider's answer (state, issuer), redeems the code with the PKCE verifier, and checks the
 * ID token (issuer, audience, expiry, nonce, signature against the provider's keys). Email and name
 * come from the ID token, or from the UserInfo endpoint when the token carries no email.
 */
export async function finishSignIn(
  settings: OidcSettings,
  redirectUri: string,
  callbackUrl: URL,
  pending: PendingSignIn,
  now: number,
): Promise<Identity> {
  const server = await reach(() => authorizationServer(settings, now));
  const client = clientOf(settings);
  const options = httpOptions(settings);
  try {
    const params = oauth.validateAuthResponse(server, client, callbackUrl, pending.state);
    const response = await oauth.authorizationCodeGrantRequest(
      server,
      client,
      oauth.ClientSecretPost(settings.clientSecret),
      params,
      redirectUri,
      pending.codeVerifier,
      options,
    );
    const tokens = await oauth.processAuthorizationCodeResponse(server, client, response, {
      expectedNonce: pending.nonce,
      requireIdToken: true,
    });
    let cache = jwks.get(settings.issuer);
    if (!cache) jwks.set(settings.issuer, (cache = {} as oauth.ExportedJWKSCache));
    await oauth.validateApplicationLevelSignature(server, response, { ...options, [oauth.jwksCache]: cache });
    const claims = oauth.getValidatedIdTokenClaims(tokens)!;
    let profile: Record<string, unknown> = claims;
    if (typeof claims.email !== "string" && server.userinfo_endpoint) {
      const info = await oauth.userInfoRequest(server, client, tokens.access_token, options);
      profile = { ...(await oauth.processUserInfoResponse(server, client, claims.sub, info)), sub: claims.sub };
    }
    const email = typeof profile.email === "string" && profile.email.length <= 254 ? profile.email.toLowerCase() : null;
    const name = typeof profile.name === "string" ? profile.name.slice(0, 200) : null;
    return {
      issuer: server.issuer,
      subject: claims.sub,
      email,
      emailVerified: email !== null && profile.email_verified === true,
      name,
    };
  } catch (error) {
    throw toSignInError(error);
  }
}

async function reach<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (error) {
    throw toSignInError(error);
  }
}

function toSignInError(error: unknown): SignInError {
  if (error instanceof SignInError) return error;
  if (error instanceof oauth.AuthorizationResponseError) {
    return new SignInError(
      `The sign-in provider answered '${error.error}'${error.error_description ? `: ${error.error_description}` : ""}.`,
    );
  }
  if (error instanceof oauth.ResponseBodyError)
    return new SignInError(`The sign-in provider refused the sign-in ('${error.error}').`);
  if (error instanceof oauth.OperationProcessingError)
    return new SignInError(`The sign-in provider's answer was not accepted: ${error.message}`);
  if (error instanceof oauth.UnsupportedOperationError)
    return new SignInError(`The sign-in provider's answer was not accepted: ${error.message}`);
  return new SignInError(
    `The sign-in provider could not be reached (${error instanceof Error ? error.name : "error"}).`,
  );
}
