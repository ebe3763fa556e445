import { ApiError } from "../platform/errors";

/** The `WWW-Authenticate` challenge of every 401 (RFC 6750). */
export const REALM = 'Bearer realm="edge-gateway"';

/**
 * A detail as an `error_description`: RFC 6750 allows only printable ASCII but `"` and a backslash in it, and a
 * header value outside ASCII is not a header every client reads (the problem body keeps the full text).
 */
export const quoted = (detail: string) =>
  detail
    .replace(/"/g, "'")
    .replace(/\\/g, "/")
    .replace(/[^\x20-\x7e]/g, "?");

/** A 401 for a credential that was sent but is not good: malformed, unknown, revoked or expired. */
export const invalidToken = (detail: string) =>
  new ApiError("invalid_token", detail, {
    headers: { "WWW-Authenticate": `${REALM}, error="invalid_token", error_description="${quoted(detail)}"` },
  });

/** A 401 for an `Authorization` header that is not `Bearer <token>`. */
export const invalidRequest = (detail: string) =>
  new ApiError("invalid_token", detail, {
    headers: { "WWW-Authenticate": `${REALM}, error="invalid_request", error_description="${quoted(detail)}"` },
  });

/** A 401 for absent credentials: RFC 6750 section 3 puts no error attribute in that challenge. */
export const credentialsMissing = (detail: string) =>
  new ApiError("unauthorized", detail, { headers: { "WWW-Authenticate": REALM } });

/** The token of an `Authorization: Bearer` header; a 401 that says what is wrong otherwise. */
export function bearerToken(header: string | null | undefined): string {
  if (!header) throw credentialsMissing("Send the token as `Authorization: Bearer <token>`.");
  const match = /^Bearer[ \t]+([\x21-\x7e]+)[ \t]*$/i.exec(header);
  if (!match) throw invalidRequest("The Authorization header must be `Bearer <token>`.");
  return match[1]!;
}
