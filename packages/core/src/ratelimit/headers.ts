import type { RateLimitRule } from "./rules.js";
import type { RateLimitCount } from "./store.js";

/** One limit a request was counted against, and what it left. */
export interface AppliedLimit {
  /** The policy's name in the headers, e.g. `publishable_key`. */
  policy: string;
  rule: RateLimitRule;
  count: RateLimitCount;
}

const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000));

/**
 * The IETF `RateLimit-Policy` and `RateLimit` fields (draft-ietf-httpapi-ratelimit-headers):
 * each limit a policy item, `q` requests per `w` seconds, `r` left for `t` more seconds;
 * with `Retry-After` when a limit refused the request.
 */
export function rateLimitHeaders(applied: readonly AppliedLimit[]): Record<string, string> {
  const headers: Record<string, string> = {
    "ratelimit-policy": applied.map(({ policy, rule }) => `"${policy}";q=${rule.requests};w=${rule.windowSeconds}`).join(", "),
    ratelimit: applied.map(({ policy, count }) => `"${policy}";r=${count.remaining};t=${seconds(count.resetMs)}`).join(", "),
  };
  const refused = applied.filter(({ count }) => !count.allowed);
  if (refused.length > 0) headers["retry-after"] = String(Math.max(...refused.map(({ count }) => seconds(count.resetMs))));
  return headers;
}
