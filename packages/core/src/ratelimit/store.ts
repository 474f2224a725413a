import RateLimiterMemory from "rate-limiter-flexible/lib/RateLimiterMemory.js";
import type { RateLimitRule } from "./rules.js";

/** What a store answers for one request counted. */
export interface RateLimitCount {
  /** False when the request is over the limit. */
  allowed: boolean;
  /** Requests left in the current window. */
  remaining: number;
  /** Milliseconds until the window ends and the count starts again. */
  resetMs: number;
}

/**
 * Where the counts of the rate limits live. In memory for one process; in the database (the
 * storage's own, see `@channelkit/kysely`) or a Redis when several instances must share them.
 * Build one on any rate-limiter-flexible limiter with {@link flexibleRateLimitStore}.
 */
export interface RateLimitStore {
  /** Counts one request of `key` under `rule`; `name` keeps the counts of different limits apart. */
  consume(name: string, rule: RateLimitRule, key: string): Promise<RateLimitCount>;
  /** Stops the store's timers; the service calls it on `close()`. */
  close?(): void | Promise<void>;
}

/** What {@link flexibleRateLimitStore} passes to make a limiter: rate-limiter-flexible's own options. */
export interface FlexibleLimiterOptions {
  points: number;
  duration: number;
  keyPrefix: string;
}

/** The part of a rate-limiter-flexible limiter a store uses. */
export interface FlexibleLimiter {
  consume(key: string, points?: number): Promise<{ remainingPoints: number; msBeforeNext: number }>;
}

/** A rate-limiter-flexible `RateLimiterRes`: what `consume` rejects with when over the limit. */
function isOverLimit(value: unknown): value is { remainingPoints: number; msBeforeNext: number } {
  return typeof value === "object" && value !== null && !(value instanceof Error) && "msBeforeNext" in value;
}

/**
 * A {@link RateLimitStore} on rate-limiter-flexible: `make` builds its limiter for one rule
 * (one per rule and name, kept), e.g. a `RateLimiterRedis` for a Redis the host names.
 * A store that fails (a limiter rejecting with an `Error`) fails the request: give the
 * limiter an `insuranceLimiter` to count in memory meanwhile.
 *
 * @example
 * import { RateLimiterRedis } from "rate-limiter-flexible";
 * const store = flexibleRateLimitStore((options) => new RateLimiterRedis({ ...options, storeClient: redis }));
 * await createChannelService({ storage, flows, rateLimits: { store } });
 */
export function flexibleRateLimitStore(make: (options: FlexibleLimiterOptions) => FlexibleLimiter, close?: () => void | Promise<void>): RateLimitStore {
  const limiters = new Map<string, FlexibleLimiter>();
  const store: RateLimitStore = {
    async consume(name, rule, key) {
      const id = `${name}:${rule.requests}:${rule.windowSeconds}`;
      let limiter = limiters.get(id);
      if (limiter === undefined) {
        limiter = make({ points: rule.requests, duration: rule.windowSeconds, keyPrefix: `ck:${id}` });
        limiters.set(id, limiter);
      }
      try {
        const result = await limiter.consume(key);
        return { allowed: true, remaining: result.remainingPoints, resetMs: result.msBeforeNext };
      } catch (error) {
        if (!isOverLimit(error)) throw error;
        return { allowed: false, remaining: 0, resetMs: error.msBeforeNext };
      }
    },
  };
  if (close) store.close = close;
  return store;
}

/** Counts in this process's memory: the default where the storage offers no store of its own. */
export function memoryRateLimitStore(): RateLimitStore {
  return flexibleRateLimitStore((options) => new RateLimiterMemory(options));
}
