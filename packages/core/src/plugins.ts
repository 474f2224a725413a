import type { IncomingRequest } from "./http/reply.js";

/** Parameters captured from `:name` segments of a route path. */
export type RouteParams = Record<string, string>;

/**
 * What a route reads of a request: the members of a Web `Request` that every adapter
 * provides. Through `service.handler` it is the `Request` itself; behind `@channelkit/node`
 * (and so Express and Fastify) it is a lighter object with these members only, so a route
 * must not rely on others (`json()`, `formData()`, ...): read the body through the route's
 * `RouteCall` (`rawBody()`, `body()`).
 */
export type RouteRequest = IncomingRequest;

export type { ChannelPlugin, ErrorCodeDefinition } from "./plugin/plugin.js";
