import type { Database } from "../db/client";
import type { Principal } from "../auth/principal";
import { type CertificateProvider, CloudflareCustomHostnames, LocalCertificates } from "../domains/certificates";
import { type DnsResolver, DohResolver } from "../domains/dns";
import type { CustomDomainRoute } from "../domains/lookup";
import type { Config, Env } from "./env";

/**
 * What handlers reach the outside world and the clock through. Production wires the real ones;
 * tests and local development pass others to `createApp` instead of branching on the environment.
 */
export interface Deps {
  now(): Date;
  /** Waits `ms` (the pause between webhook attempts); tests pass one that moves a fake clock instead. */
  sleep(ms: number): Promise<void>;
  /** Requests to the outside world on a customer's behalf: app upstreams and webhook receivers. */
  outbound: Outbound;
  /** DNS over HTTPS (RFC 8484) for custom domain validation. */
  resolver(config: Config): DnsResolver;
  /** Certificates of custom domains: Cloudflare for SaaS when configured, local otherwise. */
  certificates(config: Config): CertificateProvider;
}

export interface Outbound {
  fetch(request: Request): Promise<Response>;
}

const local = new LocalCertificates();

export const defaultDeps: Deps = {
  now: () => new Date(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  outbound: { fetch: (request) => fetch(request) },
  resolver: (config) => new DohResolver(config.dnsResolverUrl),
  certificates: (config) =>
    config.cloudflare
      ? new CloudflareCustomHostnames({ apiToken: config.cloudflare.apiToken, zoneId: config.cloudflare.zoneId, baseUrl: config.cloudflare.apiBaseUrl })
      : local,
};

export interface AppEnv {
  Bindings: Env;
  Variables: {
    requestId: string;
    config: Config;
    db: Database;
    deps: Deps;
    /** Set by `authenticate`; read only on routes behind it. */
    principal: Principal;
    /** Set by `hostGate` on a validated custom domain: the one project whose runs it serves. */
    customDomain: CustomDomainRoute | undefined;
  };
}
