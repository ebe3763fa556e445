import { z } from "zod";
import type { CertificateProvider, CertificateState, Challenge } from "../platform/outside";

export type { CertificateProvider, CertificateState, Challenge };

/** The provider could not be asked, or refused: the domain keeps its certificate state and is retried. */
export class CertificateError extends Error {
  override name = "CertificateError";
}

/**
 * For local development and installations that terminate TLS elsewhere: the certificate is "active"
 * as soon as it is asked for, and there is nothing to remove.
 */
export class LocalCertificates implements CertificateProvider {
  readonly name = "local";
  async provision(hostname: string): Promise<CertificateState> {
    return { ref: `local:${hostname}`, status: "active", challenge: null, detail: null };
  }
  async status(ref: string): Promise<CertificateState> {
    return { ref, status: "active", challenge: null, detail: null };
  }
  async remove(): Promise<void> {}
}

export const CLOUDFLARE_API_BASE = "https://api.cloudflare.com/client/v4";
// https://developers.cloudflare.com/api/ "Duplicate custom hostname found."
const DUPLICATE_HOSTNAME = 1406;
const FAILED_SSL = new Set([
  "validation_timed_out",
  "issuance_timed_out",
  "deleted",
  "expired",
  "deactivating",
  "inactive",
]);

const Envelope = z.object({
  success: z.boolean(),
  errors: z.array(z.object({ code: z.number(), message: z.string() }).loose()).default([]),
  result: z.unknown(),
});

const HttpToken = z.object({ http_url: z.string(), http_body: z.string() }).loose();
const CustomHostname = z
  .object({
    id: z.string(),
    hostname: z.string(),
    ssl: z
      .object({
        status: z.string(),
        http_url: z.string().optional(),
        http_body: z.string().optional(),
        validation_records: z
          .array(z.object({ http_url: z.string().optional(), http_body: z.string().optional() }).loose())
          .optional(),
        validation_errors: z.array(z.object({ message: z.string() }).loose()).optional(),
      })
      .loose()
      .optional(),
  })
  .loose();
type CustomHostname = z.infer<typeof CustomHostname>;

function challengeOf(ssl: CustomHostname["ssl"]): Challenge | null {
  const token = [ssl, ...(ssl?.validation_records ?? [])]
    .map((t) => HttpToken.safeParse(t))
    .find((t) => t.success)?.data;
  if (!token) return null;
  try {
    const path = new URL(token.http_url).pathname;
    return /^\/\.well-known\/(acme-challenge|pki-validation)\/[^/]+$/.test(path)
      ? { path, body: token.http_body }
      : null;
  } catch {
    return null;
  }
}

function stateOf(host: CustomHostname): CertificateState {
  const ssl = host.ssl;
  const sslStatus = ssl?.status ?? "initializing";
  const status = sslStatus === "active" ? "active" : FAILED_SSL.has(sslStatus) ? "failed" : "pending";
  const errors = ssl?.validation_errors?.map((e) => e.message) ?? [];
  return {
    ref: host.id,
    status,
    challenge: status === "pending" ? challengeOf(ssl) : null,
    detail: errors.length ? errors.join("; ") : status === "active" ? null : `Cloudflare reports ${sslStatus}`,
  };
}

export interface CloudflareOptions {
  apiToken: string;
  zoneId: string;
  baseUrl?: string;
  timeoutMs?: number;
  /** `ssl.certificate_authority`; CAA checks (src/domains/caa.ts) assume the same one. */
  certificateAuthority?: string;
}

/**
 * Cloudflare for SaaS custom hostnames: `POST /zones/{zone_id}/custom_hostnames` with HTTP DCV,
 * read back with GET until `ssl.status` is `active`, `DELETE` on removal.
 */
export class CloudflareCustomHostnames implements CertificateProvider {
  readonly name = "cloudflare";
  readonly #base: string;

  constructor(private readonly options: CloudflareOptions) {
    this.#base = (options.baseUrl ?? CLOUDFLARE_API_BASE).replace(/\/+$/, "");
  }

  async #call(
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; success: boolean; codes: number[]; result: unknown; message: string }> {
    let response: Response;
    try {
      response = await fetch(`${this.#base}/zones/${encodeURIComponent(this.options.zoneId)}${path}`, {
        method,
        headers: {
          Authorization: `Bearer ${this.options.apiToken}`,
          "Content-Type": "application/json",
          Accept: "application/json",
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.options.timeoutMs ?? 10_000),
      });
    } catch (error) {
      throw new CertificateError(`the Cloudflare API could not be reached (${String(error)})`);
    }
    const text = await response.text();
    let parsed;
    try {
      parsed = Envelope.safeParse(JSON.parse(text));
    } catch {
      parsed = undefined;
    }
    if (!parsed?.success)
      throw new CertificateError(`the Cloudflare API answered HTTP ${response.status} without its JSON envelope`);
    const { success, errors, result } = parsed.data;
    const message = errors.map((e) => `${e.code} ${e.message}`).join("; ") || `HTTP ${response.status}`;
    return {
      status: response.status,
      success: success && response.ok,
      codes: errors.map((e) => e.code),
      result,
      message,
    };
  }

  #hostname(result: unknown): CustomHostname {
    const host = CustomHostname.safeParse(result);
    if (!host.success)
      throw new CertificateError("the Cloudflare API answered with a custom hostname of an unexpected shape");
    return host.data;
  }

  async provision(hostname: string): Promise<CertificateState> {
    const created = await this.#call("POST", "/custom_hostnames", {
      hostname,
      ssl: {
        method: "http",
        type: "dv",
        ...(this.options.certificateAuthority ? { certificate_authority: this.options.certificateAuthority } : {}),
      },
    });
    if (created.success) return stateOf(this.#hostname(created.result));
    // Created before (a retry after a lost answer, or a re-added domain): adopt the existing one.
    if (created.codes.includes(DUPLICATE_HOSTNAME) || created.status === 409) {
      const found = await this.#call("GET", `/custom_hostnames?hostname=${encodeURIComponent(hostname)}`);
      const existing =
        found.success && Array.isArray(found.result)
          ? found.result.map((r) => this.#hostname(r)).find((h) => h.hostname === hostname)
          : undefined;
      if (existing) return stateOf(existing);
    }
    throw new CertificateError(`Cloudflare refused the custom hostname: ${created.message}`);
  }

  async status(ref: string): Promise<CertificateState> {
    const read = await this.#call("GET", `/custom_hostnames/${encodeURIComponent(ref)}`);
    if (!read.success) throw new CertificateError(`Cloudflare could not read custom hostname ${ref}: ${read.message}`);
    return stateOf(this.#hostname(read.result));
  }

  async remove(ref: string): Promise<void> {
    const removed = await this.#call("DELETE", `/custom_hostnames/${encodeURIComponent(ref)}`);
    if (removed.success || removed.status === 404) return;
    throw new CertificateError(`Cloudflare could not delete custom hostname ${ref}: ${removed.message}`);
  }
}
