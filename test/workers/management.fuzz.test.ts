import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { generateToken, isWellFormedToken } from "../../src/auth/tokens";
import { decodeCursor, encodeCursor } from "../../src/platform/pagination";
import { client, seedBuild, seedProject } from "../helpers";

const api = client();
const RUNS = { numRuns: 150 };

/** Never a 5xx, and always problem+json when not 2xx. */
async function expectHandled(response: Response) {
  expect(response.status, await response.clone().text()).toBeLessThan(500);
  if (response.status >= 400) expect(response.headers.get("content-type")).toBe("application/problem+json");
}

describe("property: outside input never causes a 500", () => {
  it("Authorization headers of any shape get 200 or 401, never more", async () => {
    const { projectId } = await seedProject(api);
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.string(),
          fc.string().map((s) => `Bearer ${s}`),
          fc.constant(generateToken()),
        ),
        async (header) => {
          const response = await api.call(`/v2/projects/${projectId}`, {
            token: null,
            headers: { Authorization: header.replace(/[\r\n\0]/g, "") },
          });
          await expectHandled(response);
          expect(response.status).toBe(401);
        },
      ),
      RUNS,
    );
  });

  it("any JSON body to any write route is either accepted as valid or refused with 400", async () => {
    const seed = await seedProject(api);
    const build = await seedBuild(api, seed);
    const routes = [
      ["POST", "/v2/projects"],
      ["POST", `/v2/projects/${seed.projectId}/service-accounts`],
      ["POST", `/v2/projects/${seed.projectId}/apps`],
      ["PATCH", `/v2/projects/${seed.projectId}/apps/${seed.appId}/builds/${build}`],
    ] as const;
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...routes), fc.jsonValue(), async ([method, path], body) => {
        const response = await api.call(path, { method, body });
        await expectHandled(response);
        expect([200, 201, 400, 409]).toContain(response.status);
      }),
      RUNS,
    );
  });

  it("raw bytes as a JSON body are refused with 400, never a 500", async () => {
    await fc.assert(
      fc.asyncProperty(fc.string(), async (raw) => {
        const response = await api.call("/v2/projects", {
          method: "POST",
          rawBody: raw,
          headers: { "Content-Type": "application/json" },
        });
        await expectHandled(response);
      }),
      RUNS,
    );
  });

  it("path ids and query strings of any shape get 4xx, never a 500", async () => {
    const seed = await seedProject(api);
    const segment = fc.string({ minLength: 1, maxLength: 80 }).map(encodeURIComponent);
    await fc.assert(
      fc.asyncProperty(segment, segment, fc.string(), async (a, b, query) => {
        for (const path of [
          `/v2/projects/${a}`,
          `/v2/projects/${seed.projectId}/apps/${a}`,
          `/v2/projects/${seed.projectId}/apps/${seed.appId}/builds/${b}`,
          `/v2/projects?cursor=${encodeURIComponent(query)}&limit=${encodeURIComponent(b)}`,
        ]) {
          await expectHandled(await api.call(path, { token: seed.token }));
        }
      }),
      { numRuns: 60 },
    );
  });
});

describe("property: parsers accept only what they should", () => {
  it("a token is well-formed only if the gateway generated it (checksum)", () => {
    fc.assert(
      fc.property(fc.string(), (s) => {
        expect(isWellFormedToken(s)).toBe(false);
        expect(isWellFormedToken(`egsa_${s}`)).toBe(false);
      }),
    );
    for (let i = 0; i < 50; i++) expect(isWellFormedToken(generateToken())).toBe(true);
  });

  it("cursors round-trip, and anything else is refused", () => {
    fc.assert(
      fc.property(fc.string(), (key) => {
        expect(decodeCursor(encodeCursor(key))).toBe(key);
      }),
    );
    fc.assert(
      fc.property(fc.string(), (junk) => {
        let decoded: string | undefined;
        try {
          decoded = decodeCursor(junk);
        } catch (error) {
          expect((error as { code?: string }).code).toBe("validation_failed");
          return;
        }
        // Only a string that is itself a valid cursor may decode.
        expect(encodeCursor(decoded!)).toBe(junk.replace(/=+$/, ""));
      }),
    );
  });
});
