import fc from "fast-check";
import { sign } from "hono/jwt";
import { describe, expect, it } from "vitest";
import { checkHostname } from "../../src/domains/hostname";
import { checkOutboundUrl } from "../../src/platform/url-policy";
import { signatureHeaders } from "../../src/webhooks/sign";
import { verifyWebhook, WebhookVerificationError } from "../../src/webhooks/verify";
import { client } from "../helpers";
import { seedRunnable } from "../runs";
import { TEST_SECRETS } from "../secrets";

/**
 * Properties of the parsers of outside input the management fuzz (management.fuzz.test.ts) does not reach:
 * the SSRF policy of webhook targets and origins, custom domain names, run JWTs, webhook signature headers
 * and run bodies. Each oracle below is written from the rules (the docs, the RFCs), not from the code.
 */
const strict = { allowInsecure: false };
const RUNS = { numRuns: 300 };

// ---- IPv4: one address, every spelling the WHATWG URL parser accepts ----------------------------------

/** CIDRs no webhook may reach (RFC 6890 special-purpose registry, multicast, reserved, broadcast). */
const BLOCKED_V4: [number, number][] = [
  [0x00000000, 8],
  [0x0a000000, 8],
  [0x64400000, 10],
  [0x7f000000, 8],
  [0xa9fe0000, 16],
  [0xac100000, 12],
  [0xc0000000, 24],
  [0xc0000200, 24],
  [0xc0586300, 24],
  [0xc0a80000, 16],
  [0xc6120000, 15],
  [0xc6336400, 24],
  [0xcb007100, 24],
  [0xe0000000, 4],
  [0xf0000000, 4],
];
/** Ranges that are ordinary public unicast. */
const PUBLIC_V4: [number, number][] = [
  [0x01010100, 24],
  [0x08000000, 8],
  [0x5db8d800, 24],
  [0x68100000, 12],
  [0x97650000, 16],
  [0xd8000000, 8],
];

const inCidr = (base: number, bits: number) =>
  fc.integer({ min: 0, max: 2 ** (32 - bits) - 1 }).map((offset) => (base + offset) >>> 0);
const fromCidrs = (cidrs: [number, number][]) => fc.oneof(...cidrs.map(([base, bits]) => inCidr(base, bits)));

/** A number in decimal, in hex (`0x`, any case, leading zeros) or in octal (leading `0`). */
const numberSpelling = (n: number) =>
  fc.oneof(
    fc.constant(String(n)),
    fc.tuple(fc.boolean(), fc.nat(2), fc.boolean()).map(([upperX, zeros, upper]) => {
      const hex = "0".repeat(zeros) + n.toString(16);
      return `0${upperX ? "X" : "x"}${upper ? hex.toUpperCase() : hex}`;
    }),
    fc.nat(2).map((zeros) => `0${"0".repeat(zeros)}${n.toString(8)}`),
  );

/** 1 to 4 parts, the last part holding all remaining bytes (`127.1`, `0x7f.0.1`, `2130706433`). */
const v4Spelling = (value: number) =>
  fc.tuple(fc.integer({ min: 1, max: 4 }), fc.boolean()).chain(([parts, trailingDot]) => {
    const bytes = [value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255];
    const lead = bytes.slice(0, parts - 1);
    const last = bytes.slice(parts - 1).reduce((acc, b) => acc * 256 + b, 0);
    return fc
      .tuple(...[...lead, last].map(numberSpelling))
      .map((spelled) => spelled.join(".") + (trailingDot ? "." : ""));
  });

// ---- IPv6: groups, compression, case, leading zeros, an embedded dotted IPv4 tail ----------------------

