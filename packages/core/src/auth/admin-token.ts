import { createRemoteJWKSet, errors, type JWTHeaderParameters, type JWTPayload, jwtVerify } from "jose";
import { z } from "zod";
import type { Logger } from "../context.js";
import { ServiceError } from "../http/errors.js";
import { bearerToken } from "./authenticate.js";
import { utf8 } from "./encoding.js";

/**
 * How the admin routes authenticate their callers. An admin token is a JWT, verified with an
 * HS256 shared `secret`, with the keys of a `jwksUrl` (RS256 or ES256), or with either when
 * both are given; it names the tenants it may administer in its `tenant_ids` claim (a list)
 * or its `organization_id` claim.
 */
export interface AdminAuthOptions {
  /**
   * HS256 shared secret (usually `CHANNELKIT_ADMIN_JWT_SECRET`; `openssl rand -hex 32`).
   * At least 32 characters in production; a shorter one is a warning elsewhere.
   * `channelkit admin-token` signs with it.
   */
  secret?: string;
  /** URL of a JSON Web Key Set (your identity provider's): tokens signed with RS256 or ES256 by one of its keys. */
  jwksUrl?: string;
  /** Accepted `iss` claim(s); any issuer when absent. */
  issuer?: string | string[];
  /** Accepted `aud` claim(s); any audience when absent. */
  audience?: string | string[];
  /** Clock skew allowed on `exp` and `nbf`, in seconds (default 5). */
  clockToleranceSeconds?: number;
  /**
   * Shortest time between two fetches of the key set, in ms (default 30000): a token whose
   * `kid` is not in the cached set refetches it once this long has passed since the last fetch.
   */
  jwksCooldownMs?: number;
  /** How long a fetched key set is used before it is fetched again, in ms (default 600000). */
  jwksCacheMaxAgeMs?: number;
  /**
   * Development mode: a request without `Authorization` is accepted for the tenant of its
   * `X-Tenant-ID` (which stays mandatory), recorded with the actor `development`. Refused at
   * start-up in production. A request that does send a token has it verified as usual.
   */
  development?: boolean;
}

const optionsSchema = z.strictObject({
  secret: z.string().min(1, "the admin JWT secret must not be empty").optional(),
  jwksUrl: z.url({ protocol: /^https?$/, error: "jwksUrl must be an http(s) URL" }).optional(),
  issuer: z.union([z.string(), z.array(z.string())]).optional(),
  audience: z.union([z.string(), z.array(z.string())]).optional(),
  clockToleranceSeconds: z.number().min(0).max(300).optional(),
  jwksCooldownMs: z.number().int().min(0).optional(),
  jwksCacheMaxAgeMs: z.number().int().min(0).optional(),
  development: z.boolean().optional(),
});

/** Who an admin request comes from, once authenticated. */
export interface AdminCredentials {
  /** The tenant of `X-Tenant-ID`. */
  tenantId: string;
  /** The token's `sub`, `development` without a token in development mode, null for a token without a subject. */
  actor: string | null;
  /** Whether the token grants this tenant (`tenant_ids` or `organization_id`); a refusal is the caller's to record. */
  allowed: boolean;
}

/** The shortest HS256 secret accepted in production: 256 bits of hexadecimal would be 64. */
const MIN_SECRET_LENGTH = 32;

/** Algorithms a JWKS key may sign with; never a symmetric one, so a public key can't be used as an HMAC secret. */
const ASYMMETRIC = ["RS256", "ES256"];

/** Options already warned about (see {@link adminAuthenticator}). */
const warned = new WeakSet<AdminAuthOptions>();

/** The key set could not be fetched: the service's problem, not the caller's. */
class KeySetUnavailable extends Error {}

/**
 * Builds the authenticator of the admin routes from its options, validated at start-up.
 * Throws when the options are invalid, or when development mode is asked for in production.
 */
