import type { ReplyChunk, ReplyStream } from "./reply.js";

/** Headers of a server-sent event stream that proxies must not buffer. */
export const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache, no-transform",
  connection: "keep-alive",
  "x-accel-buffering": "no",
} as const;

/** One SSE event: an optional `id:` line, one `data:` line of JSON, a blank line. */
export function sseEvent(data: unknown, id?: string | number): string {
  return `${id === undefined ? "" : `id: ${id}\n`}data: ${JSON.stringify(data)}\n\n`;
}

/** How often an idle event stream sends a comment, so that proxies and clients keep it open. */
const HEARTBEAT_MS = 15_000;

/**
 * The open push streams' heartbeat: one timer for all of them, running while any is open,
 * rather than a timer per stream (a stream that lives a few milliseconds would pay for
 * setting one up and clearing it).
 */
const heartbeat = {
  streams: new Set<PushStream>(),
  timer: undefined as ReturnType<typeof setInterval> | undefined,
  add(stream: PushStream): void {
    this.streams.add(stream);
    if (this.timer) return;
    this.timer = setInterval(() => {
      if (this.streams.size === 0) {
        clearInterval(this.timer);
        this.timer = undefined;
        return;
      }
      for (const open of this.streams) open.keepAlive();
    }, HEARTBEAT_MS);
    (this.timer as { unref?: () => void }).unref?.();
  },
};

/**
 * An event stream fed by pushes rather than pulled from a producer: what a subscription
 * answers with. Chunks wait in order until the client reads them; a comment goes out every
 * 15 s of silence; `onClose` runs once, when the client goes away or the feeder ends it.
 */
export class PushStream implements ReplyStream {
  readonly #queue: ReplyChunk[] = [];
  #waiting: ((chunk: ReplyChunk | null) => void) | null = null;
  #ended = false;
  #closed = false;
  readonly #onClose: () => void;
  /** Whether anything was pushed since the last heartbeat. */
  #busy = false;

  constructor(onClose: () => void) {
    this.#onClose = onClose;
    heartbeat.add(this);
  }

  /** Sends a comment when nothing was sent since the last call and nothing waits to be. */
  keepAlive(): void {
    if (!this.#busy && this.#queue.length === 0) this.push(": keep-alive\n\n");
    this.#busy = false;
  }

  /** Whether the stream ended (the client went away, or {@link end} was called). */
  get ended(): boolean {
    return this.#ended;
  }

  push(chunk: ReplyChunk): void {
    if (this.#ended) return;
    this.#busy = true;
    const waiting = this.#waiting;
    if (waiting) {
      this.#waiting = null;
      waiting(chunk);
    } else {
      this.#queue.push(chunk);
    }
  }

  /** Ends the stream once what was pushed is read. */
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#close();
    const waiting = this.#waiting;
    this.#waiting = null;
    waiting?.(null);
  }

  pull(): ReplyChunk | null | Promise<ReplyChunk | null> {
    const next = this.#queue.shift();
    if (next !== undefined) return next;
    if (this.#ended) return null;
    return new Promise((resolve) => {
      this.#waiting = resolve;
    });
  }

  cancel(): void {
    this.#ended = true;
    this.#queue.length = 0;
    this.#close();
    const waiting = this.#waiting;
    this.#waiting = null;
    waiting?.(null);
  }

  #close(): void {
    if (this.#closed) return;
    this.#closed = true;
    heartbeat.streams.delete(this);
    this.#onClose();
  }
}
