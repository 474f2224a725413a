import type { Route } from "@channelkit/core";

/** Whether an `If-None-Match` header names `etag` (weak comparison, as RFC 9110 asks for this header). */
export function matchesEtag(ifNoneMatch: string | null, etag: string): boolean {
  if (ifNoneMatch === null) return false;
  const opaque = (tag: string) => tag.trim().replace(/^W\//, "");
  return ifNoneMatch.split(",").some((tag) => tag.trim() === "*" || opaque(tag) === opaque(etag));
}

/**
 * `GET` and `HEAD` routes serving a script held in memory: short public caching (a new
 * release reaches pages within minutes) and revalidation by ETag, answered 304 without the body.
 */
export function scriptRoutes(path: string, script: string, etag: string): Route[] {
  const headers = {
    "content-type": "text/javascript; charset=utf-8",
    "cache-control": "public, max-age=300",
    etag,
    "x-content-type-options": "nosniff",
  };
  const handle = (request: { method: string; headers: { get(name: string): string | null } }): Response => {
    if (matchesEtag(request.headers.get("if-none-match"), etag))
      return new Response(null, { status: 304, headers: { "cache-control": headers["cache-control"], etag } });
    return new Response(request.method === "HEAD" ? null : script, { headers });
  };
  return [
    { method: "GET", path, handle },
    { method: "HEAD", path, handle },
  ];
}
