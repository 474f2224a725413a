import type { IncomingRequest } from "./reply.js";

/** An id a client or a proxy may give: up to 128 letters, digits and `-_.:@`, nothing a log line could be forged with. */
const GIVEN = /^[\w.:@-]{1,128}$/;

/**
 * The request's id, answered in its `X-Request-Id` header and written with what the service
 * logs of it: the one a proxy or the client sent in `X-Request-Id` when it is a plain token,
 * else a new UUID.
 */
export function requestIdOf(request: Pick<IncomingRequest, "headers">): string {
  const given = request.headers.get("x-request-id");
  return given !== null && GIVEN.test(given) ? given : crypto.randomUUID();
}
