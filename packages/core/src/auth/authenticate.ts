import { ServiceError } from "../http/errors.js";
import type { IncomingRequest } from "../http/reply.js";
import type { KeyWithChannel, Storage } from "../storage/types.js";
import { hashApiKey, hashesEqual, parseApiKey, prefixMatchesMode } from "./api-keys.js";

/** The bearer token of a request, or null when there is no `Authorization: Bearer` header. */
export function bearerToken(request: IncomingRequest): string | null {
  const header = request.headers.get("authorization");
  if (header === null) return null;
  const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  return match ? (match[1] as string) : null;
}

/**
 * Checks 1 to 5 of decisions.md, first failure wins: the key, the channel type, the
 * channel state, the environment, then the origin for public keys.
 */
export async function authenticateApiKey(
  request: IncomingRequest,
  storage: Storage,
  now: Date,
  channelType: "api" | "webhook" = "api",
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

  if (channel.type !== channelType) throw new ServiceError("wrong_channel_type");
  if (channel.state === "archived") throw new ServiceError("channel_archived");
  if (channel.state === "inactive") throw new ServiceError("channel_inactive");
  if (key.environment !== channel.environment) throw new ServiceError("environment_mismatch");

  const origin = request.headers.get("origin");
  if (parsed.prefix === "svc_pub_" && origin !== null && !channel.allowedOrigins.includes(origin)) {
    throw new ServiceError("origin_not_allowed");
  }
  return found;
}
