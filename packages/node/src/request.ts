import type { IncomingMessage, ServerResponse } from "node:http";
import type { IncomingRequest, RequestHeaders } from "@channelkit/core/adapter";
import { ClientLink } from "./client.js";
import { NodeRequestHeaders } from "./headers.js";

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
  const method = req.method ?? "GET";
  const init: RequestInit & { duplex?: "half" } = { method, headers: headersOf(req) };
  if (hasBody(method)) {
    // A Uint8Array over a SharedArrayBuffer is not a BodyInit; a Node Buffer never is one.
    init.body = overrides.body ? (overrides.body as Uint8Array<ArrayBuffer>) : bodyStream(req);
    init.duplex = "half";
  }
  return new SignalledRequest(requestUrl(req, baseUrl, overrides), init, signal);
}

/**
 * The request as a channel service's `dispatch` reads it, without a Web Request: on Node 20
 * the Request, its Headers and its body stream cost more than the rest of an execute. The
 * headers are built when first read; the body is read straight off the socket by
 * `arrayBuffer()`, and becomes a Web stream only if `body` is asked for (a chunked upload).
 * A disconnect is told through `onClientGone` without an `AbortSignal`; `signal` is made
 * only if read.
 */
export class NodeIncomingRequest implements IncomingRequest {
  readonly method: string;
  readonly url: string;
  readonly #req: IncomingMessage;
  readonly #client: ClientLink;
  readonly #body: Uint8Array | undefined;
  #headers: NodeRequestHeaders | undefined;
  #stream: ReadableStream<Uint8Array> | undefined;
  #read = false;

  /**
   * @param res the response of this request: its early `close` is the client going away.
   * @param baseUrl origin of the request's URL (default: `http://` + the Host header).
   */
  constructor(req: IncomingMessage, res: ServerResponse, baseUrl?: string, overrides: WebRequestOverrides = {}) {
    this.#req = req;
    this.method = req.method ?? "GET";
    this.url = requestUrl(req, baseUrl, overrides);
    this.#client = new ClientLink(res);
    this.#body = overrides.body;
  }

  /** Aborted when the client goes away before the answer is sent. */
  get signal(): AbortSignal {
    return this.#client.signal;
  }

  /** Calls `listener` once when the client goes away before the answer is sent. */
  onClientGone(listener: (reason: unknown) => void): () => void {
    return this.#client.onGone(listener);
  }

  /** The socket's peer address, which the rate limits count by (see `trustProxy`). */
  get clientAddress(): string | undefined {
    return this.#req.socket.remoteAddress;
  }

  /** The request's headers, as received. */
  get headers(): RequestHeaders {
    this.#headers ??= new NodeRequestHeaders(this.#req);
    return this.#headers;
  }

