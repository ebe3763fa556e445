import { env } from "cloudflare:workers";
import { CloudflareCustomHostnames } from "../src/domains/certificates";
import { type DnsAnswer, type DnsRecord, type DnsResolver, DohResolver, type QueryType } from "../src/domains/dns";
import type { Client } from "./helpers";
import { TEST_CLOUDFLARE } from "./secrets";

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Cloudflare {
    interface Env {
      /** Base URL of test/global/fakes.mjs. */
      TEST_FAKES_URL: string;
      /** DoH URL and control URL of the private harness of test/global/dns-zones.mjs. */
      TEST_ZONES_DOH_URL: string;
      TEST_ZONES_URL: string;
    }
  }
}

export const TARGET = "proxy.aws.us-east-1.service.test";
export const TARGET_ADDRESSES = ["192.0.2.10", "192.0.2.11", "2001:db8::10"];

/** The Cloudflare for SaaS client, pointed at the local fake. */
export const fakeCloudflare = () =>
  new CloudflareCustomHostnames({ ...TEST_CLOUDFLARE, baseUrl: `${env.TEST_FAKES_URL}/client/v4` });

export async function cloudflareCalls(): Promise<string[]> {
  return (await fetch(`${env.TEST_FAKES_URL}/__log`)).json();
}

let counter = 0;
/** A label no other test uses (D1 is shared by the tests of a file). */
export const uniqueLabel = (prefix = "t") => `${prefix}-${Date.now().toString(36)}-${(counter++).toString(36)}`;

type Zone = Record<string, Partial<Record<QueryType, DnsAnswer | Error>>>;

export const rr = (name: string, type: string, data: string, ttl = 300): DnsRecord => ({ name, type, data, ttl });
export const noerror = (...records: DnsRecord[]): DnsAnswer => ({ rcode: "NOERROR", records });
export const nxdomain: DnsAnswer = { rcode: "NXDOMAIN", records: [] };

/** A resolver answering from a table of crafted answers; anything not in it is NXDOMAIN. */
export function craftedResolver(zone: Zone): DnsResolver & { queries: string[] } {
  const queries: string[] = [];
  return {
    queries,
    async resolve(name, type) {
      queries.push(`${name} ${type}`);
      const answer = zone[name]?.[type];
      if (answer instanceof Error) throw answer;
      return answer ?? nxdomain;
    },
  };
}

/** The target's addresses as the crafted resolver serves them. */
export const targetZone: Zone = {
  [TARGET]: {
    A: noerror(rr(TARGET, "A", "192.0.2.10"), rr(TARGET, "A", "192.0.2.11")),
    AAAA: noerror(rr(TARGET, "AAAA", "2001:db8::10")),
  },
};

export async function addDomain(
  api: Client,
  seed: { projectId: string; token: string },
  domain: string,
  region = "us-east-1",
) {
  return api.json<Record<string, unknown> & { status: string; last_error: { code: string; message: string } | null }>(
    `/v2/projects/${seed.projectId}/domains`,
    { method: "POST", token: seed.token, body: { domain, region } },
  );
}

export async function validate(api: Client, seed: { projectId: string; token: string }, domain: string) {
  return api.json<Record<string, unknown> & { status: string; last_error: { code: string; message: string } | null }>(
    `/v2/projects/${seed.projectId}/domains/${encodeURIComponent(domain)}/validate`,
    { method: "POST", token: seed.token },
  );
}

/** The zone tests write into the private DNS harness (test/global/dns-zones.mjs). */
export const ZONE = "zones.test";

/** A resolver on the private harness, through the service's own DoH client. */
export const zonesResolver = () => new DohResolver(env.TEST_ZONES_DOH_URL);

/** Sets (or with no records, removes) a name's records in the private harness; knot serves them on return. */
export async function setRecords(
  name: string,
  ...records: { type: "A" | "AAAA" | "CNAME" | "TXT" | "CAA"; data: string }[]
) {
  const response = await fetch(
    `${env.TEST_ZONES_URL}/names/${name}`,
    records.length ? { method: "PUT", body: JSON.stringify(records) } : { method: "DELETE" },
  );
  if (!response.ok) throw new Error(`setRecords ${name}: ${response.status} ${await response.text()}`);
}

/** The CNAME our instructions give, as a zone file writes it. */
export const pointsHere = { type: "CNAME", data: `${TARGET}.` } as const;
export const txt = (value: string) => ({ type: "TXT", data: `"${value}"` }) as const;
export const caa = (data: string) => ({ type: "CAA", data }) as const;
