import { ChannelkitError, errorFromResponse } from "./errors.js";
import { backoffMs, type RetryPolicy, sleep } from "./retry.js";
import { signatureHeader } from "./sign.js";

/** One request, as the client's methods describe it. */
export interface Call {
  method: "GET" | "POST" | "PATCH";
  /** The route's path, its segments already encoded. */
  path: string;
  query?: Record<string, string | number | undefined>;
  /** Sent as JSON. */
  body?: unknown;
  /** `Authorization` (`Bearer …`), when the route takes one. */
  authorization?: string | undefined;
  /** `X-Tenant-ID`, for the admin routes. */
  tenantId?: string;
  /** The signing secret to sign the body with, if any. */
  signingSecret?: string | undefined;
  /**
   * The request's `Idempotency-Key` (execute, stream, the webhook's `newMessage`): the same on
   * each attempt, which makes the request safe to send again, so it is retried like a `GET`.
   */
  idempotencyKey?: string | undefined;
  accept: "application/json" | "text/event-stream";
  headers?: Record<string, string> | undefined;
  signal?: AbortSignal | undefined;
}

/** What every request of one client shares. */
export interface Transport {
  baseUrl: string;
  fetch: typeof fetch;
  retry: RetryPolicy;
  headers: Record<string, string>;
}

const encoder = new TextEncoder();

/**
 * Sends `call` and answers the response when its status is a success (2xx); throws a
 * {@link ChannelkitError} otherwise. The JSON body is encoded once, and those exact bytes are
 * signed and sent. A `GET`, or a request with an `Idempotency-Key`, is sent again after a 429, a
 * 503 or a failure to connect (and a keyed one after a `409 idempotency_key_in_use`, its first
 * attempt still running); anything else only when the retry policy is `unsafe` (see
 * `RetryOptions`). An abort throws the signal's reason, as `fetch` does.
 */
export async function send(transport: Transport, call: Call): Promise<Response> {
  const url = new URL(transport.baseUrl + call.path);
  for (const [name, value] of Object.entries(call.query ?? {})) if (value !== undefined) url.searchParams.set(name, String(value));
  const bytes = call.body === undefined ? undefined : encoder.encode(JSON.stringify(call.body));
  const policy = transport.retry;
  const keyed = call.idempotencyKey !== undefined;
  const retries = call.method === "GET" || keyed || policy.unsafe ? policy.maxRetries : 0;
  for (let attempt = 0; ; attempt++) {
    const headers: Record<string, string> = { accept: call.accept, ...transport.headers, ...call.headers };
    if (call.authorization !== undefined) headers.authorization = call.authorization;
    if (call.tenantId !== undefined) headers["x-tenant-id"] = call.tenantId;
    if (keyed) headers["idempotency-key"] = call.idempotencyKey as string;
    if (bytes) {
      headers["content-type"] = "application/json";
      // Signed again on each attempt: the timestamp is the sending's.
      if (call.signingSecret) headers["x-service-signature"] = await signatureHeader(call.signingSecret, bytes);
    }
    let response: Response;
    try {
      response = await transport.fetch(url.href, { method: call.method, headers, body: bytes, signal: call.signal });
    } catch (error) {
      if (call.signal?.aborted) throw call.signal.reason;
      if (attempt < retries) {
        await sleep(backoffMs(policy, attempt), call.signal);
        continue;
      }
      throw new ChannelkitError({
        status: 0,
        code: "network_error",
        message: `The request to ${url.pathname} failed: ${(error as Error)?.message ?? error}`,
        cause: error,
      });
    }
    if (response.ok) return response;
    const error = await errorFromResponse(response);
    const again =
      attempt < retries &&
      (error.status === 429 ||
        // A 503 of the service's own configuration does not pass by waiting.
        (error.status === 503 && error.code !== "signing_secret_unavailable" && error.code !== "flow_unavailable") ||
        // An attempt the service received and still runs: its answer comes to a later one.
        (keyed && error.code === "idempotency_key_in_use")) &&
      (error.retryAfter === undefined || error.retryAfter * 1000 <= policy.maxDelayMs);
    if (!again) throw error;
    await sleep(error.retryAfter === undefined ? backoffMs(policy, attempt) : error.retryAfter * 1000, call.signal);
  }
}

/** The JSON body of a success. */
export async function json<T>(response: Response): Promise<T> {
  try {
    return (await response.json()) as T;
  } catch (error) {
    throw new ChannelkitError({
      status: response.status,
      code: "invalid_response",
      message: `The answer of ${new URL(response.url || "http://x").pathname} is not JSON.`,
      headers: response.headers,
      cause: error,
    });
  }
}

/** Throws `invalid_response` unless the answer is an event stream. */
export function expectEventStream(response: Response): void {
  if (!(response.headers.get("content-type") ?? "").includes("text/event-stream")) {
    response.body?.cancel().catch(() => {});
    throw new ChannelkitError({
      status: response.status,
      code: "invalid_response",
      message: "The answer is not an event stream.",
      headers: response.headers,
    });
  }
}

/** A path segment, encoded. */
export const segment = (value: string): string => encodeURIComponent(value);
