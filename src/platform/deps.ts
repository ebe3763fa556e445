import type { Config } from "./env";
import type { CertificateProvider, DnsResolver, Outbound } from "./outside";

/**
 * What the Worker reaches the outside world and the clock through. The root wires the real ones
 * (`src/deps.ts`); tests and local development pass others to `createWorker` instead of branching on
 * the environment.
 */
export interface Deps {
  now(): Date;
  /** Waits `ms` (the pause between webhook attempts); tests pass one that moves a fake clock instead. */
  sleep(ms: number): Promise<void>;
  /** Requests to the outside world on a customer's behalf: apps and webhook receivers. */
  outbound: Outbound;
  /** DNS over HTTPS (RFC 8484) for custom domain validation. */
  resolver(config: Config): DnsResolver;
  /** Certificates of custom domains: Cloudflare for SaaS when configured, local otherwise. */
  certificates(config: Config): CertificateProvider;
}
