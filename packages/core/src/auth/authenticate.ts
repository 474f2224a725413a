import type { ServiceContext } from "../context.js";
import { ServiceError } from "../http/errors.js";
import type { IncomingRequest } from "../http/reply.js";
import type { KeyWithChannel, Storage } from "../storage/types.js";
import { hashApiKey, hashesEqual, parseApiKey, prefixMatchesMode } from "./api-keys.js";

/** What authentication reads of a request: its headers. */
interface WithHeaders {
  headers: Pick<IncomingRequest["headers"], "get">;
}

/**
 * The bearer token of a request: what follows `Bearer ` (any case), trimmed. Null when there
 * is no `Authorization` header, another scheme, or nothing after it (`missing_api_key`); a
 * token with spaces in it is returned as it is, to be refused as no key (`invalid_api_key`).
 */
export function bearerToken(request: WithHeaders): string | null {
  const header = request.headers.get("authorization");
  if (header === null) return null;
  const match = /^Bearer[ ]+(.*)$/is.exec(header);
  const token = match ? (match[1] as string).trim() : "";
  return token === "" ? null : token;
}

/** How a route authenticates by channel key. */
export interface ApiKeyOptions {
  /** The widget routes: a valid server key is 403 `public_key_required`. */
  publicKeyOnly?: boolean;
  /**
   * The channel types the route serves: a key of a channel of another type is 403
   * `wrong_channel_type`. `["api"]` by default (the API and widget routes); a plugin's route
   * names its own type (`["telegram"]`), so that its channels' keys authenticate there and
   * nowhere else.
   */
  channelTypes?: readonly string[];
}

/**
 * Authenticates a request by its channel key, with checks 1 to 5 of the execute route,
 * first failure wins: the key (401 `missing_api_key`, `invalid_api_key`), the channel type
 * (403 `wrong_channel_type`: `api` unless `channelTypes` names others), its state (410
 * `channel_archived`, 409 `channel_inactive`), the environment (403 `environment_mismatch`),
 * then the origin for public keys (403 `origin_not_allowed`). With `publicKeyOnly` (the
 * widget routes), a valid server key is 403 `public_key_required`, right after the key
 * checks. Throws the `ServiceError`; returns the key and its channel.
 *
 * @example
 * const { channel } = await authenticateApiKey(request, ctx.storage, new Date());
 * // a plugin's route, for its own channels:
 * const { channel } = await authenticateApiKey(request, ctx.storage, new Date(), { channelTypes: ["telegram"] });
 */
export async function authenticateApiKey(
  request: WithHeaders,
  storage: Storage,
  now: Date,
  // No default object: one would be allocated on every execute.
  options?: ApiKeyOptions,
): Promise<KeyWithChannel> {
  const presented = bearerToken(request);
  if (presented === null) throw new ServiceError("missing_api_key");
  const parsed = parseApiKey(presented);
  if (!parsed) throw new ServiceError("invalid_api_key");

  const hash = await hashApiKey(presented);
  const found = await storage.findKeyByHash(hash);
  if (!found || !hashesEqual(found.key.hash, hash)) throw new ServiceError("invalid_api_key");
  const { key, channel } = found;
  if (key.revokedAt !== null) throw new ServiceError("invalid_api_key");
  if (key.expiresAt !== null && Date.parse(key.expiresAt) <= now.getTime()) throw new ServiceError("invalid_api_key");
  if (!prefixMatchesMode(parsed.prefix, channel.mode)) throw new ServiceError("invalid_api_key");
  // A server key must never sit in a page: the widget routes refuse one even when valid.
  if (options?.publicKeyOnly && parsed.prefix !== "svc_pub_") throw new ServiceError("public_key_required");

  const types = options?.channelTypes;
  if (types === undefined) {
    if (channel.type !== "api") throw new ServiceError("wrong_channel_type");
  } else if (!types.includes(channel.type)) {
    throw new ServiceError("wrong_channel_type", `This key belongs to a channel that is not of the ${types.join(" or ")} type.`);
  }
  if (channel.state === "archived") throw new ServiceError("channel_archived");
  if (channel.state === "inactive") throw new ServiceError("channel_inactive");
  if (key.environment !== channel.environment) throw new ServiceError("environment_mismatch");

  const origin = request.headers.get("origin");
  if (parsed.prefix === "svc_pub_" && origin !== null && !channel.allowedOrigins.includes(origin)) {
    throw new ServiceError("origin_not_allowed");
  }
  return found;
}

/**
 * {@link authenticateApiKey} for a route of the service: the key's request counted against
 * the rate limits once the key is known to be valid (429 `rate_limited` when over).
 */
export async function authenticateRequest(request: WithHeaders, ctx: ServiceContext, options?: ApiKeyOptions): Promise<KeyWithChannel> {
  const found = await authenticateApiKey(request, ctx.storage, new Date(), options);
  await ctx.limits.forKey(request, found);
  return found;
}
