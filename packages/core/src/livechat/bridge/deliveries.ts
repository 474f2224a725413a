import { type Logger, signRequestBody } from "../../plugin/api.js";

/** How the bridge retries a delivery. */
export interface RetryPolicy {
  /** Attempts in all, the first included. */
  attempts: number;
  /** Wait before the second attempt, in ms; doubled each time, with jitter. */
  initialDelayMs: number;
  /** Longest wait between two attempts, in ms (a `Retry-After` included). */
  maxDelayMs: number;
}

/** Where and how events are delivered. */
interface DeliveryOptions {
  url: string;
  secret: string;
  retry: RetryPolicy;
  timeoutMs: number;
  fetch: typeof fetch;
  logger: () => Logger;
}

/** The header that carries the bridge's signature, both ways. */
export const BRIDGE_SIGNATURE_HEADER = "x-channelkit-signature";

/** Answers worth another attempt: the receiver is busy, down or slow, not refusing the event. */
function retryable(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

/**
 * The bridge's outbound queue: one chain per conversation, so that a user's message never
 * overtakes its handover, conversations in parallel. Kept in memory: what is pending when
 * the process ends is lost (the receiver reads the transcript it missed at the next
 * handover, or through its own calls).
 */
export class Deliveries {
  readonly #options: DeliveryOptions;
  readonly #chains = new Map<string, Promise<void>>();

  constructor(options: DeliveryOptions) {
    this.#options = options;
  }

  /** Events not yet delivered or dropped, by conversation (for tests and health checks). */
  get pending(): number {
    return this.#chains.size;
  }

  /** Queues `event` after the conversation's earlier ones. */
  enqueue(conversationId: string, event: { id: string; type: string; [field: string]: unknown }): void {
    const body = JSON.stringify(event);
    const previous = this.#chains.get(conversationId) ?? Promise.resolve();
    const next = previous.then(() => this.#deliver(conversationId, event, body));
    this.#chains.set(conversationId, next);
    void next.finally(() => {
      if (this.#chains.get(conversationId) === next) this.#chains.delete(conversationId);
    });
  }

  async #deliver(conversationId: string, event: { id: string; type: string }, body: string): Promise<void> {
    const { retry } = this.#options;
    let reason = "";
    for (let attempt = 1; attempt <= retry.attempts; attempt++) {
      let wait = backoff(retry, attempt);
      try {
        const response = await this.#options.fetch(this.#options.url, {
          method: "POST",
          headers: { "content-type": "application/json", [BRIDGE_SIGNATURE_HEADER]: await signRequestBody(this.#options.secret, body) },
          body,
          signal: AbortSignal.timeout(this.#options.timeoutMs),
        });
        await response.body?.cancel().catch(() => undefined);
        if (response.ok) return;
        reason = `the receiver answered ${response.status}`;
        if (!retryable(response.status)) break;
        const after = retryAfterMs(response.headers.get("retry-after"));
        if (after !== null) wait = Math.min(retry.maxDelayMs, after);
      } catch (error) {
        reason =
          error instanceof Error && error.name === "TimeoutError" ? `no answer within ${this.#options.timeoutMs} ms` : "the receiver could not be reached";
      }
      if (attempt < retry.attempts) await sleep(wait);
    }
    this.#options.logger().warn(`channelkit: the live-chat bridge dropped the ${event.type} event ${event.id} of conversation ${conversationId}: ${reason}`);
  }
}

/** The wait after failed attempt `attempt` (from 1): doubling from the initial delay, capped, with up to half of it as jitter. */
function backoff(retry: RetryPolicy, attempt: number): number {
  const base = Math.min(retry.maxDelayMs, retry.initialDelayMs * 2 ** (attempt - 1));
  return Math.round(base / 2 + (Math.random() * base) / 2);
}

/** `Retry-After` in seconds (the HTTP date form is not used by help desks), as ms. */
function retryAfterMs(header: string | null): number | null {
  if (header === null || !/^\d+$/.test(header.trim())) return null;
  return Number(header.trim()) * 1000;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    (timer as { unref?: () => void }).unref?.();
  });
}
