import type { z } from "zod";
import type { ServiceContext } from "../context.js";
import type { IncomingRequest, Reply } from "../http/reply.js";
import type { OperationDoc, Security } from "../openapi/spec.js";

/** The methods a route may answer; `OPTIONS` preflights are derived from the routes' `cors`. */
export type RouteMethod = "GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE";

/** The `:name` parameters of a path pattern, as a union of their names. */
export type PathParamNames<Path extends string> = Path extends `${string}:${infer Name}/${infer Rest}`
  ? Name | PathParamNames<`/${Rest}`>
  : Path extends `${string}:${infer Name}`
    ? Name
    : never;

/** The parameters of a path pattern, by name, as decoded strings. */
export type PathParams<Path extends string> = string extends Path ? Readonly<Record<string, string>> : { readonly [Name in PathParamNames<Path>]: string };

/**
 * What a browser may send to a route: its `OPTIONS` preflight is derived from it (one per path,
 * naming every method of the path), and the OpenAPI document lists it.
 */
export interface RouteCors {
  /** Request headers always allowed, e.g. `["Authorization", "Content-Type"]`. */
  headers: readonly string[];
  /**
   * Headers allowed only when the browser asks for them (`Access-Control-Request-Headers`):
   * extensions of yours that leave the preflight's usual answer as it is.
   */
  optionalHeaders?: readonly string[];
}

/** One request as a route's handler sees it: the request, its path parameters, and its input read by the route's schemas. */
export interface RouteCall<Path extends string = string, Query = unknown, Body = unknown> {
  readonly request: IncomingRequest;
  readonly params: PathParams<Path>;
  /** The query string parsed by the route's `query` schema (a parameter sent twice counts its first value); 422 `validation_error` naming the field otherwise. */
  query(): Query;
  /**
   * The exact bytes of the body (what a signature is computed over), read once, up to the
   * service's `maxBodyBytes` (413 `payload_too_large`).
   */
  rawBody(): Promise<Uint8Array>;
  /**
   * The JSON body parsed by the route's `body` schema: 415 `unsupported_media_type` unless
   * sent as `application/json`, 413 past `maxBodyBytes`, 400 `bad_request` for broken JSON,
   * 422 `validation_error` naming each failing field. Call it after the route's own checks
   * (the key, the signature over {@link rawBody}): refusals keep the contract's order.
   */
  body(): Promise<Body>;
}

/** What a route answers: a Web `Response`, or a {@link Reply}, which `@channelkit/node` writes without building one. */
export type RouteAnswer = Reply | Response;

/**
 * One route, built-in or a plugin's: the service derives from it the router's entry, the
 * CORS preflight, the validation of its query and body, whether its answers carry the rate
 * limits' headers, and its operation in the OpenAPI document.
 */
export interface RouteDefinition<Path extends string = string, Query = unknown, Body = unknown> {
  method: RouteMethod;
  /** Relative to the service's `basePath`; `:name` segments are parameters, e.g. `/channels/telegram/:channel_id`. */
  path: Path;
  /** How the route authenticates its caller (what the document says of it). */
  auth: Security;
  /** What a browser may send; `false` (the default) for a route browsers never call, which then has no preflight. */
  cors?: RouteCors | false;
  /** Parses the query string: {@link RouteCall.query}, and the query parameters of the document. */
  query?: z.ZodType<Query, any>;
  /** Parses the JSON body: {@link RouteCall.body}, and the body of the document unless `doc.body.component` names one. */
  body?: z.ZodType<Body, any>;
  /**
   * Whether the route's requests count against the rate limits of whoever sends them (true,
   * the default): once the route knows its caller (`authenticateRequest`, `adminRequest`,
   * `ctx.limits.forChannel`), the request is counted, refused with 429 `rate_limited` over a
   * limit, and answered with `RateLimit` headers; the document says so. `false` leaves them
   * out (a health check, a static asset, a route a load balancer polls); failed
   * authentications are counted all the same.
   */
  rateLimited?: boolean;
  /** The route's operation in the OpenAPI document. */
  doc: OperationDoc;
  /** Answers the request. Throw a `ServiceError` (a code of the table, a plugin's own included) to answer the error envelope. */
  handle(call: RouteCall<Path, Query, Body>, ctx: ServiceContext): RouteAnswer | Promise<RouteAnswer>;
}

/**
 * Declares a route with its path parameters, query and body typed from its path and schemas.
 *
 * @example
 * const update = defineRoute({
 *   method: "POST",
 *   path: "/channels/echo/:channel_id",
 *   auth: "none",
 *   body: z.object({ text: z.string() }),
 *   doc: { operationId: "echo", summary: "Echo", tag: { name: "Echo", description: "An echo channel." }, responses: { 200: { description: "The text." } }, errors: ["validation_error"] },
 *   async handle({ params, body }) {
 *     return Response.json({ channel: params.channel_id, text: (await body()).text });
 *   },
 * });
 */
export function defineRoute<const Path extends string, Query = unknown, Body = unknown>(
  route: RouteDefinition<Path, Query, Body>,
): RouteDefinition<NoInfer<Path>, NoInfer<Query>, NoInfer<Body>> {
  return route;
}

/** A route of any path and input, as a plugin's list holds it. */
export type AnyRoute = RouteDefinition<string, any, any>;
