/**
 * The interfaces of the outside services the gateway reaches through `Deps`. They live on the ground
 * floor so that `Deps` (and everything that carries it) needs nothing from a capability folder; the
 * implementations live with the capability that uses them (`domains/dns.ts`, `domains/certificates.ts`)
 * and are wired at the root (`src/deps.ts`).
 */

export type QueryType = "A" | "AAAA" | "CNAME" | "ANY" | "TXT" | "CAA";

/** One resource record of an answer section; names lower case without the trailing dot. */
export interface DnsRecord {
  name: string;
  type: string;
  ttl: number;
  /**
   * Addresses and names for A, AAAA, CNAME; a TXT record's strings joined; a CAA record in its zone
   * file form `flags tag "value"`; text for the rest (for messages only).
   */
  data: string;
}

/** A response the resolver gave: NOERROR (with or without data) or NXDOMAIN. Anything else throws. */
export interface DnsAnswer {
  rcode: "NOERROR" | "NXDOMAIN";
  records: DnsRecord[];
}

/** DNS over HTTPS (RFC 8484) for custom domain validation. */
export interface DnsResolver {
  resolve(name: string, type: QueryType): Promise<DnsAnswer>;
}

export interface Challenge {
  /** Under `/.well-known/acme-challenge/` or `/.well-known/pki-validation/`. */
  path: string;
  body: string;
}

export interface CertificateState {
  /** The provider's id of the certificate (or custom hostname). */
  ref: string;
  status: "pending" | "active" | "failed";
  /** An HTTP token the issuer will fetch from the hostname, which the gateway then serves. */
  challenge: Challenge | null;
  detail: string | null;
}

/** Issues, reads back and removes certificates for validated custom domains. */
export interface CertificateProvider {
  readonly name: string;
  provision(hostname: string): Promise<CertificateState>;
  status(ref: string): Promise<CertificateState>;
  /** Idempotent: removing what is already gone succeeds. */
  remove(ref: string): Promise<void>;
}

/** Requests to the outside world on a customer's behalf: apps and webhook receivers. */
export interface Outbound {
  fetch(request: Request): Promise<Response>;
}
