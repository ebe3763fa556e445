import { CloudflareCustomHostnames, LocalCertificates } from "./domains/certificates";
import { DohResolver } from "./domains/dns";
import type { Deps } from "./platform/deps";

const local = new LocalCertificates();

/** The real outside world: the system clock, the network, DNS over HTTPS, Cloudflare for SaaS. */
export const productionDeps: Deps = {
  now: () => new Date(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  outbound: { fetch: (request) => fetch(request) },
  resolver: (config) => new DohResolver(config.dnsResolverUrl),
  // getConfig refuses "cloudflare" without its credentials, so the local provider is only ever chosen on purpose.
  certificates: (config) =>
    config.certificateProvider === "cloudflare" && config.cloudflare
      ? new CloudflareCustomHostnames({
          apiToken: config.cloudflare.apiToken,
          zoneId: config.cloudflare.zoneId,
          baseUrl: config.cloudflare.apiBaseUrl,
          certificateAuthority: config.certificateAuthority,
        })
      : local,
};
