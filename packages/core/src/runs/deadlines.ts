import type { RunAbort } from "./abort.js";

/** Why a run that ran past its channel's limit was stopped. */
export class RunTimedOut extends Error {
  constructor(seconds: number) {
    super(`The flow ran longer than the channel's limit of ${seconds} s and was stopped.`);
    this.name = "RunTimedOut";
  }
}

/** The runs of one limit, in the order they started, and the timer armed for the first one. */
interface Limit {
  readonly seconds: number;
  /** Each run's deadline (ms): a Map keeps insertion order, so the first entry ends first. */
  readonly runs: Map<RunAbort, number>;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/**
 * Stops the runs that outlive their channel's limit, through each run's own abort (with a
 * {@link RunTimedOut} reason). One timer per limit in use rather than one per run: runs of
 * one limit reach their deadlines in the order they started, so each limit's runs wait in a
 * queue and its timer is armed for the first deadline. A timer and its callback per run were
 * about 250 bytes of every open stream (docs/benchmarks.md, "Memory per open stream").
 */
export class RunDeadlines {
  readonly #limits = new Map<number, Limit>();

  /** Aborts `abort` once `seconds` have passed, unless {@link end} is called first. */
  start(abort: RunAbort, seconds: number): void {
    let limit = this.#limits.get(seconds);
    if (!limit) {
      limit = { seconds, runs: new Map(), timer: undefined };
      this.#limits.set(seconds, limit);
    }
    const deadline = Date.now() + seconds * 1000;
    limit.runs.set(abort, deadline);
    if (limit.timer === undefined) this.#arm(limit, deadline);
  }

  /** The run ended: it is no longer watched. */
  end(abort: RunAbort, seconds: number): void {
    const limit = this.#limits.get(seconds);
    if (!limit?.runs.delete(abort) || limit.runs.size > 0) return;
    // Nothing left to watch: the timer would only wake the process for nothing.
    clearTimeout(limit.timer);
    this.#limits.delete(seconds);
  }

  /** Stops every timer (the service is closing: its runs are aborted anyway). */
  close(): void {
    for (const limit of this.#limits.values()) clearTimeout(limit.timer);
    this.#limits.clear();
  }

  #arm(limit: Limit, deadline: number): void {
    clearTimeout(limit.timer);
    limit.timer = setTimeout(() => this.#expire(limit), Math.max(0, deadline - Date.now()));
    // A limit must not keep a Node process alive on its own.
    (limit.timer as { unref?: () => void }).unref?.();
  }

  /** Aborts the runs whose deadline passed, then waits for the next one's. */
  #expire(limit: Limit): void {
    limit.timer = undefined;
    const now = Date.now();
    for (const [abort, deadline] of limit.runs) {
      if (deadline > now) {
        this.#arm(limit, deadline);
        return;
      }
      limit.runs.delete(abort);
      abort.abort(new RunTimedOut(limit.seconds));
    }
    if (limit.runs.size === 0 && this.#limits.get(limit.seconds) === limit) this.#limits.delete(limit.seconds);
  }
}
