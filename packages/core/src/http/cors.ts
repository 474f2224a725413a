/**
 * CORS for the public routes. The origin is reflected rather than `*` so that the allowed
 * origins check stays the authority; credentials are never allowed, since keys travel in
 * the Authorization header and never in cookies.
 */
export function withCors(request: Request, response: Response): Response {
  const origin = request.headers.get("origin");
  if (origin === null) return response;
  response.headers.set("access-control-allow-origin", origin);
  response.headers.append("vary", "Origin");
  return response;
}

/** The answer to an `OPTIONS` preflight: no authentication, no body. */
export function preflight(allowMethods: string): Response {
  return new Response(null, {
    status: 204,
    headers: {
      "access-control-allow-headers": "Authorization, Content-Type",
      "access-control-allow-methods": allowMethods,
      "access-control-max-age": "600",
    },
  });
}
