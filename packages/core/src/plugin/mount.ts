import type { z } from "zod";
import type { ServiceContext } from "../context.js";
import { parseJson, readRawBody, requireJsonContentType } from "../http/body.js";
import { preflight } from "../http/cors.js";
import type { IncomingRequest, Reply } from "../http/reply.js";
import type { Route, RouteParams } from "../http/router.js";
import { validate } from "../http/validate.js";
import type { AnyRoute, RouteCall } from "./route.js";

/**
 * The router's entries of a service's routes: each route, and one `OPTIONS` preflight per
 * path that has a route with `cors`, naming every method of the path. A route declared
 * `rateLimited: false` has its requests left out of the rate limits by `exempt`.
 */
export function routerEntries(routes: readonly AnyRoute[], exempt: (request: IncomingRequest) => void): Route<ServiceContext>[] {
  const entries: Route<ServiceContext>[] = [];
  for (const route of routes) {
    const handle: Route<ServiceContext>["handle"] =
      route.rateLimited === false
        ? (request, params, ctx) => {
            exempt(request);
            return route.handle(new Call(route, request, params, ctx), ctx);
          }
        : (request, params, ctx) => route.handle(new Call(route, request, params, ctx), ctx);
    entries.push({ method: route.method, path: route.path, handle });
  }
  for (const [path, cors] of preflights(routes)) {
    const methods = `${cors.methods.join(", ")}, OPTIONS`;
    const headers = cors.headers.join(", ");
    entries.push({
      method: "OPTIONS",
      path,
      handle:
        cors.optionalHeaders.length === 0
          ? () => preflight(methods, headers)
          : (request) => askedPreflight(request, methods, cors.headers, cors.optionalHeaders),
    });
  }
  return entries;
}

/** What the preflight of one path allows. */
export interface PathCors {
  /** The path's methods, in the order of its routes. */
  methods: string[];
  headers: string[];
  optionalHeaders: string[];
}

/** The preflight of each path with a route that takes `cors`, in the order of the paths' first routes. */
export function preflights(routes: readonly AnyRoute[]): Map<string, PathCors> {
  const byPath = new Map<string, PathCors>();
  for (const route of routes) {
    if (!route.cors) continue;
    const cors = byPath.get(route.path) ?? { methods: [], headers: [], optionalHeaders: [] };
    for (const header of route.cors.headers) if (!cors.headers.includes(header)) cors.headers.push(header);
    for (const header of route.cors.optionalHeaders ?? []) if (!cors.optionalHeaders.includes(header)) cors.optionalHeaders.push(header);
    byPath.set(route.path, cors);
  }
  for (const route of routes) byPath.get(route.path)?.methods.push(route.method);
  return byPath;
}

/**
 * A preflight that allows its optional headers only when the browser asks for them, so that
 * the usual answer stays exactly the contract's.
 */
function askedPreflight(request: IncomingRequest, methods: string, headers: readonly string[], optional: readonly string[]): Reply {
  const asked = (request.headers.get("access-control-request-headers") ?? "").split(",").map((name) => name.trim().toLowerCase());
  const allowed = [...headers, ...optional.filter((name) => asked.includes(name.toLowerCase()))];
  const reply = preflight(methods, allowed.join(", "));
  reply.headers.vary = "Access-Control-Request-Headers";
  return reply;
}

/**
 * One request to a route: its input, read when the handler asks, by the route's schemas. The
 * readers are getters handing out bound functions, so that a handler may destructure them
 * (`handle({ params, body })`), and a route that reads neither allocates nothing for them.
 */
class Call implements RouteCall<string, unknown, unknown> {
  readonly request: IncomingRequest;
  readonly params: RouteParams;
  readonly #route: AnyRoute;
  readonly #maxBodyBytes: number;
  #raw: Promise<Uint8Array> | undefined;

  constructor(route: AnyRoute, request: IncomingRequest, params: RouteParams, ctx: ServiceContext) {
    this.request = request;
    this.params = params;
    this.#route = route;
    this.#maxBodyBytes = ctx.maxBodyBytes;
  }

  get query(): () => unknown {
    return () => this.#query();
  }

  get rawBody(): () => Promise<Uint8Array> {
    return () => this.#rawBody();
  }

  get body(): () => Promise<unknown> {
    return () => this.#body();
  }

  #query(): unknown {
    const schema = this.#route.query;
    if (!schema) throw new Error(`channelkit: the route ${this.#route.method} ${this.#route.path} reads a query but declares no \`query\` schema`);
    const values: Record<string, string> = {};
    for (const [name, value] of new URL(this.request.url).searchParams) if (!Object.hasOwn(values, name)) values[name] = value;
    return validate(schema as z.ZodType, values);
  }

  #rawBody(): Promise<Uint8Array> {
    this.#raw ??= readRawBody(this.request, this.#maxBodyBytes);
    return this.#raw;
  }

  async #body(): Promise<unknown> {
    const schema = this.#route.body;
    if (!schema) throw new Error(`channelkit: the route ${this.#route.method} ${this.#route.path} reads a body but declares no \`body\` schema`);
    requireJsonContentType(this.request);
    return validate(schema as z.ZodType, parseJson(await this.#rawBody()));
  }
}
