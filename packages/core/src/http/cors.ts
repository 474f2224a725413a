import type { IncomingRequest, Reply } from "./reply.js";

/**
 * CORS for the public routes. The origin is reflected rather than `*` so that the allowed
 * origins check stays the authority; credentials are never allowed, since keys travel in
 * the Authorization header and never in cookies.
 */
export function withCors(request: IncomingRequest, reply: Reply): Reply {
  const origin = request.headers.get("origin");
  // An origin is ASCII (an international domain is in punycode): anything else is never an
  // allowed origin, and is not reflected, since runtimes disagree on how to write its bytes.
  if (origin === null || !PRINTABLE_ASCII.test(origin)) return reply;
  reply.headers["access-control-allow-origin"] = origin;
  const vary = reply.headers.vary;
  reply.headers.vary = vary === undefined ? "Origin" : `${[vary].flat().join(", ")}, Origin`;
  // A page's script reads only the safelisted response headers unless told: these say when
  // to retry, and whether an idempotent request's answer is a replay.
  const exposed: string[] = [];
  if (reply.headers.ratelimit !== undefined) exposed.push("Retry-After, RateLimit, RateLimit-Policy");
  else if (reply.headers["retry-after"] !== undefined) exposed.push("Retry-After");
  if (reply.headers["idempotent-replayed"] !== undefined) exposed.push("Idempotent-Replayed");
  if (exposed.length > 0) reply.headers["access-control-expose-headers"] = exposed.join(", ");
  return reply;
}

const PRINTABLE_ASCII = /^[\x21-\x7e]+$/;

/**
 * What the preflight of a route that takes a signature on a channel that requires one
 * allows (docs/security.md, "Request signatures"): without it a browser could not send one.
 */
export const SIGNED_HEADERS = "Authorization, Content-Type, X-Service-Signature";

/** The answer to an `OPTIONS` preflight: no authentication, no body. */
export function preflight(allowMethods: string, allowHeaders = "Authorization, Content-Type"): Reply {
  return {
    status: 204,
    headers: {
      "access-control-allow-headers": allowHeaders,
      "access-control-allow-methods": allowMethods,
      "access-control-max-age": "600",
    },
    body: null,
  };
}
