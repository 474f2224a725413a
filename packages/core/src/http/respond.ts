import { type AnyErrorCode, ERROR_CODES, type ErrorCode, type ServiceError } from "./errors.js";
import { type Reply, toResponse } from "./reply.js";

/** A JSON reply. Its body is one string, so an adapter sends it in one write with its length. */
export function json(body: unknown, status = 200, headers?: Record<string, string>): Reply {
  return {
    status,
    headers: headers ? { ...headers, "content-type": JSON_TYPE } : { "content-type": JSON_TYPE },
    body: JSON.stringify(body),
  };
}

/** {@link json} as a Web `Response`, for routes of the public plugin shape. */
export function jsonResponse(body: unknown, status = 200): Response {
  return toResponse(json(body, status));
}

const JSON_TYPE = "application/json; charset=utf-8";

/** The contract's error envelope: `{ error: { code, message } }`, plus `details` for validation. */
function errorBody(code: AnyErrorCode, message: string = ERROR_CODES[code as ErrorCode].message, details?: unknown) {
  return { error: details === undefined ? { code, message } : { code, message, details } };
}

/** The envelope of an error code, as JSON text: what an adapter answers for a request it could not hand to the service. */
export function errorEnvelope(code: ErrorCode): string {
  return JSON.stringify(errorBody(code));
}

/** The enveloped reply for a {@link ServiceError}. */
export function errorReply(error: ServiceError): Reply {
  return json(errorBody(error.code, error.message, error.details), error.status, error.headers);
}
