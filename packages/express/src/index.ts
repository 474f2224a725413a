import type { IncomingMessage, ServerResponse } from "node:http";
import type { ChannelService } from "@channelkit/core";
import { assertChannelService } from "@channelkit/core/adapter";
import { handleNodeRequest } from "@channelkit/node";
import express from "express";

/** What the adapter needs of a channel service: its handler and the routes to register. */
export type MountableService = Pick<ChannelService, "handler" | "routes">;

/** Options of {@link channelkit} and {@link mountChannelkit}. */
export interface ChannelkitExpressOptions {
  /** Origin used to build request URLs (default: `http://` + the Host header). */
  baseUrl?: string;
}

/** Options of {@link mountChannelkit}. */
export interface MountChannelkitOptions extends ChannelkitExpressOptions {
  /** Path prefix the channel routes are served under, e.g. `/chat` (default: the root). */
  path?: string;
}

/**
 * An Express middleware, callable by Express 5: a `Router` here. Typed structurally so that
 * this package's types do not require `@types/express`.
 */
export type ChannelkitMiddleware = (req: IncomingMessage, res: ServerResponse, next: (error?: unknown) => void) => void;

/** The part of an Express application {@link mountChannelkit} uses. */
export interface ExpressApplication {
  use(path: string, middleware: ChannelkitMiddleware): unknown;
}

/** A Node request after a body parser such as body-parser's `verify` hook may have kept the raw bytes. */
type ParsedRequest = IncomingMessage & { rawBody?: unknown };

/**
 * An Express router serving exactly the service's routes (every method on each path, so the
 * service itself answers 405 and CORS preflights); any other path falls through to the
 * host's next middleware and its own 404. Mount it where the routes should live:
 * `app.use(channelkit(service))` or `app.use("/chat", channelkit(service))`.
 *
 * It needs the request body unread, because signatures are checked over the exact raw
 * bytes: install it before any body parser (`express.json()`), or use
 * {@link mountChannelkit}, which places it before them. When a parser ran first anyway, the
 * bytes it kept with {@link keepRawBody} (`req.rawBody`) are used; without them the request
 * fails with an error naming the fix, never with a body rebuilt from the parsed JSON.
 *
 * Given the promise of `createChannelService()` rather than the service (a forgotten
 * `await`), it throws a TypeError saying so.
 *
 * @example
 * const app = express();
 * app.use("/chat", channelkit(service)); // before app.use(express.json())
 * app.use(express.json());
 */
export function channelkit(service: MountableService, options: ChannelkitExpressOptions = {}): ChannelkitMiddleware {
  assertChannelService(service, "channelkit(service)", true);
  // Case-sensitive like the service's own router: a path Express matched is one it answers.
  const router = express.Router({ caseSensitive: true });
  const serve = (req: ParsedRequest, res: ServerResponse, next: (error?: unknown) => void) => {
    let body: Uint8Array | undefined;
    // A body parser ahead of this router read the stream to its end: the bytes are gone from it.
    if (req.method !== "GET" && req.method !== "HEAD" && req.readableEnded) {
      if (!(req.rawBody instanceof Uint8Array)) {
        next(new Error(BODY_ALREADY_READ));
        return;
      }
      body = req.rawBody;
    }
    // Inside a mounted router `req.url` is the path below the mount point.
    void handleNodeRequest(service, req, res, { url: req.url, ...(body ? { body } : {}), ...options });
  };
  for (const path of new Set(service.routes.map((route) => route.path))) router.all(path, serve);
  return router as unknown as ChannelkitMiddleware;
}

const BODY_ALREADY_READ =
  "channelkit: the request body was already read by a body parser installed before channelkit, and its raw bytes " +
  "(needed for signatures) were not kept. Mount channelkit before the parser (mountChannelkit(app, service) does), " +
  'or keep the bytes with express.json({ verify: keepRawBody }) (import { keepRawBody } from "@channelkit/express").';

/**
 * Mounts {@link channelkit} on `app` under `options.path` and moves it to the front of the
 * app's middleware stack, ahead of everything installed before or after the call, so a
 * global `app.use(express.json())` never consumes the body channelkit signs over. The
 * channel routes therefore also run before the host's other middleware (loggers, auth); the
 * service does its own authentication, CORS and errors.
 *
 * @example
 * const app = express();
 * app.use(express.json());
 * app.get("/health", (_req, res) => res.send("ok"));
 * mountChannelkit(app, service, { path: "/chat" });
 */
export function mountChannelkit(app: ExpressApplication, service: MountableService, options: MountChannelkitOptions = {}): void {
  assertChannelService(service, "mountChannelkit(app, service)", true);
  const { path = "/", ...rest } = options;
  app.use(path, channelkit(service, rest));
  // Express 5 exposes its router as `app.router`; Express 4 as `app._router`.
  const internals = app as { router?: { stack?: unknown[] }; _router?: { stack?: unknown[] } };
  const stack = (internals._router ?? internals.router)?.stack;
  if (!Array.isArray(stack)) throw new Error("channelkit: mountChannelkit needs an Express application (app.router.stack not found)");
  const layer = stack.pop();
  // Express 4 sets up each request in its first two layers; Express 5 has none of them.
  let index = 0;
  while (index < stack.length && ["query", "expressInit"].includes((stack[index] as { name?: string }).name ?? "")) index++;
  stack.splice(index, 0, layer);
}

/**
 * A body-parser `verify` hook that keeps the exact raw bytes on `req.rawBody`, for hosts that
 * must parse JSON before channelkit runs: channelkit then verifies signatures over them.
 *
 * @example
 * import { channelkit, keepRawBody } from "@channelkit/express";
 * app.use(express.json({ verify: keepRawBody }));
 * app.use(channelkit(service));
 */
export function keepRawBody(req: IncomingMessage, _res: ServerResponse, buffer: Buffer): void {
  (req as ParsedRequest).rawBody = buffer;
}
