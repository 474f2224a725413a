/**
 * Every error code a call can fail with, and the HTTP status it comes with: the service's codes
 * (its one table, `packages/core/src/http/errors.ts`), then the client's own, which have no
 * status of their own (`0`: no answer) or come with a `200` whose stream failed.
 *
 * | code | when |
 * | --- | --- |
 * | `network_error` | no answer: the connection failed, or broke while the body was read |
 * | `http_error` | an answer that is not the service's error format (a proxy's page, say); `status` is its status |
 * | `invalid_response` | a success whose body is not what the route answers (not JSON, not a stream) |
 * | `stream_error` | a stream's `error` chunk: the run failed after the stream began; `message` is its `errorText` |
 * | `stream_interrupted` | a stream that ended with neither `finish` nor `error` |
 *
 * A 404 answered `{ "detail": … }` (history, the stream, cancel and live-chat routes: an unknown
 * conversation, or another channel's) is `conversation_not_found`, with the text in `detail`.
 */
export const ERROR_CODES = {
  missing_api_key: 401,
  invalid_api_key: 401,
  signature_required: 401,
  invalid_signature: 401,
  signature_expired: 401,
  missing_tenant: 401,
  unauthorized: 401,
  environment_mismatch: 403,
  origin_not_allowed: 403,
  wrong_channel_type: 403,
  conversation_forbidden: 403,
  forbidden: 403,
  public_key_required: 403,
  conversation_not_found: 404,
  channel_not_found: 404,
  not_found: 404,
  method_not_allowed: 405,
  channel_inactive: 409,
  livechat_conflict: 409,
  idempotency_key_in_use: 409,
  channel_archived: 410,
  payload_too_large: 413,
  unsupported_media_type: 415,
  validation_error: 422,
  idempotency_key_reused: 422,
  bad_request: 400,
  invalid_idempotency_key: 400,
  request_timeout: 408,
  headers_too_large: 431,
  rate_limited: 429,
  too_many_streams: 429,
  runtime_error: 500,
  signing_secret_unavailable: 503,
  flow_unavailable: 503,
  jwks_unavailable: 503,
  conversation_busy: 503,
  service_draining: 503,
  network_error: 0,
  http_error: 0,
  invalid_response: 0,
  stream_error: 200,
  stream_interrupted: 200,
} as const;

/** A code of {@link ERROR_CODES}; a newer service may answer others, kept as they come. */
export type ChannelkitErrorCode = keyof typeof ERROR_CODES | (string & {});

/** What a {@link ChannelkitError} is made of. */
export interface ChannelkitErrorInit {
  status: number;
  code: ChannelkitErrorCode;
  message: string;
  detail?: string;
  details?: unknown;
  retryAfter?: number;
  headers?: Headers;
  cause?: unknown;
}

/**
 * A failed call: the service's answer (`status`, `code`, `message`, and `details` for a
 * `validation_error`), the `detail` of a `{ "detail" }` 404, or one of the client's own codes
 * (see {@link ERROR_CODES}).
 *
 * @example
 * try {
 *   await client.history(conversationId);
 * } catch (error) {
 *   if (error instanceof ChannelkitError && error.code === "conversation_not_found") console.log(error.detail);
 *   else throw error;
 * }
 */
export class ChannelkitError extends Error {
  /** The HTTP status; `0` when no answer came, `200` for a stream that failed once begun. */
  readonly status: number;
  /** The machine-readable code: the service's `error.code`, or the client's own. */
  readonly code: ChannelkitErrorCode;
  /** The text of a `{ "detail": … }` answer (history's 404), as sent. */
  readonly detail: string | undefined;
  /** The service's `error.details`, e.g. the failing fields of a `validation_error`. */
  readonly details: unknown;
  /** Seconds to wait before trying again, from `Retry-After` (a `429`, a `503`). */
  readonly retryAfter: number | undefined;
  /** The answer's headers, when there was an answer (`RateLimit`, `RateLimit-Policy`, ...). */
  readonly headers: Headers | undefined;

  constructor(init: ChannelkitErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = "ChannelkitError";
    this.status = init.status;
    this.code = init.code;
    this.detail = init.detail;
    this.details = init.details;
    this.retryAfter = init.retryAfter;
    this.headers = init.headers;
  }
}

/** True when `value` is a {@link ChannelkitError}, optionally with this `code`. */
export function isChannelkitError(value: unknown, code?: ChannelkitErrorCode): value is ChannelkitError {
  return value instanceof ChannelkitError && (code === undefined || value.code === code);
}

/** Seconds from a `Retry-After` value (delta seconds or an HTTP date), or undefined. */
export function retryAfterSeconds(headers: Headers): number | undefined {
  const value = headers.get("retry-after");
  if (value === null || value.trim() === "") return undefined;
  if (/^\s*\d+\s*$/.test(value)) return Number(value);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

/** The error an answer that is not a success stands for, its body read. */
export async function errorFromResponse(response: Response): Promise<ChannelkitError> {
  const { status, headers } = response;
  const base = { status, headers, retryAfter: retryAfterSeconds(headers) };
  let text = "";
  try {
    text = await response.text();
  } catch {
    // The body broke: the status still says what happened.
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const envelope = (body as { error?: { code?: unknown; message?: unknown; details?: unknown } } | undefined)?.error;
  if (envelope && typeof envelope.code === "string") {
    return new ChannelkitError({
      ...base,
      code: envelope.code,
      message: typeof envelope.message === "string" ? envelope.message : envelope.code,
      details: envelope.details,
    });
  }
  const detail = (body as { detail?: unknown } | undefined)?.detail;
  if (typeof detail === "string") {
    return new ChannelkitError({ ...base, code: status === 404 ? "conversation_not_found" : "http_error", message: detail, detail });
  }
  return new ChannelkitError({ ...base, code: "http_error", message: `HTTP ${status}${text ? `: ${text.slice(0, 200)}` : ""}` });
}
