/**
 * How something is told to stop: a run (its client left, the service is closing, the stream
 * was cancelled), or a request whose client went away (the Node adapter). A plain object
 * rather than an `AbortController`, which costs on every execute (see docs/benchmarks.md,
 * "Why the code looks like this"), while most flows never read their signal. The
 * `AbortSignal` is made the first time something reads it.
 */
export class RunAbort {
  #aborted = false;
  #reason: unknown = undefined;
  #controller: AbortController | undefined;
  /**
   * The first listener, and the others in an array made with the second: most aborts have
   * one listener or none at a time, and an array that grew past one is 120 bytes kept for the
   * run's life (a Set, 150 from the start; docs/benchmarks.md, "Memory per open stream").
   */
  #listener: Listener | undefined;
  #more: Listener[] | undefined;

  /** Whether the run was told to stop. */
  get aborted(): boolean {
    return this.#aborted;
  }

  /** Why the run was told to stop (an `AbortError` unless given). */
  get reason(): unknown {
    return this.#reason;
  }

  /** Tells the run to stop; only the first call counts. */
  abort(reason?: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason ?? new DOMException("The run was aborted.", "AbortError");
    this.#controller?.abort(this.#reason);
    const first = this.#listener;
    const more = this.#more;
    this.#listener = undefined;
    this.#more = undefined;
    first?.(this.#reason);
    if (more) for (const listener of more) listener(this.#reason);
  }

  /** Calls `listener` once when aborted (at once if it already is); returns what removes it. */
  onAbort(listener: Listener): () => void {
    if (this.#aborted) {
      listener(this.#reason);
      return () => undefined;
    }
    this.listen(listener);
    return () => this.offAbort(listener);
  }

  /**
   * Calls `listener` once when aborted, until {@link offAbort}; unlike {@link onAbort}, not
   * at once when already aborted, and without making a function that removes it.
   */
  listen(listener: Listener): void {
    if (this.#aborted) return;
    if (this.#listener === undefined && this.#more === undefined) this.#listener = listener;
    else if (this.#more) this.#more.push(listener);
    else this.#more = [listener];
  }

  /** Removes a listener added with {@link onAbort} or {@link listen}; one that is not there is ignored. */
  offAbort(listener: Listener): void {
    if (this.#listener === listener) {
      // The next one, if any, moves up: listeners are called in the order they were added.
      this.#listener = this.#more?.shift();
      if (this.#more?.length === 0) this.#more = undefined;
      return;
    }
    const index = this.#more?.indexOf(listener) ?? -1;
    if (index >= 0) this.#more?.splice(index, 1);
    if (this.#more?.length === 0) this.#more = undefined;
  }

  /** An `AbortSignal` that follows this abort, made on first use. */
  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }
}

type Listener = (reason: unknown) => void;
