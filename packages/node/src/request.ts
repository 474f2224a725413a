import type { IncomingMessage } from "node:http";

/** What a framework adapter may hand {@link toWebRequest} instead of reading it off the Node request. */
export interface WebRequestOverrides {
  /**
   * Path and query to build the URL from instead of `req.url`: a framework that mounted the
   * service under a prefix passes the part below the prefix.
   */
  url?: string;
  /**
   * The exact body bytes, when the host's body parser already consumed the stream and kept
   * them (e.g. body-parser's `verify` hook). Ignored for GET and HEAD.
   */
  body?: Uint8Array;
}

/**
 * A Web Request for a Node request. The body stays a stream of the exact bytes received, so
 * an HMAC over it holds; `signal` aborts when the client goes away.
 */
export function toWebRequest(req: IncomingMessage, signal: AbortSignal, baseUrl?: string, overrides: WebRequestOverrides = {}): Request {
  const origin = baseUrl ?? `http://${req.headers.host ?? "localhost"}`;
  const headers = new Headers();
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    headers.append(req.rawHeaders[i] as string, req.rawHeaders[i + 1] as string);
  }
  const method = req.method ?? "GET";
  const hasBody = method !== "GET" && method !== "HEAD";
  const init: RequestInit & { duplex?: "half" } = { method, headers };
  if (hasBody) {
    // A Uint8Array over a SharedArrayBuffer is not a BodyInit; a Node Buffer never is one.
    init.body = overrides.body ? (overrides.body as Uint8Array<ArrayBuffer>) : bodyStream(req);
    init.duplex = "half";
  }
  return new NodeRequest(new URL(overrides.url ?? req.url ?? "/", origin), init, signal);
}

/**
 * A Request whose `signal` is the adapter's own. Given `init.signal`, undici makes the Request
 * follow it through a weak reference and a finalization registry, which on Node 20 costs
 * about as much again as the rest of the Request (7 to 15 µs); the adapter owns this signal
 * and aborts it itself when the client goes away, so the Request hands it out directly.
 */
class NodeRequest extends Request {
  readonly #signal: AbortSignal;

  constructor(input: URL, init: RequestInit, signal: AbortSignal) {
    super(input, init);
    this.#signal = signal;
  }

  override get signal(): AbortSignal {
    return this.#signal;
  }
}

/**
 * The request body as a Web stream that touches the socket only when read. `Readable.toWeb`
 * is not used: it starts consuming at once, so a body the handler never reads (a 415, a 413
 * on Content-Length) was left unread on a keep-alive connection, whose next request then
 * failed with ECONNRESET; and cancelling it made Node throw an uncaught "Controller is
 * already closed" when more data arrived.
 */
function bodyStream(req: IncomingMessage): ReadableStream<Uint8Array> {
  let listening = false;
  let done = false;
  return new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        if (!listening) {
          listening = true;
          req.on("data", (chunk: Buffer) => {
            if (done) return;
            controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
            if ((controller.desiredSize ?? 0) <= 0) req.pause();
          });
          req.once("end", () => {
            if (done) return;
            done = true;
            controller.close();
          });
          req.once("error", (error) => {
            if (done) return;
            done = true;
            controller.error(error);
          });
          // A client gone mid-upload must not leave the handler waiting for the rest forever.
          req.once("close", () => {
            if (done) return;
            done = true;
            controller.error(new Error("The request closed before its body ended"));
          });
        }
        req.resume();
      },
      cancel() {
        // The rest is discarded rather than the socket destroyed: the error response (a 413)
        // must still reach the client, and the connection stays usable.
        done = true;
        req.resume();
      },
    },
    // Nothing is read before the handler asks, so Node drains an unread body by itself.
    { highWaterMark: 0 },
  );
}