const v6Spelling = (groups: number[]) =>
  fc.tuple(fc.boolean(), fc.boolean(), fc.boolean(), fc.boolean()).map(([compress, upper, pad, dottedTail]) => {
    let parts = groups.map((g) => (pad ? g.toString(16).padStart(4, "0") : g.toString(16)));
    if (dottedTail)
      parts = [...parts.slice(0, 6), `${groups[6]! >> 8}.${groups[6]! & 255}.${groups[7]! >> 8}.${groups[7]! & 255}`];
    let text = parts.join(":");
    if (compress) {
      // Replace the longest run of zero groups (among the first six when a dotted tail is used) by `::`.
      const limit = dottedTail ? 6 : 8;
      let best = [-1, 0];
      for (let i = 0; i < limit; i++) {
        let j = i;
        while (j < limit && groups[j] === 0) j++;
        if (j - i > best[1]!) best = [i, j - i];
      }
      if (best[1]! >= 2) text = `${parts.slice(0, best[0]).join(":")}::${parts.slice(best[0]! + best[1]!).join(":")}`;
    }
    return upper ? text.toUpperCase() : text;
  });

const group = fc.integer({ min: 0, max: 0xffff });
const groups = (prefix: number[], rest = 8 - prefix.length) =>
  fc.array(group, { minLength: rest, maxLength: rest }).map((tail) => [...prefix, ...tail]);
const withV4 = (prefix: number[], v4: fc.Arbitrary<number>) => v4.map((v) => [...prefix, v >>> 16, v & 0xffff]);
const anyV4 = fc.integer({ min: 0, max: 0xffffffff });

/** IPv6 targets no webhook may reach, each named for the failure message. */
const BLOCKED_V6: [string, fc.Arbitrary<number[]>][] = [
  ["IPv4-mapped ::ffff:0:0/96 (of a public address too)", withV4([0, 0, 0, 0, 0, 0xffff], anyV4)],
  ["IPv4-compatible ::/96", withV4([0, 0, 0, 0, 0, 0], anyV4)],
  ["NAT64 64:ff9b::/96", withV4([0x64, 0xff9b, 0, 0, 0, 0], anyV4)],
  ["local NAT64 64:ff9b:1::/48", groups([0x64, 0xff9b, 1])],
  ["6to4 2002::/16", groups([0x2002])],
  ["Teredo and IETF 2001::/23", fc.integer({ min: 0, max: 0x1ff }).chain((g1) => groups([0x2001, g1]))],
  ["documentation 2001:db8::/32", groups([0x2001, 0xdb8])],
  ["documentation 3fff::/20", fc.integer({ min: 0, max: 0xfff }).chain((g1) => groups([0x3fff, g1]))],
  ["unique local fc00::/7", fc.integer({ min: 0xfc00, max: 0xfdff }).chain((g0) => groups([g0]))],
  ["link-local fe80::/10", fc.integer({ min: 0xfe80, max: 0xfebf }).chain((g0) => groups([g0]))],
  ["multicast ff00::/8", fc.integer({ min: 0xff00, max: 0xffff }).chain((g0) => groups([g0]))],
  ["loopback and unspecified", fc.constantFrom([0, 0, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0, 0, 0])],
];

