import { ServiceError } from "./errors.js";
import type { RouteParams } from "../plugins.js";
import type { IncomingRequest, Reply } from "./reply.js";

export type { RouteParams };

/**
 * One endpoint as the router holds it: a method and a path pattern such as
 * `/public/v1/api/conversations/:session_id/messages`. The built-in routes answer a
 * {@link Reply}; a plugin's public `Route`, reading a `RouteRequest` and answering a Web
 * `Response`, is one too.
 */
export interface Route<Ctx> {
  method: string;
  path: string;
  /** Answers with a {@link Reply}, or a Web `Response` (which costs more on Node). */
  handle(request: IncomingRequest, params: RouteParams, ctx: Ctx): Promise<Reply | Response> | Reply | Response;
}

interface CompiledRoute<Ctx> extends Route<Ctx> {
  segments: string[];
}

/** A route table: finds the route of a request, or explains why none matches (404, 405). */
export class Router<Ctx> {
  /** The routes by their number of segments, in the order they were added: a path is tried only against routes of its length. */
  readonly #bySize = new Map<number, CompiledRoute<Ctx>[]>();

  /**
   * Routes without parameters by their path as a request writes it (`/` and the segments)
   * and their method: the usual request finds its route without its path being split,
   * a few µs of a stream's first event at rest (docs/benchmarks.md, "Routes found by
   * their path"). A route that a route added before it would take is left out, so the
   * first match still wins.
   */
  readonly #byPath = new Map<string, Map<string, CompiledRoute<Ctx>>>();

  add(route: Route<Ctx>): this {
    const segments = split(route.path);
    const compiled: CompiledRoute<Ctx> = { ...route, method: route.method.toUpperCase(), segments };
    const routes = this.#bySize.get(segments.length) ?? [];
    const taken = routes.some((earlier) => earlier.method === compiled.method && matchSegments(earlier.segments, segments) !== null);
    if (!taken && !segments.some(isParameter)) {
      const path = `/${segments.join("/")}`;
      const methods = this.#byPath.get(path) ?? new Map<string, CompiledRoute<Ctx>>();
      methods.set(compiled.method, compiled);
      this.#byPath.set(path, methods);
    }
    routes.push(compiled);
    this.#bySize.set(segments.length, routes);
    return this;
  }

  match(method: string, pathname: string): { route: Route<Ctx>; params: RouteParams } {
    const known = this.#byPath.get(pathname)?.get(method);
    if (known !== undefined) return { route: known, params: {} };
    const segments = split(pathname);
    const allowed: string[] = [];
    for (const route of this.#bySize.get(segments.length) ?? NO_ROUTES) {
      const params = matchSegments(route.segments, segments);
      if (!params) continue;
      if (route.method === method) return { route, params };
      if (!allowed.includes(route.method)) allowed.push(route.method);
    }
    if (allowed.length === 0) throw new ServiceError("not_found");
    throw new ServiceError("method_not_allowed", undefined, { headers: { allow: allowed.join(", ") } });
  }
}

const NO_ROUTES: readonly never[] = [];

function split(path: string): string[] {
  return path.split("/").filter((segment) => segment !== "");
}

/**
 * The route's params when `actual` (as many segments) matches `pattern`. Literal segments are compared before
 * anything is allocated: most routes tried do not match, and each try made a params object
 * (docs/benchmarks.md, "Why the code looks like this").
 */
function matchSegments(pattern: string[], actual: string[]): RouteParams | null {
  let hasParams = false;
  for (let i = 0; i < pattern.length; i++) {
    const expected = pattern[i] as string;
    if (expected.charCodeAt(0) === COLON) hasParams = true;
    else if (expected !== actual[i]) return null;
  }
  const params: RouteParams = {};
  if (!hasParams) return params;
  for (let i = 0; i < pattern.length; i++) {
    const expected = pattern[i] as string;
    if (expected.charCodeAt(0) !== COLON) continue;
    try {
      params[expected.slice(1)] = decodeURIComponent(actual[i] as string);
    } catch {
      return null;
    }
  }
  return params;
}

const COLON = 58;

function isParameter(segment: string): boolean {
  return segment.charCodeAt(0) === COLON;
}
