import { createServer, type IncomingMessage, type Server, type ServerResponse, STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import { assertChannelService, ERROR_CODES, type ErrorCode, errorEnvelope } from "@channelkit/core/adapter";
import type { AddressInfo } from "node:net";
import { maxConnections } from "./connections.js";
import { Drain } from "./drain.js";
import { type NodeHandlerOptions, toNodeHandler, type WebHandler } from "./handler.js";

/** Options of {@link serve}. */
export interface ServeOptions extends NodeHandlerOptions {
  /** Port to listen on (default 3000; 0 picks a free one). */
  port?: number;
  /** Interface to bind (default `127.0.0.1`). */
  host?: string;
  /** How long a client has to send a request's headers, in ms (default 10000); then 408 `request_timeout`. */
  headersTimeoutMs?: number;
  /** How long a client has to send a whole request, body included, in ms (default 30000); then 408 `request_timeout`. */
  requestTimeoutMs?: number;
  /** How long an idle keep-alive connection stays open, in ms (default 5000). */
  keepAliveTimeoutMs?: number;
  /**
   * Connections open at once (Node's `server.maxConnections`); one past it is closed as soon
   * as it is accepted. Default 10000, or three quarters of the process's open-file limit when
   * that is lower (read on Linux), so that the database keeps descriptors when clients hold
   * every connection; `false` for no cap. See docs/deploying.md.
   */
  maxConnections?: number | false;
}

/** A listening server: what {@link serve} resolves to once it listens. */
export interface RunningServer {
  /** The node:http server. */
  server: Server;
  /**
   * The origin it listens on, `http://host:port`, with the port it actually got (when
   * `port` was 0) and an IPv6 host in brackets, e.g. `http://127.0.0.1:3000`. `serve()`
   * prints nothing: print this yourself if you want a line when it is ready.
   */
  url: string;
  /** The port it listens on. */
  port: number;
  /**
   * Drains the server: it stops accepting connections, closes the idle ones at once and each
   * other one as soon as its answer ends, and answers a request that arrives on an open
   * connection `503 service_draining` with `Retry-After` and `Connection: close`, without
   * running it. Requests already in flight are answered as usual (an answer not yet begun
   * with `Connection: close`). Resolves once the last connection is closed. It does not
   * close the service: a stream stays open until the service ends it, so call
   * {@link RunningServer.shutdown} rather than this and `service.close()` yourself.
   */
  close(): Promise<void>;
  /**
   * Stops the server and then the service, in the order that answers every request: drains
   * the server as {@link RunningServer.close} does, lets the runs in flight finish for up to
   * `drainMs` (then aborts them, stored `cancelled`, their streams ending with `finish`), and
   * closes the service's storage only after the last request was answered and the last
   * connection closed. A connection still open {@link SHUTDOWN_GRACE_MS} after the drain (a
   * body still arriving, a client that stopped reading) is cut then. Resolves once all is
   * closed; called again, answers the same promise. Given a handler that is not a channel
   * service (no `close()`), it only drains the server.
   *
   * @example
   * const running = await serve(service, { port: 3000 });
   * process.once("SIGTERM", () => void running.shutdown({ drainMs: 10_000 }).then(() => process.exit(0)));
   */
  shutdown(options?: ShutdownOptions): Promise<void>;
}

/** Options of {@link RunningServer.shutdown}. */
export interface ShutdownOptions {
  /** How long the runs in flight have to finish, in ms, before they are stopped and stored `cancelled` (default 10000, as `channelkit serve --drain-ms`). */
  drainMs?: number;
  /**
   * Called for each request answered `503 service_draining` during the shutdown, after its
   * answer was written: to log that clients still send to this instance (a load balancer that
   * was not told), for instance.
   */
  onRefused?: (request: IncomingMessage) => void;
}

/** How long after its drain {@link RunningServer.shutdown} waits for connections still open before it cuts them, in ms. */
export const SHUTDOWN_GRACE_MS = 2000;

/**
 * What Node's HTTP parser refused (a bad method, headers too large, obs-fold,
 * `Content-Length` with `Transfer-Encoding`, a request that did not arrive in time) is
 * answered in the contract's envelope rather than as an empty 400, then the connection
 * closed. A connection already gone is just closed.
 */
function answerClientError(error: Error & { code?: string }, socket: Duplex): void {
  if (!socket.writable || error.code === "ECONNRESET") {
    socket.destroy();
    return;
  }
  const code: ErrorCode =
    error.code === "HPE_HEADER_OVERFLOW" ? "headers_too_large" : error.code === "ERR_HTTP_REQUEST_TIMEOUT" ? "request_timeout" : "bad_request";
  const answer = rawAnswer(code);
  // The bad bytes came after a request that arrived whole and is still being answered
  // (pipelined): that request was valid and its run goes on, so it gets its own answer
  // first, then this one, then the connection closes. Written in its place, this answer
  // would tell a client whose run was stored that its request was malformed. (A request
  // that did not arrive whole, cut by its timeout, is the one this answer is for.)
  const answering = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (answering && !answering.writableFinished && answering.req.complete) {
    answering.shouldKeepAlive = false;
    answering.once("finish", () => {
      if (socket.writable) socket.end(answer);
    });
    answering.once("close", () => {
      if (!answering.writableFinished) socket.destroy();
    });
    return;
  }
  socket.end(answer);
}

/** `handle`, for requests that name their host: an HTTP/1.1 request without `Host` is malformed (RFC 9112), 400 in the envelope. */
function withHost(handle: (req: IncomingMessage, res: ServerResponse) => unknown): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    if (req.headers.host === undefined && req.httpVersionMinor === 1 && req.httpVersionMajor === 1) {
      const body = errorEnvelope("bad_request");
      res.writeHead(400, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(body), connection: "close" });
      res.end(body);
      return;
    }
    void handle(req, res);
  };
}