describe("property: webhookEndpoint / origin_url policy against every IP spelling", () => {
  it("refuses every spelling of every address in a blocked IPv4 range", () => {
    fc.assert(
      fc.property(fromCidrs(BLOCKED_V4).chain(v4Spelling), (host) => {
        const check = checkOutboundUrl(`https://${host}/hook`, strict);
        expect(check.ok, host).toBe(false);
      }),
      { numRuns: 2000 },
    );
  });

  it("accepts every spelling of a public IPv4 address, and all spellings land on the same address", () => {
    fc.assert(
      fc.property(
        fromCidrs(PUBLIC_V4).chain((v) => fc.tuple(fc.constant(v), v4Spelling(v))),
        ([value, host]) => {
          const check = checkOutboundUrl(`https://${host}/hook`, strict);
          expect(check.ok, host).toBe(true);
          if (check.ok)
            expect(check.url.hostname).toBe(
              [value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255].join("."),
            );
        },
      ),
      { numRuns: 1000 },
    );
  });

  it.each(BLOCKED_V6)("refuses every spelling of %s", (_name, arbitrary) => {
    fc.assert(
      fc.property(arbitrary.chain(v6Spelling), (host) => {
        expect(checkOutboundUrl(`https://[${host}]/hook`, strict).ok, host).toBe(false);
      }),
      RUNS,
    );
  });

  it("accepts global unicast IPv6 outside the special blocks (2400::/6 here)", () => {
    fc.assert(
      fc.property(
        fc
          .integer({ min: 0x2400, max: 0x27ff })
          .chain((g0) => groups([g0]))
          .chain(v6Spelling),
        (host) => {
          expect(checkOutboundUrl(`https://[${host}]/hook`, strict).ok, host).toBe(true);
        },
      ),
      RUNS,
    );
  });

  it("refuses any IPv6 literal with a zone id, and keeps refusing private ranges when insecure targets are allowed", () => {
    fc.assert(
      fc.property(
        fc.oneof(...BLOCKED_V6.map(([, a]) => a)).chain(v6Spelling),
        fc.stringMatching(/^[a-z0-9]{1,8}$/),
        (host, zone) => {
          expect(checkOutboundUrl(`https://[${host}%25${zone}]/`, strict).ok).toBe(false);
          expect(checkOutboundUrl(`http://[${host}%${zone}]/`, { allowInsecure: true }).ok).toBe(false);
        },
      ),
      RUNS,
    );
    fc.assert(
      fc.property(fromCidrs(BLOCKED_V4.filter(([base]) => base !== 0x7f000000)).chain(v4Spelling), (host) => {
        expect(checkOutboundUrl(`http://${host}/`, { allowInsecure: true }).ok, host).toBe(false);
      }),
      RUNS,
    );
  });

  it("refuses a host name with any empty label: every blocked address with extra dots, and names like a..b", () => {
    const dots = fc.constantFrom("..", "...", "....");
    fc.assert(
      fc.property(fromCidrs(BLOCKED_V4).chain(v4Spelling), dots, (host, extra) => {
        expect(checkOutboundUrl(`https://${host.replace(/\.$/, "")}${extra}/hook`, strict).ok, host + extra).toBe(
          false,
        );
        expect(
          checkOutboundUrl(`http://${host.replace(/\.$/, "")}${extra}/hook`, { allowInsecure: true }).ok,
          host + extra,
        ).toBe(false);
      }),
      RUNS,
    );
    fc.assert(
      fc.property(fc.domain(), fc.nat(), dots, (domain, at, extra) => {
        const labels = domain.split(".");
        const cut = at % labels.length;
        const host = [...labels.slice(0, cut), "", ...labels.slice(cut)].join(".");
        expect(checkOutboundUrl(`https://${host}/`, strict).ok, host).toBe(false);
        expect(checkOutboundUrl(`https://${domain}${extra}/`, strict).ok, domain + extra).toBe(false);
        expect(checkOutboundUrl(`https://${domain}./`, strict).ok, `${domain}.`).toBe(true);
      }),
      RUNS,
    );
    expect(checkOutboundUrl("https://10.0.0.1../", strict)).toEqual({
      ok: false,
      reason: "must not have an empty label in its host name",
    });
  });

  it("never throws, and whatever it accepts is https, has no user info and names a public host", () => {
    const anything = fc.oneof(
      fc.string(),
      fc.webUrl({ withFragments: true, withQueryParameters: true }),
      fc
        .tuple(
          fc.constantFrom(
            "https://",
            "http://",
            "HTTPS://",
            "https:",
            "https:/",
            "//",
            "https://user@",
            "https://a:b@",
          ),
          fc.string(),
          fc.constantFrom("", "/", ":443/", ".", "./x"),
        )
        .map((p) => p.join("")),
    );
    fc.assert(
      fc.property(anything, (raw) => {
        const check = checkOutboundUrl(raw, strict);
        if (!check.ok) return;
        expect(check.url.protocol).toBe("https:");
        expect(check.url.username + check.url.password).toBe("");
        const host = check.url.hostname.replace(/\.$/, "");
        expect(host).toContain(".");
        if (!host.startsWith("[")) expect(host.split(".")).not.toContain("");
        expect(host === "localhost" || host.endsWith(".localhost")).toBe(false);
      }),
      { numRuns: 2000 },
    );
  });
});

