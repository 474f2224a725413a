import { z } from "zod";

/** At most `requests` requests in any window of `windowSeconds` seconds. */
export interface RateLimitRule {
  requests: number;
  windowSeconds: number;
}

/** A limit, or `false` for none. */
export type RateLimitSetting = RateLimitRule | false;

/**
 * What a channel may set for itself, each replacing the service's setting for that channel:
 * a rule, or `false` for no limit. A name left out takes the service's setting.
 */
export interface ChannelRateLimits {
  /** Requests per publishable key (`svc_pub_`) on the browser routes: execute, history, the widget, the live-chat subscription. */
  publishableKey?: RateLimitSetting;
  /** Requests per server key (`svc_live_`, `svc_test_`). */
  serverKey?: RateLimitSetting;
  /** Requests per client address and channel, on the browser routes and the webhook routes. */
  clientAddress?: RateLimitSetting;
  /** Requests per webhook channel (`client_id`). */
  webhookClient?: RateLimitSetting;
}

/** The names of {@link ChannelRateLimits}, as the wire spells them. */
export const CHANNEL_LIMITS = {
  publishableKey: "publishable_key",
  serverKey: "server_key",
  clientAddress: "client_address",
  webhookClient: "webhook_client",
} as const satisfies Record<keyof ChannelRateLimits, string>;

/** The service-wide limits: the channel's, and those of no channel. */
export interface ServiceRateLimits extends Required<ChannelRateLimits> {
  /** Failed authentications (a wrong key, signature or admin token) per client address, on every route. */
  failedAuth: RateLimitSetting;
  /** Admin calls (HTTP) per tenant. */
  admin: RateLimitSetting;
}

/** What each limit is when the host says nothing: generous enough that honest clients and test suites never meet them. */
export const DEFAULT_RATE_LIMITS: Readonly<ServiceRateLimits> = Object.freeze({
  publishableKey: { requests: 6000, windowSeconds: 60 },
  serverKey: false,
  clientAddress: { requests: 1200, windowSeconds: 60 },
  webhookClient: { requests: 6000, windowSeconds: 60 },
  failedAuth: { requests: 100, windowSeconds: 60 },
  admin: { requests: 1200, windowSeconds: 60 },
});

/** The wire's form of a rule: `{ "requests": 100, "window_seconds": 60 }`. */
const wireRule = z.strictObject(
  {
    requests: z
      .number("requests must be a number")
      .int("requests must be a whole number")
      .min(1, "requests must be 1 to 1000000000")
      .max(1e9, "requests must be 1 to 1000000000"),
    window_seconds: z
      .number("window_seconds must be a number of seconds")
      .int("window_seconds must be a whole number of seconds")
      .min(1, "window_seconds must be 1 to 86400")
      .max(86_400, "window_seconds must be 1 to 86400"),
  },
  { error: (issue) => (issue.code === "invalid_type" ? "a rate limit is { requests, window_seconds }, false for none, or null for the service's" : undefined) },
);
const wireSetting = z.union([wireRule, z.literal(false)], "a rate limit is { requests, window_seconds }, false for none, or null for the service's").nullable();

/** The names of {@link ServiceRateLimits}, as the wire spells them (`serve --rate-limits`). */
export const SERVICE_LIMITS = { ...CHANNEL_LIMITS, failedAuth: "failed_auth", admin: "admin" } as const satisfies Record<keyof ServiceRateLimits, string>;

/** Limits in the wire's names (`names`), as the camel-cased object core uses; `null` for a name, or leaving it out, sets nothing. */
function wireLimitsSchema<Names extends Record<string, string>>(names: Names, what: string) {
  const wireNames = Object.values(names);
  return z
    .strictObject(Object.fromEntries(wireNames.map((name) => [name, wireSetting.optional()])) as Record<string, z.ZodOptional<typeof wireSetting>>, {
      error: (issue) =>
        issue.code === "invalid_type"
          ? `${what} must be an object`
          : issue.code === "unrecognized_keys"
            ? `${what} takes ${wireNames.join(", ")}, not ${issue.keys.join(", ")}`
            : undefined,
    })
    .nullable()
    .transform((wire) => {
      const limits: Partial<Record<keyof Names, RateLimitSetting>> = {};
      for (const [name, wireName] of Object.entries(names) as [keyof Names, string][]) {
        const value = wire?.[wireName];
        if (value === false) limits[name] = false;
        else if (value) limits[name] = { requests: value.requests, windowSeconds: value.window_seconds };
      }
      return limits;
    });
}

/**
 * `rate_limits` of the admin PATCH (and of `channel update --rate-limits`), in the wire's
 * names, as the channel's {@link ChannelRateLimits}. It replaces the whole set; `null` for a
 * name (or leaving it out) takes the service's setting, `false` lifts the limit.
 */
export const channelRateLimitsWireSchema: z.ZodType<ChannelRateLimits, unknown> = wireLimitsSchema(CHANNEL_LIMITS, "rate_limits");

/** The service's limits in the wire's names (`serve --rate-limits`), as the `rateLimits` option takes them. */
export const serviceRateLimitsWireSchema: z.ZodType<Partial<ServiceRateLimits>, unknown> = wireLimitsSchema(SERVICE_LIMITS, "--rate-limits");

/** A rule as `service.admin` and the service's options take it. */
const rule = z.strictObject({
  requests: z.number().int().min(1).max(1e9),
  windowSeconds: z.number().int().min(1).max(86_400),
});
const setting = z.union([rule, z.literal(false)], "a rate limit is { requests, windowSeconds } or false");

/** {@link ChannelRateLimits} as `service.admin` takes them (replacing the whole set). */
export const channelRateLimitsSchema = z.strictObject({
  publishableKey: setting.optional(),
  serverKey: setting.optional(),
  clientAddress: setting.optional(),
  webhookClient: setting.optional(),
});

/** The service's `rateLimits` option, checked at start-up. */
export const serviceRateLimitsSchema = channelRateLimitsSchema.extend({
  failedAuth: setting.optional(),
  admin: setting.optional(),
});

/** {@link channelRateLimitsView} as a schema: the channel's overrides in the wire's names, each a rule or `false` (no limit). */
export const channelRateLimitsViewSchema = z.strictObject(
  Object.fromEntries(Object.values(CHANNEL_LIMITS).map((name) => [name, z.union([wireRule, z.literal(false)]).optional()])) as Record<
    (typeof CHANNEL_LIMITS)[keyof typeof CHANNEL_LIMITS],
    z.ZodOptional<z.ZodUnion<[typeof wireRule, z.ZodLiteral<false>]>>
  >,
);

/** A channel's overrides in the wire's names, as the admin shows them. */
export function channelRateLimitsView(limits: ChannelRateLimits): Record<string, { requests: number; window_seconds: number } | false> {
  const view: Record<string, { requests: number; window_seconds: number } | false> = {};
  for (const [name, wireName] of Object.entries(CHANNEL_LIMITS) as [keyof ChannelRateLimits, string][]) {
    const value = limits[name];
    if (value === false) view[wireName] = false;
    else if (value) view[wireName] = { requests: value.requests, window_seconds: value.windowSeconds };
  }
  return view;
}
