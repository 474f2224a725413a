import { isServiceError, ServiceError } from "../http/errors.js";
import type { ChannelRecord, KeyWithChannel } from "../storage/types.js";
import { clientAddress } from "./address.js";
import { type AppliedLimit, rateLimitHeaders } from "./headers.js";
import type { CHANNEL_LIMITS, RateLimitSetting, ServiceRateLimits } from "./rules.js";
import type { RateLimitCount, RateLimitStore } from "./store.js";

/** What the limiter reads of a request. */
interface LimitedRequest {
  readonly headers: { get(name: string): string | null };
  /** The socket's peer, where the adapter knows it (`@channelkit/node` does). */
  readonly clientAddress?: string | undefined;
}

/** Refusals that are a failed authentication: a credential was presented and is wrong. */
const FAILED_AUTHENTICATION = new Set(["invalid_api_key", "invalid_signature", "signature_expired", "unauthorized"]);

/** What each policy counts, in a refusal's message. */
const COUNTED = {
  publishable_key: "this publishable key",
  server_key: "this server key",
  client_address: "this client address on this channel",
  webhook_client: "this webhook channel",
  failed_auth: "failed authentications from this client address",
  admin: "admin calls for this tenant",
} as const;
type Policy = keyof typeof COUNTED;

/**
 * The service's rate limits, counted in one {@link RateLimitStore}. Routes count a request
 * once they know who sends it (`forKey`, `forWebhook`, `forTenant`); the service counts
 * failed authentications itself, and adds the `RateLimit` headers of what was counted to the
 * answer. A request over a limit is refused with 429 `rate_limited`.
 */
export class RateLimiter {
  readonly #limits: ServiceRateLimits | null;
  readonly #store: RateLimitStore;
  readonly #hops: number;
  /** Whether addresses are remembered: something counts by them (the rate limits, or the caps on open streams). */
  readonly #remembers: boolean;
  /** The socket address of requests that do not carry their own (a Web `Request`). */
  readonly #addresses = new WeakMap<object, string>();
  readonly #applied = new WeakMap<object, AppliedLimit[]>();
  /** Requests to routes declared `rateLimited: false`: who sends them is not counted. */
  readonly #exempt = new WeakSet<object>();

  /**
   * @param limits null when rate limiting is off.
   * @param addressesNeeded whether something else counts by the client's address (the caps on open streams).
   */
  constructor(limits: ServiceRateLimits | null, store: RateLimitStore, hops: number, addressesNeeded = false) {
    this.#limits = limits;
    this.#store = store;
    this.#hops = hops;
    this.#remembers = limits !== null || addressesNeeded;
  }

