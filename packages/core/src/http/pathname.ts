/**
 * The path of a request's URL. A Request's `url` is serialized (what `URL.href` writes), so an
 * http(s) one is the scheme, `//`, an authority without `/`, then the path up to `?` or `#`:
 * sliced out rather than parsed again (see docs/benchmarks.md, "Why the code looks like this").
 */
export function pathnameOf(url: string): string {
  const authority = url.startsWith("http://") ? 7 : url.startsWith("https://") ? 8 : -1;
  if (authority < 0) return new URL(url).pathname;
  const start = url.indexOf("/", authority);
  if (start < 0) return "/";
  let end = url.indexOf("?", start);
  if (end < 0) end = url.length;
  const hash = url.indexOf("#", start);
  return url.slice(start, hash >= 0 && hash < end ? hash : end);
}

/**
 * The route path of `pathname` below `basePath`, or null when it is not under it. The base
 * ends at a path-segment boundary: under `/chat` are `/chat` itself (its route path is `/`)
 * and `/chat/...`, never `/chatping`. An empty base (or `/`) holds every path; a trailing `/`
 * of the base is ignored. Case-sensitive, like the router.
 *
 * @example
 * pathWithin("/chat/public/v1/api/execute", "/chat"); // "/public/v1/api/execute"
 * pathWithin("/chatping", "/chat"); // null
 */
export function pathWithin(pathname: string, basePath: string): string | null {
  let end = basePath.length;
  while (end > 0 && basePath.charCodeAt(end - 1) === SLASH) end--;
  if (end === 0) return pathname;
  if (!pathname.startsWith(end === basePath.length ? basePath : basePath.slice(0, end))) return null;
  if (pathname.length === end) return "/";
  return pathname.charCodeAt(end) === SLASH ? pathname.slice(end) : null;
}

const SLASH = 0x2f;