  /** The body as a Web stream, made on first access (like a Request's, the same stream each time). */
  get body(): ReadableStream<Uint8Array> | null {
    if (!hasBody(this.method)) return null;
    if (this.#stream) return this.#stream;
    if (this.#read) throw new TypeError("The request body was already read");
    const kept = this.#body;
    this.#stream = kept
      ? new ReadableStream({
          start(controller) {
            controller.enqueue(kept);
            controller.close();
          },
        })
      : bodyStream(this.#req);
    return this.#stream;
  }

  /** The whole body; the exact bytes received. */
  async arrayBuffer(): Promise<ArrayBuffer> {
    const bytes = await this.bytes();
    return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  }

  /** The whole body as bytes, without the copy `arrayBuffer()` makes. */
  bytes(): Promise<Uint8Array> {
    // Not async: the promise of the read itself, one turn of the microtasks sooner.
    if (!hasBody(this.method)) return Promise.resolve(new Uint8Array(0));
    if (this.#read) return Promise.reject(new TypeError("The request body was already read"));
    this.#read = true;
    if (this.#stream) return new Response(this.#stream).bytes();
    return this.#body ? Promise.resolve(this.#body) : readBody(this.#req);
  }
}

function hasBody(method: string): boolean {
  return method !== "GET" && method !== "HEAD";
}

/**
 * The request's URL. Its origin comes from `baseUrl`, else from the Host header when that is
 * a valid host, else `http://localhost`: the client writes the Host header, and a malformed
 * one (`a b`, `[::1`, `localhost:99999`) must not make a URL that cannot be built. Only the
 * path and query of a request are ever read.
 */
export function requestUrl(req: Pick<IncomingMessage, "headers" | "url">, baseUrl: string | undefined, overrides: WebRequestOverrides): string {
  const host = req.headers.host;
  const target = overrides.url ?? req.url ?? "/";
  // The usual request (a plain Host and path) is its URL already: parsing the base and the
  // target took about 7 µs of the 140 before a stream's first event, a 2 µs test here
  // (docs/benchmarks.md, "Why the code looks like this"). Anything the URL parser would
  // change (case, IPv4 forms, default port, dot segments, escapes) takes the road below.
  if (baseUrl === undefined && host !== undefined && plainHost(host) && plainTarget(target)) return `http://${host}${target}`;
  const base = baseUrl ?? (host !== undefined && parseUrl(`http://${host}`) ? `http://${host}` : "http://localhost");
  return (parseUrl(target, base) ?? new URL("/", base)).href;
}

/**
 * `new URL`, or undefined where it throws. Not `URL.canParse`: once hot, Node 20's
 * optimized form reads a string of Latin-1 characters as UTF-8 and answers false for a
 * valid `//é`, so a request's URL would change after a few thousand requests.
 */
function parseUrl(input: string, base?: string): URL | undefined {
  try {
    return new URL(input, base);
  } catch {
    return undefined;
  }
}

/**
 * A host name of lowercase letters, digits, dashes and dots whose last label starts with a
 * letter (so that the URL parser does not read it as an IPv4 address), or a dotted quad
 * written as the parser writes it; then an optional port the parser keeps as written (no
 * leading zero, not 80, at most 65535). No `xn--` label: the parser decodes and checks those.
 */
const PLAIN_HOST =
  /^(?:(?:[a-z0-9-]+\.)*[a-z][a-z0-9-]*|(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9]))(?::([1-9][0-9]{0,4}))?$/;

function plainHost(host: string): boolean {
  const match = PLAIN_HOST.exec(host);
  if (match === null || host.includes("xn--")) return false;
  const port = match[1];
  return port === undefined || (port !== "80" && Number(port) <= 65535);
}

/**
 * A path and query the URL parser keeps as they are: from `/` (not `//`, which would name
 * another host), of unreserved characters, sub-delimiters but `'` (escaped in a query),
 * `%`, `:`, `@`, `/` and `?`; no dot segment (`/.`, `/%2e`), which the parser removes.
 */
const PLAIN_TARGET = /^\/(?!\/)[A-Za-z0-9\-._~!$&()*+,;=:@%/?]*$/;
const DOT_SEGMENT = /\/(?:\.|%2e)/i;

function plainTarget(target: string): boolean {
  return PLAIN_TARGET.test(target) && !DOT_SEGMENT.test(target);
}

function headersOf(req: IncomingMessage): Headers {
  const headers = new Headers();
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) headers.append(raw[i] as string, raw[i + 1] as string);
  return headers;
}

/**
 * The whole body, read off the socket; a client gone before its end is an error, not a wait.
 * A body of a declared length is whole with its last byte: the parser frames it so, and
 * its end comes only after its own callback and a turn of `process.nextTick`, which the
 * request then does not wait for (docs/benchmarks.md, "Why the code looks like this").
 */
function readBody(req: IncomingMessage): Promise<Uint8Array> {
  if (req.readableEnded) return Promise.reject(new Error("The request body was already consumed by another reader"));
  if (req.complete) {
    // The whole message arrived already (a small request comes in one packet) and waits in
    // the stream's buffer: take it now rather than wait a turn of the event loop for 'end'.
    const chunks: Buffer[] = [];
    for (let chunk = req.read() as Buffer | null; chunk !== null; chunk = req.read() as Buffer | null) chunks.push(chunk);
    return Promise.resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks));
  }
  const length = declaredLength(req);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      received += chunk.byteLength;
      if (received === length) onEnd();
    };
    const onEnd = () => {
      done();
      resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks));
    };
    const onError = (error: Error) => {
      done();
      reject(error);
    };
    const onClose = () => onError(new Error("The request closed before its body ended"));
    const done = () => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
      req.off("close", onClose);
    };
    req.on("data", onData);
    req.once("end", onEnd);
    req.once("error", onError);
    req.once("close", onClose);
  });
}

/**
 * The body's length as the parser frames it: the Content-Length of a request without a
 * Transfer-Encoding (with both, a lenient parser reads the chunks, and the length says
 * nothing), else undefined. Zero is undefined too: an empty body has no last chunk.
 */
function declaredLength(req: IncomingMessage): number | undefined {
  const declared = req.headers["content-length"];
  if (declared === undefined || req.headers["transfer-encoding"] !== undefined || !/^[0-9]{1,15}$/.test(declared)) return undefined;
  const length = Number(declared);
  return length > 0 ? length : undefined;
}

/**
 * A Request whose `signal` is the adapter's own. Given `init.signal`, undici makes the Request
 * follow it through a weak reference and a finalization registry, which is costly (see
 * docs/benchmarks.md, "Why the code looks like this"); the adapter owns this signal and
 * aborts it itself when the client goes away, so the Request hands it out directly.
 */
class SignalledRequest extends Request {
  readonly #signal: AbortSignal;

  constructor(input: string, init: RequestInit, signal: AbortSignal) {
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