// ---- Custom domain names --------------------------------------------------------------------------------

const rules = { serviceDomain: "service.test", apiHostnames: new Set(["localhost", "127.0.0.1", "api.service.test"]) };
const LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

const label = fc.stringMatching(/^[a-z0-9](?:[a-z0-9-]{0,10}[a-z0-9])?$/);
const domainLike = fc.oneof(
  fc.domain(),
  fc.array(label, { minLength: 1, maxLength: 5 }).map((labels) => labels.join(".")),
  fc
    .tuple(fc.domain(), fc.constantFrom(".", "..", " ", "*.", ".service.test", "-", "_", "%2e", "\u3002", "\u00e9"))
    .map(([d, extra]) => `${extra}${d}${extra}`),
  fc.string(),
  fc.string({ unit: "grapheme" }),
);

describe("property: custom domain names", () => {
  it("never throws; an accepted name is normalised, valid by RFC 1035 rules, registrable and not the service's", () => {
    fc.assert(
      fc.property(domainLike, (input) => {
        const check = checkHostname(input, rules);
        if (!check.ok) {
          expect(check.reason.length).toBeGreaterThan(0);
          return;
        }
        const { hostname } = check;
        expect(hostname).toBe(hostname.toLowerCase());
        expect(hostname.length).toBeLessThanOrEqual(253);
        const labels = hostname.split(".");
        expect(labels.length).toBeGreaterThanOrEqual(2);
        for (const l of labels) expect(l).toMatch(LABEL);
        expect(hostname === "service.test" || hostname.endsWith(".service.test")).toBe(false);
        expect(/^\d+(\.\d+){3}$/.test(hostname)).toBe(false);
        expect(hostname === check.registrableDomain || hostname.endsWith(`.${check.registrableDomain}`)).toBe(true);
        // Normal form is a fixed point: checking it again gives the same answer.
        expect(checkHostname(hostname, rules)).toEqual(check);
      }),
      { numRuns: 3000 },
    );
  });

  it("refuses every spelling of an IPv4 address and every IPv6 literal", () => {
    fc.assert(
      fc.property(anyV4.chain(v4Spelling), (host) => {
        expect(checkHostname(host, rules).ok, host).toBe(false);
      }),
      { numRuns: 1000 },
    );
    fc.assert(
      fc.property(groups([]).chain(v6Spelling), fc.boolean(), (host, bracketed) => {
        expect(checkHostname(bracketed ? `[${host}]` : host, rules).ok, host).toBe(false);
      }),
      RUNS,
    );
  });

  it("refuses wildcards and the service's own names in any case, with or without a trailing dot", () => {
    fc.assert(
      fc.property(
        fc.domain(),
        fc.constantFrom("service.test", "SERVICE.test", "api.service.test.", "Service.Test."),
        (d, own) => {
          expect(checkHostname(`*.${d}`, rules).ok).toBe(false);
          expect(checkHostname(`${d.split(".")[0]}.${own}`, rules).ok).toBe(false);
        },
      ),
      RUNS,
    );
  });

  it("answers the create route with 201 exactly when the rules accept the name, and never a 500", async () => {
    const api = client();
    const seed = await seedRunnable(api);
    await fc.assert(
      fc.asyncProperty(domainLike, async (input) => {
        const res = await api.call(`/v2/projects/${seed.projectId}/domains`, {
          method: "POST",
          token: seed.token,
          body: { domain: input, region: "us-east-1" },
        });
        expect(res.status, await res.clone().text()).toBeLessThan(500);
        const check = checkHostname(input, rules);
        if (res.status === 201) expect(check.ok, input).toBe(true);
        if (!check.ok) expect(res.status, input).toBe(400);
      }),
      { numRuns: 150 },
    );
    // 150 requests, each accepted one also writing its audit entry: about 3 s alone, more on a busy machine.
  }, 15_000);
});

