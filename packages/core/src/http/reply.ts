/**
 * What a handler reads of a request: a Web `Request` has all of it. An adapter may pass its
 * own object instead (`@channelkit/node` does), so that a runtime where building a `Request`
 * costs more than the work itself does not pay for it.
 */
export interface IncomingRequest {
  readonly method: string;
  /** The absolute URL, serialized as `URL.href` writes it (a `Request`'s `url` is). */
  readonly url: string;
  readonly headers: RequestHeaders;
  /** Aborted when the client goes away. */
  readonly signal: AbortSignal;
  /**
   * Calls `listener` once when the client goes away before the answer is sent (at once if it
   * already has), and returns what stops listening. Optional: an adapter that learns of a
   * disconnect without an `AbortSignal` offers it, and the service then never reads `signal`
   * (a signal with a listener costs on every request: see docs/benchmarks.md, "Why the code
   * looks like this").
   */
  onClientGone?(listener: (reason: unknown) => void): () => void;
  readonly body: ReadableStream<Uint8Array> | null;
  arrayBuffer(): Promise<ArrayBuffer>;
  /** The whole body as bytes, where the runtime offers it (newer `Request`s do): no copy into an `ArrayBuffer`. */
  bytes?(): Promise<Uint8Array>;
  /** The socket's peer address, where the adapter knows it: the rate limits per client address count by it. */
  readonly clientAddress?: string | undefined;
}

/**
 * What a handler reads of a request's headers: a Web `Headers` has it. Names are
 * case-insensitive; a header sent several times reads as its values joined by `, `.
 */
export interface RequestHeaders {
  get(name: string): string | null;
  has(name: string): boolean;
  /** Every header, by lower-case name in sorted order, as `Headers` iterates them. */
  forEach(callback: (value: string, name: string) => void): void;
}

/** A piece of a streamed body: bytes, or text sent as UTF-8. */
export type ReplyChunk = string | Uint8Array;

/**
 * A response body produced piece by piece, pulled by whoever sends it: the producer advances
 * only as fast as the client reads, which is the back-pressure.
 */
export interface ReplyStream {
  /**
   * The next chunk (a string is sent as UTF-8), or `null` after the last. A chunk that is
   * ready comes back synchronously, so that an adapter can send it in the same packet as the
   * status line.
   */
  pull(): ReplyChunk | null | Promise<ReplyChunk | null>;
  /** The client went away: stop producing. Not called after `pull` returned `null`. */
  cancel(): void;
}

/**
 * An answer of the service before it is a Web `Response`: `handler` turns it into one, and
 * an adapter that can write it directly (`@channelkit/node`) skips the `Response` and its
 * streams. Header names are lower case.
 */
export interface Reply {
  status: number;
  /** The reason phrase, when not the standard one of `status`. */
  statusText?: string;
  headers: Record<string, string | string[]>;
  /** A string is sent as UTF-8. */
  body: string | Uint8Array | ReplyStream | null;
}

/** True when `body` is produced piece by piece rather than known whole. */
export function isReplyStream(body: Reply["body"]): body is ReplyStream {
  return body !== null && typeof body === "object" && !(body instanceof Uint8Array);
}

/** The Web `Response` of a reply; a {@link ReplyStream} becomes a pulled `ReadableStream`. */
export function toResponse(reply: Reply): Response {
  const headers = new Headers();
  for (const [name, value] of Object.entries(reply.headers)) {
    if (typeof value === "string") headers.set(name, value);
    else for (const item of value) headers.append(name, item);
  }
  const { body } = reply;
  const init: ResponseInit = { status: reply.status, headers };
  if (reply.statusText) init.statusText = reply.statusText;
  return new Response(isReplyStream(body) ? toReadableStream(body) : (body as BodyInit | null), init);
}

/** A reply for a Web `Response` that a route returned; its body is read as the client pulls it. */
export function fromResponse(response: Response): Reply {
  const headers: Record<string, string | string[]> = {};
  response.headers.forEach((value, name) => {
    if (name !== "set-cookie") headers[name] = value;
  });
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0) headers["set-cookie"] = cookies;
  const reply: Reply = { status: response.status, headers, body: response.body === null ? null : fromReadableStream(response.body) };
  if (response.statusText) reply.statusText = response.statusText;
  return reply;
}

const encoder = new TextEncoder();

function toReadableStream(source: ReplyStream): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const chunk = await source.pull();
        if (chunk === null) controller.close();
        else controller.enqueue(typeof chunk === "string" ? encoder.encode(chunk) : chunk);
      },
      cancel() {
        source.cancel();
      },
    },
    { highWaterMark: 0 },
  );
}

function fromReadableStream(stream: ReadableStream<Uint8Array>): ReplyStream {
  const reader = stream.getReader();
  return {
    async pull() {
      const { done, value } = await reader.read();
      return done ? null : value;
    },
    cancel() {
      void reader.cancel().catch(() => undefined);
    },
  };
}
