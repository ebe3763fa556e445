import { decode, encode, type Packet, RECURSION_DESIRED } from "@dnsquery/dns-packet";

import { isTimeout } from "../platform/http";
import type { DnsAnswer, DnsRecord, DnsResolver, QueryType } from "../platform/outside";

export type { DnsAnswer, DnsRecord, DnsResolver, QueryType };

/** The resolver could not give an answer this time (timeout, SERVFAIL, garbage): transient by nature. */
export class ResolverError extends Error {
  override name = "ResolverError";
}

export const canonicalName = (name: string) => name.toLowerCase().replace(/\.$/, "");

const MAX_RESPONSE_BYTES = 65_535;

const isCaa = (data: unknown): data is { flags?: number; tag: string; value: string } =>
  typeof data === "object" &&
  data !== null &&
  typeof (data as { tag?: unknown }).tag === "string" &&
  typeof (data as { value?: unknown }).value === "string";

function recordData(data: unknown): string {
  if (typeof data === "string") return canonicalName(data);
  if (isCaa(data)) return `${data.flags ?? 0} ${data.tag.toLowerCase()} "${data.value}"`;
  if (data instanceof Uint8Array) return `${data.byteLength} bytes`;
  if (Array.isArray(data))
    return data.map((part) => (part instanceof Uint8Array ? new TextDecoder().decode(part) : String(part))).join("");
  return JSON.stringify(data) ?? "";
}

/**
 * RFC 8484 DNS over HTTPS, wire format, POST. Message id 0 (RFC 8484 section 4.1, cache friendly).
 * Every way a response can be unusable becomes a ResolverError that says what happened.
 */
export class DohResolver implements DnsResolver {
  constructor(
    private readonly url: string,
    private readonly timeoutMs = 5_000,
    private readonly fetcher: typeof fetch = (input, init) => fetch(input, init),
  ) {}

  async resolve(name: string, type: QueryType): Promise<DnsAnswer> {
    const query = encode({ type: "query", id: 0, flags: RECURSION_DESIRED, questions: [{ type, name, class: "IN" }] });
    let response: Response;
    try {
      response = await this.fetcher(this.url, {
        method: "POST",
        headers: { "Content-Type": "application/dns-message", Accept: "application/dns-message" },
        body: query,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (error) {
      const timedOut = isTimeout(error);
      throw new ResolverError(
        timedOut
          ? `the resolver did not answer within ${this.timeoutMs} ms`
          : `the resolver could not be reached (${String(error)})`,
      );
    }
    if (response.status !== 200) {
      await response.body?.cancel();
      throw new ResolverError(`the resolver answered HTTP ${response.status}`);
    }
    const contentType = response.headers.get("content-type") ?? "";
    if (!/^application\/dns-message\s*(;|$)/i.test(contentType)) {
      await response.body?.cancel();
      throw new ResolverError(`the resolver answered ${contentType || "no content type"}, not application/dns-message`);
    }
    const body = new Uint8Array(await response.arrayBuffer());
    if (body.byteLength > MAX_RESPONSE_BYTES)
      throw new ResolverError("the resolver's answer is larger than a DNS message can be");
    let packet: Packet;
    try {
      packet = decode(body);
    } catch {
      throw new ResolverError("the resolver's answer is not a valid DNS message");
    }
    return toAnswer(packet, name, type);
  }
}

/** Checks that a decoded message answers our question, and keeps what validation needs. */
export function toAnswer(packet: Packet, name: string, type: QueryType): DnsAnswer {
  const question = packet.questions?.[0];
  if (
    packet.type !== "response" ||
    !question ||
    canonicalName(question.name) !== canonicalName(name) ||
    question.type !== type
  ) {
    throw new ResolverError("the resolver's answer does not match the question");
  }
  const rcode = String(packet.rcode ?? "NOERROR");
  if (rcode !== "NOERROR" && rcode !== "NXDOMAIN") throw new ResolverError(`the resolver answered ${rcode}`);
  if (packet.flag_tc) throw new ResolverError("the resolver's answer was truncated");
  const records = (packet.answers ?? []).map((record) => ({
    name: canonicalName(record.name),
    type: String(record.type),
    ttl: record.ttl ?? 0,
    data: recordData(record.data),
  }));
  return { rcode, records };
}
