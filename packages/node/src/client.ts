import type { ServerResponse } from "node:http";

/**
 * Whether the client went away before its answer was sent, learnt from the response's
 * `close` event (which fires when the exchange ends either way: only an early one is a
 * disconnect). Listeners are plain functions and the `AbortSignal` is made only when asked
 * for: on Node 20 a signal with a listener costs a few µs, and most requests never need one.
 */
export class ClientLink {
  #gone: Error | undefined;
  #controller: AbortController | undefined;
  readonly #listeners = new Set<(reason: unknown) => void>();

  constructor(res: ServerResponse) {
    res.once("close", () => {
      if (res.writableFinished) return;
      this.#gone = new Error("client disconnected");
      this.#controller?.abort(this.#gone);
      for (const listener of [...this.#listeners]) listener(this.#gone);
      this.#listeners.clear();
    });
  }

  /** Aborted when the client goes away before the answer is sent. */
  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#gone) this.#controller.abort(this.#gone);
    }
    return this.#controller.signal;
  }

  /** Calls `listener` once when the client goes away (at once if it has); returns what removes it. */
  onGone(listener: (reason: unknown) => void): () => void {
    if (this.#gone) {
      listener(this.#gone);
      return () => undefined;
    }
    this.#listeners.add(listener);
    return () => void this.#listeners.delete(listener);
  }
}
