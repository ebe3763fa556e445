/**
 * For receivers: checks a delivery's `X-Service-Webhook-Signature`. The code is the receivers' package
 * `packages/verify` (`@edge-gateway/verify`: plain ESM JavaScript with types, no dependencies), so
 * what the gateway's tests prove here is exactly what receivers install.
 */
export { verifyWebhook, WebhookVerificationError } from "../../packages/verify/index.js";
export type { HeaderSource, RawBody, VerifyOptions, WebhookErrorCode } from "../../packages/verify/index.js";
