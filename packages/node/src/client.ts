import type { ServerResponse } from "node:http";
import { RunAbort } from "@channelkit/core/adapter";

/**
 * Whether the client went away before its answer was sent, learnt from the response's
 * `close` event (which fires when the exchange ends either way: only an early one is a
 * disconnect). The same lazy abort as a run's: listeners are plain functions and the
 * `AbortSignal` is made only when asked for.
 */
export class ClientLink {
  readonly #gone = new RunAbort();

  constructor(res: ServerResponse) {
    // `on`: a response closes once, and `once` would add a wrapper per request (docs/benchmarks.md, "Memory per open stream").
    res.on("close", () => {
      if (!res.writableFinished) this.#gone.abort(new Error("client disconnected"));
    });
  }

  /** Aborted when the client goes away before the answer is sent. */
  get signal(): AbortSignal {
    return this.#gone.signal;
  }

  /** Calls `listener` once when the client goes away (at once if it has); returns what removes it. */
  onGone(listener: (reason: unknown) => void): () => void {
    return this.#gone.onAbort(listener);
  }
}
