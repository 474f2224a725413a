/**
 * Every error the service can answer with, in one table: the code is the machine-readable
 * contract, the status and message follow from it. Handlers throw `ServiceError(code)` and
 * never pick a status themselves.
 */
export const ERROR_CODES = {
  missing_api_key: { status: 401, message: "Missing API key: send 'Authorization: Bearer <API_KEY>'." },
  invalid_api_key: { status: 401, message: "The API key is invalid, revoked or expired." },
  signature_required: { status: 401, message: "This channel requires an X-Service-Signature header." },
  invalid_signature: { status: 401, message: "The X-Service-Signature header is malformed or does not match the body." },
  signature_expired: { status: 401, message: "The signature timestamp is outside the 300-second tolerance." },
  missing_tenant: { status: 401, message: "Missing X-Tenant-ID header." },
  unauthorized: { status: 401, message: "Missing or invalid admin token." },
  environment_mismatch: { status: 403, message: "The API key's environment does not match the channel's environment." },
  origin_not_allowed: { status: 403, message: "This Origin is not in the channel's allowed origins." },
  wrong_channel_type: { status: 403, message: "This key belongs to a channel that is not of the API type." },
  conversation_forbidden: { status: 403, message: "This conversation belongs to another channel." },
  forbidden: { status: 403, message: "The admin token does not grant access to this tenant." },
  public_key_required: { status: 403, message: "The widget routes take a publishable key (svc_pub_), never a server key." },
  conversation_not_found: { status: 404, message: "No conversation exists with this id." },
  channel_not_found: { status: 404, message: "No channel exists with this id." },
  not_found: { status: 404, message: "No route matches this path." },
  method_not_allowed: { status: 405, message: "This method is not allowed on this path." },
  channel_inactive: { status: 409, message: "The channel is inactive." },
  run_in_progress: {
    status: 409,
    message: "A run of this conversation is in flight: wait for it to end (or cancel it), then send this again.",
  },
  sweep_in_progress: { status: 409, message: "A retention sweep is running on another instance: send this again once it has ended." },
  livechat_conflict: { status: 409, message: "The conversation's live chat is not in a mode that allows this." },
  idempotency_key_in_use: {
    status: 409,
    message: "A request with this Idempotency-Key is still running: send it again after the time in the Retry-After header to get its answer.",
  },
  channel_archived: { status: 410, message: "The channel is archived." },
  payload_too_large: { status: 413, message: "The request body is too large." },
  unsupported_media_type: { status: 415, message: "The body must be sent as 'Content-Type: application/json'." },
  validation_error: { status: 422, message: "The request is invalid." },
  idempotency_key_reused: {
    status: 422,
    message: "This Idempotency-Key was sent with another body within the last 24 hours: use a new key for a new request.",
  },
  bad_request: { status: 400, message: "The request is malformed: it is not valid HTTP." },
  invalid_idempotency_key: {
    status: 400,
    message: "The Idempotency-Key header must be 1 to 255 visible ASCII characters (no spaces or control characters), e.g. a UUID.",
  },
  request_timeout: { status: 408, message: "The request did not arrive in time." },
  headers_too_large: { status: 431, message: "The request's headers are too large." },
  rate_limited: { status: 429, message: "Too many requests: retry after the time in the Retry-After header." },
  too_many_streams: {
    status: 429,
    message: "Too many streams are open at once for this key or client address: close one, then retry after the time in the Retry-After header.",
  },
  runtime_error: { status: 500, message: "An unexpected error occurred in the service." },
  signing_secret_unavailable: { status: 503, message: "A signature is required but no signing secret is configured for this channel." },
  channel_settings_unavailable: {
    status: 503,
    message: "The channel's secret settings cannot be opened with the configured master key (CHANNELKIT_SECRET_KEY).",
  },
  jwks_unavailable: { status: 503, message: "The key set that verifies admin tokens cannot be fetched; try again shortly." },
  flow_unavailable: { status: 503, message: "The flow this channel is bound to is not registered by this service." },
  conversation_busy: {
    status: 503,
    message:
      "The conversation was busy: this message waited for its turn longer than the service allows, and nothing was stored or run; send it again after the time in the Retry-After header.",
  },
  service_draining: {
    status: 503,
    message: "This server is shutting down and takes no new request: nothing was run; send it again after the time in the Retry-After header.",
  },
} as const satisfies Record<string, { status: number; message: string }>;