/** An error answer in the envelope, as raw bytes for a socket, that closes the connection. */
function rawAnswer(code: ErrorCode): string {
  const body = errorEnvelope(code);
  const status = ERROR_CODES[code].status;
  return `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`;
}

/**
 * Starts a node:http server for a channel service and resolves, once it listens, to the
 * {@link RunningServer}: its `url` (`http://127.0.0.1:3000`), `port`, the node:http `server`
 * and `close()`. It binds `127.0.0.1` unless `host` says otherwise (`0.0.0.0` or `::` for
 * every interface, behind a load balancer or in a container), and prints nothing.
 *
 * `service` is the channel service itself, not the promise `createChannelService()` returns:
 * given a promise (a forgotten `await`), it throws a TypeError saying so.
 *
 * @example
 * const service = await createChannelService({ storage, flows });
 * const { url } = await serve(service, { port: 3000 });
 * console.log(`listening on ${url}`);
 */
export function serve(service: WebHandler, options: ServeOptions = {}): Promise<RunningServer> {
  assertChannelService(service, "serve(service)");
  const host = options.host ?? "127.0.0.1";
  const headersTimeout = options.headersTimeoutMs ?? 10_000;
  const server = createServer({
    headersTimeout,
    requestTimeout: Math.max(headersTimeout, options.requestTimeoutMs ?? 30_000),
    keepAliveTimeout: options.keepAliveTimeoutMs ?? 5000,
    // Node checks the two timeouts above this often (30 s by default): a slow client is cut close to its deadline.
    connectionsCheckingInterval: Math.min(1000, headersTimeout),
    // Node's own answer to an HTTP/1.1 request without Host is an empty 400: it is given
    // in the envelope below instead.
    requireHostHeader: false,
  });
  const drain = new Drain(server);
  server.on("request", drain.listener(withHost(toNodeHandler(service, options))));
  const cap = maxConnections(options.maxConnections);
  if (cap !== undefined) server.maxConnections = cap;
  server.on("clientError", answerClientError);
  // A CONNECT (a proxy's tunnel) is no route of a channel service: refused in the envelope,
  // where Node would otherwise close the socket without a word.
  server.on("connect", (_request, socket: Duplex) => socket.end(rawAnswer("method_not_allowed")));
  const shown = host.includes(":") ? `[${host}]` : host;
  const wanted = options.port ?? 3000;
  let shutdown: Promise<void> | undefined;
  return new Promise((resolve, reject) => {
    const failed = (error: NodeJS.ErrnoException) => reject(listenError(error, shown, wanted));
    server.once("error", failed);
    server.listen(wanted, host, () => {
      server.off("error", failed);
      const { port } = server.address() as AddressInfo;
      resolve({
        server,
        port,
        url: `http://${shown}:${port}`,
        close: () => drain.start(),
        shutdown: (shutdownOptions = {}) => {
          shutdown ??= shutDown(server, drain, service, shutdownOptions);
          return shutdown;
        },
      });
    });
  });
}

/** The drain of {@link RunningServer.shutdown}: the server's and the service's, the storage closed last. */
async function shutDown(server: Server, drain: Drain, service: WebHandler, options: ShutdownOptions): Promise<void> {
  const drainMs = options.drainMs ?? 10_000;
  const closing = drain.start(options.onRefused);
  const cut = setTimeout(() => server.closeAllConnections(), drainMs + SHUTDOWN_GRACE_MS);
  try {
    const close = (service as { close?: (options: { drainMs: number; requestsDone: Promise<void> }) => Promise<void> }).close;
    await Promise.all([closing, close ? close.call(service, { drainMs, requestsDone: closing }) : undefined]);
  } finally {
    clearTimeout(cut);
  }
}

/** Why `listen()` failed, naming the address, with Node's `code` kept (`EADDRINUSE`...) and its error as the cause. */
function listenError(error: NodeJS.ErrnoException, host: string, port: number): Error {
  const why: Record<string, string> = {
    EADDRINUSE: "is already in use: stop what listens there, or pass another port",
    EACCES: "cannot be listened on by this process (a port below 1024 needs privileges): pass another port",
    EADDRNOTAVAIL: "is not an address of this machine: pass another host (127.0.0.1, or 0.0.0.0 for every interface)",
  };
  const reason = error.code === undefined ? undefined : why[error.code];
  if (reason === undefined) return error;
  const named = new Error(`serve(): ${host}:${port} ${reason}`, { cause: error }) as NodeJS.ErrnoException;
  named.code = error.code;
  return named;
}
