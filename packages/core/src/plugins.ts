import type { ServiceContext } from "./context.js";

/** Parameters captured from `:name` segments of a route path. */
export type RouteParams = Record<string, string>;

/**
 * What a plugin's route reads of a request: the members of a Web `Request` that every
 * adapter provides. Through `service.handler` it is the `Request` itself; behind
 * `@channelkit/node` (and so Express and Fastify) it is a lighter object with these members
 * only, so a route must not rely on others (`json()`, `formData()`, ...).
 */
export interface RouteRequest {
  readonly method: string;
  /** The absolute URL, as `URL.href` writes it. */
  readonly url: string;
  /** Case-insensitive; a header sent several times reads as its values joined by `, `. */
  readonly headers: { get(name: string): string | null; has(name: string): boolean };
  /** Aborted when the client goes away. */
  readonly signal: AbortSignal;
  /** The body as a stream of its exact bytes, or `null` without one. Read it or `arrayBuffer()`, once. */
  readonly body: ReadableStream<Uint8Array> | null;
  /** The whole body, exactly the bytes received (what an HMAC is computed over). */
  arrayBuffer(): Promise<ArrayBuffer>;
}

/**
 * One endpoint of a plugin: a method, a path pattern relative to the service's `basePath`
 * (`:name` segments are parameters, e.g. `/channels/webhook/:client_id/start`), and a handler
 * answering a Web `Response`. Throw a `ServiceError` to answer the contract's error envelope.
 */
export interface Route {
  method: string;
  path: string;
  handle(request: RouteRequest, params: RouteParams, ctx: ServiceContext): Promise<Response> | Response;
}

/**
 * A plugin extends the service with routes; the API channel itself is one. Later channels
 * (webhook, widget) and features (live chat, rate limits) plug in the same way, without
 * changes to the pipeline.
 */
export interface ChannelPlugin {
  /** Unique name, for error messages. */
  name: string;
  /** Routes the plugin answers, relative to the service's `basePath`. */
  routes?: Route[];
  /**
   * Start-up work, run once by `createChannelService` before it answers a request (in the
   * order of `plugins`): check options against the service (throwing fails the start-up),
   * prepare what the routes need.
   */
  init?(ctx: ServiceContext): void | Promise<void>;
}