/** A machine-readable error code of the contract. */
export type ErrorCode = keyof typeof ERROR_CODES;

/** A code of the table: one of the contract's, or one a plugin declared (`ChannelPlugin.errorCodes`). */
export type AnyErrorCode = ErrorCode | (string & {});

/** The codes plugins added, process-wide: a code means one thing wherever it is thrown. */
const pluginCodes = new Map<string, { status: number; message: string; plugin: string }>();

/** The status and message of a code of the table, or undefined for a code nobody declared. */
export function errorDefinition(code: string): { status: number; message: string } | undefined {
  return Object.hasOwn(ERROR_CODES, code) ? ERROR_CODES[code as ErrorCode] : pluginCodes.get(code);
}

/**
 * Adds a plugin's codes to the table. A code of the contract, or one another plugin declared
 * otherwise, is refused: a client must be able to branch on a code alone.
 */
export function registerErrorCodes(plugin: string, codes: Readonly<Record<string, { status: number; message: string }>>): void {
  for (const [code, { status, message }] of Object.entries(codes)) {
    if (!/^[a-z][a-z0-9_]*$/.test(code))
      throw new TypeError(`channelkit: plugin "${plugin}" declares the error code "${code}": use lower case letters, digits and _`);
    if (!(Number.isInteger(status) && status >= 400 && status <= 599)) {
      throw new TypeError(`channelkit: plugin "${plugin}" declares the error code "${code}" with status ${status}: an error's status is 400 to 599`);
    }
    if (Object.hasOwn(ERROR_CODES, code)) throw new TypeError(`channelkit: plugin "${plugin}" declares the error code "${code}", which is channelkit's own`);
    const known = pluginCodes.get(code);
    if (known && (known.status !== status || known.message !== message)) {
      throw new TypeError(`channelkit: plugins "${known.plugin}" and "${plugin}" both declare the error code "${code}", differently`);
    }
    pluginCodes.set(code, { status, message, plugin });
  }
}

/**
 * An expected failure of a request, carried as a value up to the router, which turns it
 * into the `{ error: { code, message } }` envelope with the status of the code table.
 */
export class ServiceError extends Error {
  readonly code: AnyErrorCode;
  readonly status: number;
  /** Machine-readable detail, e.g. the failing fields of a `validation_error`. */
  readonly details: unknown;
  /** Extra response headers, e.g. `Allow` on a 405. */
  readonly headers: Record<string, string> | undefined;

  constructor(code: AnyErrorCode, message?: string, options?: { cause?: unknown; details?: unknown; headers?: Record<string, string> }) {
    // An expected refusal is a value, not a fault: no stack trace is captured (see
    // docs/benchmarks.md, "Why the code looks like this"). A failure of the service keeps its
    // own stack in `cause`.
    const definition = errorDefinition(code);
    if (definition === undefined) throw new TypeError(`channelkit: no error code "${code}" in the table: declare it in a plugin's errorCodes`);
    // `stackTraceLimit` is V8's; elsewhere setting it is harmless.
    const v8 = Error as { stackTraceLimit?: number };
    const stackTraceLimit = v8.stackTraceLimit;
    v8.stackTraceLimit = 0;
    try {
      super(message ?? definition.message, options?.cause === undefined ? undefined : { cause: options.cause });
    } finally {
      v8.stackTraceLimit = stackTraceLimit;
    }
    this.name = "ServiceError";
    this.code = code;
    this.status = definition.status;
    this.details = options?.details;
    this.headers = options?.headers;
  }
}

/** True when `value` is a {@link ServiceError}. */
export function isServiceError(value: unknown): value is ServiceError {
  return value instanceof ServiceError;
}