// ---- Run keys: JWTs ---------------------------------------------------------------------------------------

const b64url = (text: string) => btoa(text).replace(/=+$/, "").replace(/\+/g, "-").replace(/\//g, "_");
const OTHER_KEY = "another-secret-0123456789abcdefghijklmnop";

describe("property: run JWTs are accepted only when HS256, signed with JWT_SECRET, unexpired and of the project", () => {
  it("decides every variation as the rules say, and the upstream is called only for an accepted key", async () => {
    let upstreamCalls = 0;
    const api = client({ outbound: { fetch: (r) => (upstreamCalls++, fetch(r)) } });
    const app = await seedRunnable(api);
    const other = await seedRunnable(api);
    const now = Math.floor(api.clock.now().getTime() / 1000);
    const variation = fc.record({
      alg: fc.constantFrom("HS256", "HS256", "HS384", "HS512", "none", "None", "RS256", "ES256", "hs256"),
      key: fc.constantFrom(TEST_SECRETS.JWT_SECRET, OTHER_KEY),
      project: fc.constantFrom("own", "other", "missing", "number"),
      exp: fc.oneof(
        fc.integer({ min: -100_000, max: 100_000 }).map((d) => now + d),
        fc.constant(undefined),
        fc.constant("soon"),
      ),
      tamper: fc.constantFrom("none", "none", "payload", "signature", "strip-signature"),
    });
    await fc.assert(
      fc.asyncProperty(variation, async (v) => {
        const payload: Record<string, unknown> = {};
        if (v.project === "own") payload.project_id = app.projectId;
        if (v.project === "other") payload.project_id = other.projectId;
        if (v.project === "number") payload.project_id = 42;
        if (v.exp !== undefined) payload.exp = v.exp;
        let token: string;
        if (["HS256", "HS384", "HS512"].includes(v.alg)) token = await sign(payload, v.key, v.alg as "HS256");
        else
          token = `${b64url(JSON.stringify({ alg: v.alg, typ: "JWT" }))}.${b64url(JSON.stringify(payload))}.${v.alg.startsWith("n") || v.alg.startsWith("N") ? "" : "c2lnbmF0dXJl"}`;
        const [h, p, s] = token.split(".") as [string, string, string];
        if (v.tamper === "payload")
          token = `${h}.${b64url(JSON.stringify({ ...payload, project_id: app.projectId, exp: now + 600, admin: true }))}.${s}`;
        if (v.tamper === "signature") token = `${h}.${p}.${s.slice(0, -2)}${s.endsWith("AA") ? "AB" : "AA"}`;
        if (v.tamper === "strip-signature") token = `${h}.${p}.`;

        const valid =
          v.alg === "HS256" &&
          v.key === TEST_SECRETS.JWT_SECRET &&
          v.tamper === "none" &&
          typeof v.exp === "number" &&
          v.exp > now;
        const before = upstreamCalls;
        const res = await api.call(app.runPath, { method: "POST", token, body: { inputs: {} } });
        await res.body?.cancel();
        if (valid && v.project === "own") expect(res.status).toBe(200);
        else if (valid && v.project === "other") expect(res.status).toBe(404);
        else expect(res.status, JSON.stringify(v)).toBe(401);
        expect(upstreamCalls - before).toBe(valid && v.project === "own" ? 1 : 0);
      }),
      { numRuns: 250 },
    );
  });

  it("answers garbage bearer values of any shape with 401, never a 500", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const segment = fc.string({ unit: "binary-ascii", maxLength: 40 }).map((s) => s.replace(/[\r\n\0]/g, ""));
    const garbage = fc.oneof(
      fc.tuple(segment, segment, segment).map((parts) => parts.join(".")),
      fc.tuple(fc.base64String(), fc.base64String(), fc.base64String()).map((parts) => parts.join(".")),
      fc.tuple(fc.json(), fc.json()).map(([a, b]) => `${b64url(a)}.${b64url(b)}.${b64url(a)}`),
      segment.map((s) => `egsa_${s}`),
      segment,
    );
    await fc.assert(
      fc.asyncProperty(garbage, async (token) => {
        const res = await api.call(app.runPath, { token: null, headers: { Authorization: `Bearer ${token}` } });
        await res.body?.cancel();
        expect(res.status, token).toBe(401);
        expect(res.headers.get("www-authenticate")).toMatch(/^Bearer /);
      }),
      RUNS,
    );
  });
});

