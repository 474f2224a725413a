import type { IncomingRequest } from "@channelkit/core";

/** Whether an `If-None-Match` header names `etag` (weak comparison, as RFC 9110 asks for this header). */
export function matchesEtag(ifNoneMatch: string | null, etag: string): boolean {
  if (ifNoneMatch === null) return false;
  const opaque = (tag: string) => tag.trim().replace(/^W\//, "");
  return ifNoneMatch.split(",").some((tag) => tag.trim() === "*" || opaque(tag) === opaque(etag));
}

/**
 * Answers `GET` and `HEAD` with a script held in memory: short public caching (a new
 * release reaches pages within minutes) and revalidation by ETag, answered 304 without the body.
 */
export function serveScript(script: string, etag: string): (request: IncomingRequest) => Response {
  const headers = {
    "content-type": "text/javascript; charset=utf-8",
    "cache-control": "public, max-age=300",
    etag,
    "x-content-type-options": "nosniff",
  };
  return (request) => {
    if (matchesEtag(request.headers.get("if-none-match"), etag))
      return new Response(null, { status: 304, headers: { "cache-control": headers["cache-control"], etag } });
    return new Response(request.method === "HEAD" ? null : script, { headers });
  };
}