  /** Remembers the socket address of `request`, for a request object that cannot carry it. */
  remember(request: object, address: string | undefined): void {
    if (this.#remembers && address) this.#addresses.set(request, address);
  }

  /**
   * Leaves `request` out of the limits of whoever sends it (`forKey`, `forChannel`,
   * `forWebhook`, `forTenant`, `forRefusedAdmin` count nothing for it): its route is declared
   * `rateLimited: false`. Failed authentications are counted all the same.
   */
  exempt(request: object): void {
    this.#exempt.add(request);
  }

  /** The client's address (see `trustProxy`), or undefined where the adapter cannot tell. */
  addressOf(request: LimitedRequest): string | undefined {
    const socket = request.clientAddress ?? this.#addresses.get(request);
    return clientAddress(socket, this.#hops === 0 ? null : request.headers.get("x-forwarded-for"), this.#hops);
  }

  /** Counts a request authenticated by a channel key: per key, and per client address for a publishable key. */
  async forKey(request: LimitedRequest, { key, channel }: KeyWithChannel): Promise<void> {
    if (this.#limits === null || this.#exempt.has(request)) return;
    if (key.prefix === "svc_pub_") {
      await this.#count(request, [
        ["publishable_key", this.#setting(channel, "publishableKey"), key.id],
        ["client_address", this.#setting(channel, "clientAddress"), this.#perChannel(request, channel)],
      ]);
    } else {
      // Off by default: backends send thousands of requests a second with one key.
      const rule = this.#setting(channel, "serverKey");
      if (rule !== false) await this.#count(request, [["server_key", rule, key.id]]);
    }
  }

  /**
   * Counts a request to a channel that its path names rather than a key (a chat platform's
   * webhook, a plugin's channel): as the webhook channel's, per channel (its `webhookClient`
   * limit) and per client address.
   */
  forChannel(request: LimitedRequest, channel: ChannelRecord): Promise<void> {
    return this.forWebhook(request, channel);
  }

  /** Counts a request to a webhook channel: per `client_id`, and per client address. */
  async forWebhook(request: LimitedRequest, channel: ChannelRecord): Promise<void> {
    if (this.#limits === null || this.#exempt.has(request)) return;
    await this.#count(request, [
      ["webhook_client", this.#setting(channel, "webhookClient"), channel.id],
      ["client_address", this.#setting(channel, "clientAddress"), this.#perChannel(request, channel)],
    ]);
  }

  /** Counts an admin call of a tenant. */
  async forTenant(request: LimitedRequest, tenantId: string): Promise<void> {
    if (this.#limits === null || this.#exempt.has(request)) return;
    await this.#count(request, [["admin", this.#limits.admin, tenantId]]);
  }

  /**
   * Counts an admin call whose token does not grant the tenant it names: against the
   * token's subject (or the client address for a token without one), never against the
   * tenant named, whose own admins would otherwise be refused for another's calls.
   */
  async forRefusedAdmin(request: LimitedRequest, actor: string | null): Promise<void> {
    if (this.#limits === null || this.#exempt.has(request)) return;
    const who = actor === null ? this.addressOf(request) : `token ${actor}`;
    if (who !== undefined) await this.#count(request, [["admin", this.#limits.admin, `refused ${who}`]]);
  }

  /**
   * What to answer for a refusal: a failed authentication is counted per client address,
   * and once that address is over its limit it is 429 instead. A valid key from the same
   * address is still served: only failures are counted and refused.
   */
  async afterRefusal(request: LimitedRequest, error: ServiceError): Promise<ServiceError> {
    if (!FAILED_AUTHENTICATION.has(error.code)) return error;
    return this.failedAuthentication(request, error);
  }

  /**
   * Counts `error` as a failed authentication of the client address whatever its code (an
   * unknown webhook `client_id`, which is the webhook's credential, answers 404), and
   * answers what to answer: 429 once the address is over its limit.
   */
  async failedAuthentication(request: LimitedRequest, error: ServiceError): Promise<ServiceError> {
    if (this.#limits === null || this.#limits.failedAuth === false) return error;
    const address = this.addressOf(request);
    if (address === undefined) return error;
    try {
      await this.#count(request, [["failed_auth", this.#limits.failedAuth, address]]);
    } catch (refusal) {
      // A store that cannot count does not turn a refusal into a failure.
      return isServiceError(refusal) ? refusal : error;
    }
    return error;
  }

  /** The `RateLimit` headers of what `request` was counted against, if anything. */
  headersOf(request: object): Record<string, string> | undefined {
    const applied = this.#applied.get(request);
    return applied === undefined ? undefined : rateLimitHeaders(applied);
  }

  #setting(channel: ChannelRecord, name: keyof typeof CHANNEL_LIMITS): RateLimitSetting {
    return channel.rateLimits?.[name] ?? (this.#limits as ServiceRateLimits)[name];
  }

  /** The client address on one channel, or undefined when the adapter cannot tell it: that limit is then not counted. */
  #perChannel(request: LimitedRequest, channel: ChannelRecord): string | undefined {
    const address = this.addressOf(request);
    return address === undefined ? undefined : `${channel.id}|${address}`;
  }

  /**
   * Counts `request` against each limit that applies, concurrently. A loop rather than an
   * async map: no promise per limit besides the store's own, on every request
   * (docs/benchmarks.md, "Why the code looks like this").
   */
  async #count(request: LimitedRequest, limits: [Policy, RateLimitSetting, string | undefined][]): Promise<void> {
    const applied: AppliedLimit[] = [];
    const counts: Promise<RateLimitCount>[] = [];
    for (const [policy, rule, key] of limits) {
      if (rule === false || key === undefined) continue;
      applied.push({ policy, rule, count: ALLOWED });
      counts.push(this.#store.consume(policy, rule, key));
    }
    if (counts.length === 0) return;
    const answered = counts.length === 1 ? [await (counts[0] as Promise<RateLimitCount>)] : await Promise.all(counts);
    for (let i = 0; i < answered.length; i++) (applied[i] as AppliedLimit).count = answered[i] as RateLimitCount;
    const previous = this.#applied.get(request);
    const all = previous ? [...previous, ...applied] : applied;
    this.#applied.set(request, all);
    const refused = applied.find(({ count }) => !count.allowed);
    if (refused) {
      const { policy, rule } = refused;
      const headers = rateLimitHeaders(all);
      throw new ServiceError(
        "rate_limited",
        `Too many requests: the limit is ${rule.requests} per ${rule.windowSeconds} s for ${COUNTED[policy as Policy]}. Retry in ${headers["retry-after"]} s.`,
        { headers },
      );
    }
  }
}

/** A count's place holder until the store answers. */
const ALLOWED: RateLimitCount = Object.freeze({ allowed: true, remaining: 0, resetMs: 0 });
