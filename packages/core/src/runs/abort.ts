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
   * An array, made with the first listener: most aborts have one or none, and a Set costs
   * 150 bytes from the start (docs/benchmarks.md, "Memory per open stream").
   */
  #listeners: ((reason: unknown) => void)[] | undefined;

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
    const listeners = this.#listeners;
    this.#listeners = undefined;
    for (const listener of listeners ?? []) listener(this.#reason);
  }

  /** Calls `listener` once when aborted (at once if it already is); returns what removes it. */
  onAbort(listener: (reason: unknown) => void): () => void {
    if (this.#aborted) {
      listener(this.#reason);
      return () => undefined;
    }
    if (this.#listeners) this.#listeners.push(listener);
    else this.#listeners = [listener];
    return () => this.offAbort(listener);
  }

  /** Removes a listener added with {@link onAbort}; one that is not there is ignored. */
  offAbort(listener: (reason: unknown) => void): void {
    const index = this.#listeners?.indexOf(listener) ?? -1;
    if (index >= 0) this.#listeners?.splice(index, 1);
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