export function adminAuthenticator(raw: AdminAuthOptions, production: boolean, logger: Logger) {
  // The admin routes and the live-chat inbox may share one options object: warned once.
  const warn = warned.has(raw) ? () => undefined : (message: string) => logger.warn(message);
  warned.add(raw);
  const parsed = optionsSchema.safeParse(raw);
  if (!parsed.success) throw new Error(`channelkit: invalid admin options: ${parsed.error.issues.map((issue) => issue.message).join("; ")}`);
  const options = parsed.data;
  if (options.development && production) {
    throw new Error("channelkit: the admin development mode (no JWT) is refused in production: configure an admin JWT secret or JWKS URL instead.");
  }
  if (options.secret !== undefined && options.secret.length < MIN_SECRET_LENGTH) {
    const message = `the admin JWT secret is shorter than ${MIN_SECRET_LENGTH} characters, short enough to be guessed offline from one token (openssl rand -hex 32 makes a good one)`;
    if (production) throw new Error(`channelkit: ${message}.`);
    warn(`channelkit: WARNING: ${message}; refused in production.`);
  }
  if (!options.secret && !options.jwksUrl && !options.development) {
    warn(
      "channelkit: the admin routes have no JWT secret, no JWKS URL and no development mode, so every admin request is refused (401); the channelkit command reads CHANNELKIT_ADMIN_JWT_SECRET or CHANNELKIT_ADMIN_JWKS_URL.",
    );
  }
  const algorithms = [...(options.secret ? ["HS256"] : []), ...(options.jwksUrl ? ASYMMETRIC : [])];
  const hmacKey = options.secret ? utf8(options.secret) : undefined;
  const jwks = options.jwksUrl
    ? createRemoteJWKSet(new URL(options.jwksUrl), { cooldownDuration: options.jwksCooldownMs, cacheMaxAge: options.jwksCacheMaxAgeMs })
    : undefined;

  async function keyFor(header: JWTHeaderParameters, token: Parameters<NonNullable<typeof jwks>>[1]) {
    if (header.alg === "HS256" && hmacKey) return hmacKey;
    if (!jwks) throw new errors.JOSEAlgNotAllowed("no key for this algorithm");
    try {
      return await jwks(header, token);
    } catch (error) {
      if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWKSMultipleMatchingKeys) throw error;
      throw new KeySetUnavailable("the JWKS could not be fetched", { cause: error });
    }
  }

  async function verify(token: string): Promise<JWTPayload> {
    try {
      const { payload } = await jwtVerify(token, keyFor, {
        algorithms,
        issuer: options.issuer,
        audience: options.audience,
        clockTolerance: options.clockToleranceSeconds ?? 5,
      });
      return payload;
    } catch (error) {
      if (error instanceof KeySetUnavailable) {
        logger.error(`channelkit: the admin JWKS at ${options.jwksUrl} could not be fetched`, error.cause);
        throw new ServiceError("jwks_unavailable");
      }
      throw new ServiceError("unauthorized", rejection(error));
    }
  }

  return async function authenticateAdmin(request: { headers: { get(name: string): string | null } }): Promise<AdminCredentials> {
    const tenantId = request.headers.get("x-tenant-id")?.trim();
    if (!tenantId) throw new ServiceError("missing_tenant");
    if (request.headers.get("authorization") === null) {
      if (options.development) return { tenantId, actor: "development", allowed: true };
      throw new ServiceError("unauthorized", "Missing admin token: send 'Authorization: Bearer <admin JWT>' with 'X-Tenant-ID'.");
    }
    const token = bearerToken(request);
    if (token === null) throw new ServiceError("unauthorized", "The Authorization header must be 'Bearer <admin JWT>'.");
    if (token.startsWith("svc_")) throw new ServiceError("unauthorized", "A channel API key is not an admin credential: send an admin JWT.");
    if (algorithms.length === 0) {
      throw new ServiceError("unauthorized", "This service accepts no admin tokens: it has no admin JWT secret or JWKS URL configured.");
    }
    const claims = await verify(token);
    return { tenantId, actor: typeof claims.sub === "string" ? claims.sub : null, allowed: grantsTenant(claims, tenantId) };
  };
}

/** Whether the token's claims grant `tenantId`: listed in `tenant_ids` (a list, or one id) or equal to `organization_id`. */
function grantsTenant(claims: JWTPayload, tenantId: string): boolean {
  const { tenant_ids: tenantIds, organization_id: organizationId } = claims;
  if (typeof tenantIds === "string" && tenantIds === tenantId) return true;
  if (Array.isArray(tenantIds) && tenantIds.includes(tenantId)) return true;
  return typeof organizationId === "string" && organizationId === tenantId;
}

/** Why a token was refused, in words that help its holder and reveal nothing of the key. */
function rejection(error: unknown): string {
  if (error instanceof errors.JWTExpired) return "The admin token has expired.";
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.claim === "nbf") return "The admin token is not valid yet (nbf).";
    if (error.claim === "iss") return "The admin token's issuer (iss) is not accepted.";
    if (error.claim === "aud") return "The admin token's audience (aud) is not accepted.";
    return `The admin token's ${error.claim} claim is invalid.`;
  }
  if (error instanceof errors.JOSEAlgNotAllowed) return "The admin token is signed with an algorithm this service does not accept.";
  if (error instanceof errors.JWKSNoMatchingKey) return "No key of the configured JWKS matches the admin token.";
  if (error instanceof errors.JWSSignatureVerificationFailed) return "The admin token's signature does not verify.";
  return "The admin token is malformed or invalid.";
}
