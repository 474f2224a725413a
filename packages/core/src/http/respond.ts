import { utf8 } from "../auth/encoding.js";
import { ERROR_CODES, type ErrorCode, ServiceError } from "./errors.js";

/**
 * A JSON response. Its length is known, and said (`content-length`), so that an adapter can
 * send it in one write instead of chunked.
 */
export function json(body: unknown, status = 200, headers?: HeadersInit): Response {
  const bytes = utf8(JSON.stringify(body));
  const response = new Response(bytes, {
    status,
    headers: { "content-type": "application/json; charset=utf-8", "content-length": String(bytes.byteLength) },
  });
  if (headers) for (const [name, value] of new Headers(headers)) response.headers.set(name, value);
  return response;
}

/** The contract's error envelope: `{ error: { code, message } }`, plus `details` for validation. */
export function errorBody(code: ErrorCode, message: string = ERROR_CODES[code].message, details?: unknown) {
  return { error: details === undefined ? { code, message } : { code, message, details } };
}

/** The enveloped response for a {@link ServiceError}. */
export function errorResponse(error: ServiceError): Response {
  return json(errorBody(error.code, error.message, error.details), error.status, error.headers);
}
