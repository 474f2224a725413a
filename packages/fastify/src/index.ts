import type { ChannelService } from "@channelkit/core";
import { assertChannelService } from "@channelkit/core/adapter";
import { handleNodeRequest } from "@channelkit/node";
import type { FastifyPluginAsync } from "fastify";

/** What the plugin needs of a channel service: its handler and the routes to register. */
export type MountableService = Pick<ChannelService, "handler" | "routes">;

/** Options of the {@link channelkit} plugin (Fastify's own `prefix` applies as usual). */
export interface ChannelkitFastifyOptions {
  /** The channel service to serve. */
  service: MountableService;
  /** Origin used to build request URLs (default: `http://` + the Host header). */
  baseUrl?: string;
}

/**
 * A Fastify 5 plugin serving exactly the service's routes (every method on each path, so the
 * service itself answers 405 and CORS preflights); the host's other routes and its 404
 * handler are untouched. Register it with a `prefix` to serve the routes under it.
 *
 * Inside its own encapsulated context (it is deliberately not wrapped in fastify-plugin) it
 * replaces every content-type parser by one that reads nothing, so the body reaches the
 * service as the exact raw bytes on the wire, streamed: signatures verify, the service
 * answers 415 for a media type it refuses and 413 by its own limit, in its own envelope and
 * order of checks. The host's parsers outside the plugin are not changed. The response is
 * written with `reply.hijack()` and streamed with back-pressure; headers the host's hooks set
 * on the reply are kept, the service's win on a clash.
 *
 * Given the promise of `createChannelService()` as `service` rather than the service (a
 * forgotten `await`), registering fails with a TypeError saying so.
 *
 * @example
 * const app = Fastify();
 * app.get("/health", async () => "ok");
 * await app.register(channelkit, { service, prefix: "/chat" });
 */
export const channelkit: FastifyPluginAsync<ChannelkitFastifyOptions> = async (fastify, { service, baseUrl }) => {
  assertChannelService(service, "app.register(channelkit, { service })", true);
  fastify.removeAllContentTypeParsers();
  // The body stays unread in request.raw: the service reads it, within its own limit.
  fastify.addContentTypeParser("*", (_request, _payload, done) => done(null));
  for (const path of new Set(service.routes.map((route) => route.path))) {
    const depth = segments(path).length;
    fastify.all(path, async (request, reply) => {
      reply.hijack();
      for (const [name, value] of Object.entries(reply.getHeaders())) {
        if (value !== undefined) reply.raw.setHeader(name, value);
      }
      await handleNodeRequest(service, request.raw, reply.raw, {
        url: below(request.raw.url ?? "/", depth),
        ...(baseUrl === undefined ? {} : { baseUrl }),
      });
    });
  }
};

function segments(path: string): string[] {
  return path.split("/").filter((segment) => segment !== "");
}

/**
 * The path and query of `url` without the plugin's prefix: the route matched, so its last
 * `depth` segments are the route's own path.
 */
function below(url: string, depth: number): string {
  const queryAt = url.indexOf("?");
  const pathname = queryAt === -1 ? url : url.slice(0, queryAt);
  const query = queryAt === -1 ? "" : url.slice(queryAt);
  const own = depth === 0 ? [] : segments(pathname).slice(-depth);
  return `/${own.join("/")}${query}`;
}
