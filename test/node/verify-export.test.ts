import { describe, expect, it } from "vitest";
// Through the package's `exports`, as a receiver's Node code imports it.
import { verifyWebhook } from "edge-gateway/verify";

// Signed with the openssl CLI, not with the code under test:
//   printf '%s' 'whd_test.1763726400.{"run_id":"run_x","result":{"ok":true}}' | openssl dgst -sha256 -hmac 'known-secret' -hex
const vector = {
  secret: "known-secret",
  body: '{"run_id":"run_x","result":{"ok":true}}',
  headers: {
    "x-request-id": "whd_test",
    "x-service-webhook-timestamp": "1763726400",
    "x-service-webhook-signature": "v1,f0586e79202a725e4ccba15cc395479cfcbb974f945476d22387fbbb08a501ee",
  },
  now: new Date(1763726400 * 1000 + 10_000),
};

describe("edge-gateway/verify in Node", () => {
  it("verifies a signature made by openssl", async () => {
    await expect(verifyWebhook(vector.secret, vector.headers, vector.body, { now: vector.now })).resolves.toEqual({
      id: "whd_test",
      timestamp: 1763726400,
    });
  });

  it("refuses the same body re-serialised", async () => {
    const spaced = JSON.stringify(JSON.parse(vector.body), null, 1);
    await expect(verifyWebhook(vector.secret, vector.headers, spaced, { now: vector.now })).rejects.toMatchObject({
      code: "signature_mismatch",
    });
  });
});
