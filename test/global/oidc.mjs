// Real OpenID providers on loopback for the tests (scripts/oidc-provider.mjs, `oidc-provider`): the one
// the gateway is configured with, and a second one (another issuer) whose tokens it must refuse.
// Accounts and further clients are added by the tests over `/__fixture/…`.
import { startOidcProvider } from "../../scripts/oidc-provider.mjs";
import { TEST_OIDC } from "../secrets.ts";

export default async function setup(project) {
  const gateway = {
    client_id: TEST_OIDC.clientId,
    client_secret: TEST_OIDC.clientSecret,
    redirect_uris: [TEST_OIDC.redirectUri],
  };
  const main = await startOidcProvider({ clients: [gateway] });
  const other = await startOidcProvider({ clients: [gateway] });
  project.provide("oidcIssuer", main.issuer);
  project.provide("oidcOtherIssuer", other.issuer);
  return async () => {
    await main.stop();
    await other.stop();
  };
}
