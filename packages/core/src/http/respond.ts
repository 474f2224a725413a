import { ERROR_CODES, type ErrorCode, ServiceError } from "./errors.js";

const JSON_HEADERS = { "content-type": "application/json; charset=utf-8" } as const;

/** A JSON response. */
export function json(body: unknown, status = 200, headers?: HeadersInit): Response {
  const response = new Response(JSON.stringify(body), { status, headers: JSON_HEADERS });
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
