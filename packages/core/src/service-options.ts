import type { ChannelServiceOptions } from "./service.js";

/** The names of `createChannelService`'s options: any other is a typo, refused by name. */
const KNOWN = [
  "storage",
  "flows",
  "secretKey",
  "secretKeyFallbacks",
  "production",
  "livechat",
  "plugins",
  "basePath",
  "maxBodyBytes",
  "historyLimit",
  "estimateTokens",
  "logger",
  "turnLeaseMs",
  "turnPollMaxMs",
  "turnWaitTimeoutMs",
  "rateLimits",
  "trustProxy",
  "streamLimits",
  "openapi",
  "health",
  "accessLog",
  "retention",
  "channels",
] as const;

// An option added to ChannelServiceOptions fails the build here until it is listed above.
type Unlisted = Exclude<keyof ChannelServiceOptions, (typeof KNOWN)[number]>;
const listed: [Unlisted] extends [never] ? true : Unlisted = true;
void listed;

/**
 * Refuses options `createChannelService` does not have (`flow` for `flows`, `secret` for
 * `secretKey`), which would otherwise be ignored without a word, as the config file of the
 * `channelkit` command refuses them.
 */
export function checkOptionNames(options: object): void {
  const known = new Set<string>(KNOWN);
  const unknown = Object.keys(options).filter((name) => !known.has(name));
  if (unknown.length === 0) return;
  const names = unknown.map((name) => `"${name}"`).join(", ");
  throw new TypeError(`channelkit: unknown option${unknown.length > 1 ? "s" : ""} ${names} of createChannelService (its options: ${KNOWN.join(", ")})`);
}
