import type { ChannelService } from "@channelkit/core";
import { assertChannelService } from "@channelkit/core/adapter";
import { type Context, Hono } from "hono";

/** What the adapter needs of a channel service: its handler and the routes to register. */
export type MountableService = Pick<ChannelService, "handler" | "routes">;

/**
 * A Hono app serving exactly the service's routes (every method on each path, so the service
 * itself answers 405 and CORS preflights). Mount it in the host's app with `app.route()`, at
 * the root or under a prefix; the host's other routes and its `notFound` stay its own. It
 * runs on Node with `@hono/node-server`; it is a plain fetch handler (`app.fetch`), written
 * for Bun, Deno and Cloudflare Workers too, but only Node is tested and supported today.
 *
 * The service receives the original `c.req.raw`, so the exact body bytes, the stream and the
 * request's abort signal pass through untouched. If a host middleware already read the body
 * through Hono (`c.req.json()`, `c.req.text()`, a validator), Hono kept it and the request is
 * rebuilt from that cache: byte for byte from `arrayBuffer()`/`blob()`, and from the decoded
 * text after `json()`/`text()` (exact for any UTF-8 body; bytes that are not UTF-8 were
 * already replaced by Hono's decoding). A body read directly from `c.req.raw` is gone, and
 * the request fails with an error saying so.
 *
 * Given the promise of `createChannelService()` rather than the service (a forgotten
 * `await`), it throws a TypeError saying so.
 *
 * @example
 * const app = new Hono();
 * app.get("/health", (c) => c.text("ok"));
 * app.route("/chat", channelkit(service));
 * serve({ fetch: app.fetch, port: 3000 }); // @hono/node-server, or `export default app`
 */
export function channelkit(service: MountableService): Hono {
  assertChannelService(service, "channelkit(service)", true);
  const app = new Hono();
  for (const path of new Set(service.routes.map((route) => route.path))) {
    const depth = segments(path).length;
    app.all(path, async (c) => service.handler(await serviceRequest(c, depth), { clientAddress: clientAddress(c) }));
  }
  return app;
}

/**
 * The client's address as the runtime tells it, for the rate limits per address: the
 * `IncomingMessage` of @hono/node-server, `server.requestIP()` on Bun, the `remoteAddr` of
 * `Deno.serve`'s info. Elsewhere (Cloudflare Workers, whose address is a header only its own
 * edge can vouch for) it is unknown, and only the limits that do not count by address apply.
 */
function clientAddress(c: Context): string | undefined {
  const env = c.env as
    | {
        incoming?: { socket?: { remoteAddress?: string } };
        requestIP?: (request: Request) => { address: string } | null;
        remoteAddr?: { hostname?: string };
      }
    | undefined;
  if (env === undefined || env === null || typeof env !== "object") return undefined;
  if (env.incoming?.socket?.remoteAddress) return env.incoming.socket.remoteAddress;
  if (typeof env.requestIP === "function") return env.requestIP(c.req.raw)?.address ?? undefined;
  return env.remoteAddr?.hostname;
}

/** The request as the service must see it: the path below the mount point, the exact body. */
async function serviceRequest(c: Context, depth: number): Promise<Request> {
  const raw = c.req.raw;
  const url = new URL(raw.url);
  const own = `/${(depth === 0 ? [] : segments(url.pathname).slice(-depth)).join("/")}`;
  const moved = own !== url.pathname;
  if (!raw.bodyUsed && !moved) return raw;
  url.pathname = own;
  const init: RequestInit & { duplex?: "half" } = { method: raw.method, headers: raw.headers, signal: raw.signal };
  if (raw.bodyUsed) {
    init.body = await cachedBody(c);
  } else if (raw.method !== "GET" && raw.method !== "HEAD") {
    init.body = lazyBody(raw);
    init.duplex = "half";
  }
  return new Request(url, init);
}

/**
 * `raw.body`, touched only when the service reads it. On @hono/node-server merely getting
 * `raw.body` starts reading the socket, and a body the service then leaves unread (a 415, a
 * 413 on Content-Length) could no longer be drained, so the keep-alive connection was cut.
 */
function lazyBody(raw: Request): ReadableStream<Uint8Array> {
  let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (!reader) {
          if (raw.body === null) return controller.close();
          reader = raw.body.getReader();
        }
        const { done, value } = await reader.read();
        if (done) controller.close();
        else controller.enqueue(value);
      },
      cancel: (reason) => reader?.cancel(reason),
    },
    { highWaterMark: 0 },
  );
}

/** The body a host middleware read through Hono, from the cache Hono keeps of it (promises at run time). */
async function cachedBody(c: Context): Promise<BodyInit> {
  const cache = c.req.bodyCache;
  try {
    // Bytes when Hono holds them; else the text, which re-encodes to the same bytes for UTF-8.
    if (cache.arrayBuffer) return await cache.arrayBuffer;
    if (cache.blob) return await cache.blob;
    if (cache.text !== undefined) return await cache.text;
    // Only multipart parses to form data, and the service refuses it by its Content-Type alone.
    if (cache.formData) return await cache.formData;
  } catch (cause) {
    // Hono's read failed because the body had been consumed from c.req.raw before it.
    throw new Error(BODY_ALREADY_CONSUMED, { cause });
  }
  throw new Error(BODY_ALREADY_CONSUMED);
}

const BODY_ALREADY_CONSUMED =
  "channelkit: the request body was already consumed before channelkit (read from c.req.raw directly), so the " +
  "exact bytes signatures are checked over are gone. Mount channelkit before that middleware, or read the body " +
  "through Hono (c.req.json(), c.req.text(), c.req.arrayBuffer()), which keeps it.";

function segments(path: string): string[] {
  return path.split("/").filter((segment) => segment !== "");
}
