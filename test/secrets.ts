/** Secrets for tests only; never used outside the test runtime. */
export const TEST_SECRETS = {
  ADMIN_TOKEN: "test-admin-token-0123456789abcdefghijklmnop",
  JWT_SECRET: "test-jwt-secret-0123456789abcdefghijklmnopqrs",
  WEBHOOK_ENCRYPTION_KEY: "test-webhook-key-0123456789abcdefghijklmnop",
};

/** What the fake Cloudflare API (test/global/fakes.mjs) accepts. */
export const TEST_CLOUDFLARE = {
  apiToken: "test-cloudflare-token",
  zoneId: "023e105f4ecef8ad9ca31a8372d0c353",
};

/** The gateway's client at the tests' OpenID provider (test/global/oidc.mjs). */
export const TEST_OIDC = {
  clientId: "edge-gateway-test",
  clientSecret: "test-oidc-client-secret-0123456789abcdef",
  redirectUri: "http://localhost/dashboard/oidc/callback",
};
