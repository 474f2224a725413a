/**
 * When the client sends a request again: the `retry` option of `createClient`, or `false` for
 * never.
 *
 * A `GET` is sent again after a `429` or a `503` (waiting what `Retry-After` says, else an
 * exponential backoff from `baseDelayMs`) and after a failure to connect, at most `maxRetries`
 * times. So are execute, stream and the webhook's `newMessage`, which carry an
 * `Idempotency-Key` (the same on each attempt): the service runs the flow once per key and
 * answers a retry with the first answer; they are also sent again after a `409
 * idempotency_key_in_use` (an earlier attempt still runs). Every other request (the webhook's
 * `startConversation`, the widget's chat, the cancel routes, the admin calls, and execute,
 * stream and `newMessage` with `idempotencyKeys: false`) runs something or changes something, and
 * its body has left by the time any answer comes, so it is never sent twice unless `unsafe` is
 * true.
 */
export interface RetryOptions {
  /** How many times a request is sent again, at most (default 2). */
  maxRetries?: number;
  /** The first backoff when the answer has no `Retry-After`, doubled each time, with jitter (default 500 ms). */
  baseDelayMs?: number;
  /**
   * The longest wait before one retry (default 30,000 ms). A `Retry-After` longer than this is
   * not waited for: the error is thrown at once, with its `retryAfter`.
   */
  maxDelayMs?: number;
  /**
   * Also send again the requests that are neither `GET`s nor keyed (default false). channelkit
   * answers a `429` before it reads the body and before anything runs, so a `429` is safe to
   * retry; a `503` from a proxy or a connection lost may come after the service ran the request,
   * which then runs twice. Turn it on when a duplicate run is harmless to you.
   */
  unsafe?: boolean;
}

/** {@link RetryOptions} with every default filled in. */
export type RetryPolicy = Required<RetryOptions>;

/** The policy of `retry`: `false` is no retry at all. */
export function retryPolicy(retry: RetryOptions | false | undefined): RetryPolicy {
  if (retry === false) return { maxRetries: 0, baseDelayMs: 0, maxDelayMs: 0, unsafe: false };
  return {
    maxRetries: retry?.maxRetries ?? 2,
    baseDelayMs: retry?.baseDelayMs ?? 500,
    maxDelayMs: retry?.maxDelayMs ?? 30_000,
    unsafe: retry?.unsafe ?? false,
  };
}

/** The backoff before retry `attempt` (0 for the first): `base * 2^attempt`, between half and all of it, capped. */
export function backoffMs(policy: RetryPolicy, attempt: number): number {
  const full = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** attempt);
  return full / 2 + Math.random() * (full / 2);
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    function onAbort() {
      clearTimeout(timer);
      reject(signal?.reason);
    }
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