// ---- Webhook signature headers (the exported verifier) ----------------------------------------------------

describe("property: verifyWebhook accepts only the exact signature of the exact bytes", () => {
  it("throws only WebhookVerificationError on any headers, and accepts only a correct signature", async () => {
    const now = new Date("2026-11-21T12:00:00Z");
    const ts = Math.floor(now.getTime() / 1000);
    const secret = "whsec_fuzz-secret";
    const body = '{"run_id":"run_1","result":{"ok":true}}';
    const good = await signatureHeaders(secret, "whd_1", ts, body);
    const header = fc.oneof(
      fc.string(),
      fc.constant(undefined),
      fc.stringMatching(/^v1,[0-9a-f]{0,70}$/),
      fc.constant(good["X-Service-Webhook-Signature"]!),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          "X-Request-Id": fc.oneof(fc.constant("whd_1"), fc.string()),
          "X-Service-Webhook-Timestamp": fc.oneof(
            fc.constant(String(ts)),
            fc.integer({ min: ts - 1000, max: ts + 1000 }).map(String),
            fc.string(),
            fc.constant("1e9"),
            fc.constant(" 1"),
          ),
          "X-Service-Webhook-Signature": header,
        }),
        fc.oneof(fc.constant(body), fc.string()),
        async (headers, raw) => {
          const source = Object.fromEntries(Object.entries(headers).filter(([, v]) => v !== undefined)) as Record<
            string,
            string
          >;
          try {
            await verifyWebhook(secret, source, raw, { now });
          } catch (error) {
            expect(error).toBeInstanceOf(WebhookVerificationError);
            return;
          }
          // Accepted: it must be the signature we would have made for exactly these inputs.
          const expected = await signatureHeaders(
            secret,
            source["X-Request-Id"]!,
            Number(source["X-Service-Webhook-Timestamp"]),
            raw,
          );
          expect(source["X-Service-Webhook-Signature"]!.split(" ")).toContain(expected["X-Service-Webhook-Signature"]);
          expect(Math.abs(Number(source["X-Service-Webhook-Timestamp"]) - ts)).toBeLessThanOrEqual(300);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it("refuses any single-byte change of the body, the id, the timestamp or the signature", async () => {
    const now = new Date("2026-11-21T12:00:00Z");
    const ts = Math.floor(now.getTime() / 1000);
    await fc.assert(
      fc.asyncProperty(
        fc.string({ minLength: 1 }),
        fc.json(),
        fc.nat(),
        fc.constantFrom("body", "id", "timestamp", "signature"),
        async (secret, body, at, part) => {
          const headers = await signatureHeaders(secret, "whd_fuzz", ts, body);
          await expect(verifyWebhook(secret, headers, body, { now })).resolves.toEqual({
            id: "whd_fuzz",
            timestamp: ts,
          });
          const flip = (text: string) => {
            const i = at % text.length;
            const c = text[i] === "0" ? "1" : "0";
            return text.slice(0, i) + c + text.slice(i + 1);
          };
          const changed = { ...headers };
          let changedBody = body;
          if (part === "body") changedBody = flip(body);
          if (part === "id") changed["X-Request-Id"] = flip("whd_fuzz");
          if (part === "timestamp") changed["X-Service-Webhook-Timestamp"] = String(ts - 1 - (at % 200));
          if (part === "signature")
            changed["X-Service-Webhook-Signature"] = `v1,${flip(headers["X-Service-Webhook-Signature"]!.slice(3))}`;
          if (changedBody === body && part === "body") return;
          await expect(verifyWebhook(secret, changed, changedBody, { now })).rejects.toBeInstanceOf(
            WebhookVerificationError,
          );
        },
      ),
      { numRuns: 500 },
    );
  });
});

// ---- Run bodies ---------------------------------------------------------------------------------------------

describe("property: run bodies", () => {
  it("passes any JSON object through byte for byte, and refuses anything else with 400 or 415, never a 500", async () => {
    const api = client();
    const app = await seedRunnable(api);
    const body = fc.oneof(
      fc.dictionary(fc.string(), fc.jsonValue()).map((o) => ({ raw: JSON.stringify(o), object: true })),
      fc.record({ inputs: fc.jsonValue() }).map((o) => ({ raw: JSON.stringify(o), object: true })),
      fc
        .jsonValue()
        .filter((v) => typeof v !== "object" || v === null || Array.isArray(v))
        .map((v) => ({ raw: JSON.stringify(v), object: false })),
      fc.string().map((raw) => ({ raw, object: false })),
      fc.string().map((s) => ({ raw: `{"a":${s}`, object: false })),
    );
    const contentType = fc.constantFrom(
      "application/json",
      "application/json; charset=utf-8",
      "text/plain",
      "application/x-www-form-urlencoded",
      "",
    );
    await fc.assert(
      fc.asyncProperty(body, contentType, async ({ raw, object }, type) => {
        const headers: Record<string, string> = type ? { "Content-Type": type } : {};
        const res = await api.call(app.runPath, { method: "POST", token: app.token, rawBody: raw, headers });
        const text = await res.text();
        expect(res.status, text).toBeLessThan(500);
        let parsedObject = object;
        if (!object) {
          try {
            const v = JSON.parse(raw) as unknown;
            parsedObject = typeof v === "object" && v !== null && !Array.isArray(v);
          } catch {
            parsedObject = false;
          }
        }
        if (raw === "") {
          // No body at all is a run without arguments.
          expect(res.status).toBe(200);
          return;
        }
        if (res.status === 200) {
          expect(parsedObject).toBe(true);
          // The echo upstream reports the body it received: the caller's bytes, untouched.
          expect((JSON.parse(text) as { result: { body: string } }).result.body).toBe(raw);
        } else {
          expect([400, 415]).toContain(res.status);
          expect(res.headers.get("content-type")).toBe("application/problem+json");
        }
        if (parsedObject && type.startsWith("application/json")) expect(res.status).toBe(200);
      }),
      { numRuns: 200 },
    );
  });

  it("answers a deeply nested body (a parser bomb) without a 500", async () => {
    const api = client();
    const app = await seedRunnable(api);
    for (const depth of [1_000, 100_000, 1_000_000]) {
      const raw = `{"a":${"[".repeat(depth)}${"]".repeat(depth)}}`;
      const res = await api.call(app.runPath, {
        method: "POST",
        token: app.token,
        rawBody: raw,
        headers: { "Content-Type": "application/json" },
      });
      await res.body?.cancel();
      expect([200, 400, 413], String(depth)).toContain(res.status);
    }
    const managed = await api.call("/v2/projects", {
      method: "POST",
      rawBody: `{"name":${"[".repeat(30_000)}${"]".repeat(30_000)}}`,
      headers: { "Content-Type": "application/json" },
    });
    expect(managed.status).toBe(400);
  });
});
