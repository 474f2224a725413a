import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { errorEnvelope } from "@channelkit/core/adapter";

/** The `Retry-After` of a request refused while draining, in seconds: another instance, or this one restarted, takes it. */
export const DRAINING_RETRY_AFTER_SECONDS = 1;

/** How often connections that went idle during a drain are looked for and closed. */
const IDLE_CHECK_MS = 50;

/** A response with the socket Node answers it on: the one it is writing now. */
type Answering = ServerResponse & { _httpMessage?: ServerResponse | null };

/**
 * The drain of a node:http server: once {@link start}ed, it accepts no connection, closes the
 * idle ones at once and each one as it goes idle, answers a request that arrives on an open
 * connection 503 `service_draining` (`Retry-After`, `Connection: close`) without running it,
 * and tells the answers in flight that have not begun to close their connection when done.
 * Requests that arrived before it are answered as usual.
 */
export class Drain {
  readonly #server: Server;
  /** Answers to requests that arrived before the drain, until they are finished or cut. */
  readonly #inFlight = new Set<ServerResponse>();
  /** Answers the drain made close their connection: a request pipelined behind one gives it back its keep-alive. */
  readonly #closedByDrain = new WeakSet<ServerResponse>();
  #closing: Promise<void> | undefined;
  #onRefused: ((req: IncomingMessage) => void) | undefined;

  constructor(server: Server) {
    this.#server = server;
  }

  /** Whether {@link start} was called. */
  get draining(): boolean {
    return this.#closing !== undefined;
  }

  /** `handle`, with requests refused once the drain started and the others counted until answered. */
  listener(handle: (req: IncomingMessage, res: ServerResponse) => void): (req: IncomingMessage, res: ServerResponse) => void {
    return (req, res) => {
      if (this.draining) {
        this.#refuse(req, res);
        return;
      }
      this.#inFlight.add(res);
      res.once("close", () => this.#inFlight.delete(res));
      handle(req, res);
    };
  }

  /** Starts the drain (once); resolves once the server's last connection is closed. `onRefused` is told of each request refused. */
  start(onRefused?: (req: IncomingMessage) => void): Promise<void> {
    this.#onRefused ??= onRefused;
    if (this.#closing) return this.#closing;
    for (const res of this.#inFlight) {
      // A client that reuses a kept-alive connection the moment its answer ends would race the
      // close below: told `Connection: close`, it opens a new one instead (refused here, taken
      // by another instance behind a load balancer).
      if (!res.headersSent && res.shouldKeepAlive) {
        res.shouldKeepAlive = false;
        this.#closedByDrain.add(res);
      }
    }
    const server = this.#server;
    this.#closing = new Promise<void>((done, fail) => {
      // A connection whose answer ends later (a stream the service ends as it closes) goes
      // idle then: closed within this, not after the keep-alive timeout.
      const idle = setInterval(() => server.closeIdleConnections(), IDLE_CHECK_MS);
      server.close((error) => {
        clearInterval(idle);
        if (error) fail(error);
        else done();
      });
      server.closeIdleConnections();
    });
    return this.#closing;
  }

  /** 503 `service_draining` in the envelope: nothing of the request was read or run, so any client may send it again. */
  #refuse(req: IncomingMessage, res: ServerResponse): void {
    // Node writes a pipelined answer after the one before it on the connection, and drops it
    // when that one closes the connection: the one before keeps its keep-alive for this to be written.
    const before = (req.socket as unknown as Answering)._httpMessage;
    if (before && before !== res && this.#closedByDrain.has(before) && !before.headersSent) before.shouldKeepAlive = true;
    const body = errorEnvelope("service_draining");
    const headers: Record<string, string | number> = {
      "content-type": "application/json; charset=utf-8",
      "content-length": Buffer.byteLength(body),
      "retry-after": String(DRAINING_RETRY_AFTER_SECONDS),
      connection: "close",
    };
    // As the service answers a request with an Origin: a page's script can read the refusal.
    const origin = req.headers.origin;
    if (origin !== undefined && /^[\x20-\x7e]+$/.test(origin)) {
      headers["access-control-allow-origin"] = origin;
      headers.vary = "Origin";
      headers["access-control-expose-headers"] = "Retry-After";
    }
    res.writeHead(503, headers);
    res.end(body);
    this.#onRefused?.(req);
  }
}
