import type { Logger } from "../context.js";
import type { IncomingRequest } from "../http/reply.js";
import type { LiveFeed, Storage } from "../storage/types.js";
import { RunAbort } from "./abort.js";
import { RunDeadlines } from "./deadlines.js";
import { SharedChannels } from "./shared-channels.js";
import { isoTimestamp } from "./timestamp.js";
import type { TurnPassedOver } from "../storage/turn-passed-over.js";

/** A run holding its conversation's turn, whose lease the lifecycle renews. */
export interface HeldTurn {
  storage: Storage;
  runId: string;
  conversationId: string;
  ticket: number;
  /** When the run claimed the turn (ms): a run shorter than a third of the lease is never renewed. */
  sinceMs: number;
}

/**
 * The {@link LiveFeed} topic on which a store may announce that a conversation's turn passed
 * to a run that waits for it (the message: the conversation's id), so that the runs waiting
 * on other instances look at once rather than at their next poll. Optional for a store:
 * waiting runs poll anyway. `@channelkit/kysely`'s Postgres storage notifies from the
 * statement that completes a run, when a run is queued after it.
 */
export const TURN_PASSED_TOPIC = "turn";

/**
 * Longest time a turn passed to a waiting run stays its to claim, in ms (or the lease, when
 * shorter). A live waiter is woken when the turn passes and claims it within milliseconds;
 * a waiter whose instance died never does, and each one the conversation meets costs this,
 * not a lease. A live waiter that misses it (its event loop stalled that long) finds its
 * ticket passed over and queues again at the end ({@link TurnPassedOver}).
 */
export const TURN_CLAIM_MS = 5000;

/** The {@link LiveFeed} topic on which an instance asks the one running a run to stop it (the message: the run's id). */
export const RUN_STOP_TOPIC = "run-stop";

/** Settings of a service's {@link RunLifecycle}. */
interface RunLifecycleOptions {
  logger: Logger;
  /** How long a run holds its conversation's turn without renewing it, in ms. */
  leaseMs: number;
  /** The feed between the instances: where runs are stopped from another instance ({@link RUN_STOP_TOPIC}). */
  feed?: LiveFeed;
  /** Whether the store announces on the feed the turns passed on other instances ({@link TURN_PASSED_TOPIC}). */
  announcesTurns?: boolean;
  /** Longest wait between two looks at a conversation's queue by a run waiting its turn, in ms (default 100). */
  turnPollMaxMs?: number;
  /** Longest a run waits for its turn, in ms (default {@link TURN_WAIT_TIMEOUT_MS}). */
  turnWaitTimeoutMs?: number;
}

/**
 * Default longest wait of a run for its conversation's turn, in ms: as long as a run may
 * last by default (`runTimeoutSeconds`, 300 s). Past it, the run gives its ticket back and
 * its client is answered `503 conversation_busy` with `Retry-After`.
 */
export const TURN_WAIT_TIMEOUT_MS = 300_000;

/** Default longest wait between two looks at a conversation's queue by a run waiting its turn, in ms. */
const MAX_POLL_MS = 100;
const MIN_POLL_MS = 2;

/**
 * The one owner of the runs of a service: it knows every run in flight, aborts a run when
 * its client goes away or the service closes, lets a run waiting its turn sleep until a run
 * of the same conversation ends in this process or, where the store announces it, in
 * another (else a short poll), and lets `close()` wait until every run is stored. Channels never track runs
 * themselves: they start them with `startRun`, which registers each here.
 */
export class RunLifecycle {
  readonly logger: Logger;
  readonly leaseMs: number;
  /** How long a turn passed to a waiting run stays its to claim ({@link TURN_CLAIM_MS}, at most the lease). */
  readonly claimMs: number;
  /** Longest a run waits for its turn, in ms ({@link TURN_WAIT_TIMEOUT_MS} by default). */
  readonly waitTimeoutMs: number;
  /** Runs in flight. One listener here, on close, rather than one per run on a long-lived signal. */
  readonly #runs = new Set<RunAbort>();
  /** The same runs by id, and each one's id: what {@link cancel} finds. */
  readonly #byId = new Map<string, RunAbort>();
  readonly #idOf = new WeakMap<RunAbort, string>();
  /** The subscription to stops asked for by other instances: made when a stoppable run is first admitted, kept until `close()`. */
  #stopsFeed: Promise<(() => void) | undefined> | undefined;
  #closed: Error | null = null;
  /** Who waits for no run to be in flight: `close()` and `drain()`. */
  #idle: (() => void)[] = [];
  /** Runs of this process waiting their turn, by conversation: woken when a run there ends. */
  readonly #waiting = new Map<string, Set<() => void>>();
  /** Runs holding their turn, and the one timer renewing their leases (made on the first, ended by `close()`). */
  readonly #held = new Set<HeldTurn>();
  #renewals: ReturnType<typeof setInterval> | undefined;
  /** Stops the flows that outlive their channel's limit. */
  readonly deadlines = new RunDeadlines();
  /** One record per channel for the runs in flight. */
  readonly channels = new SharedChannels();

  readonly #feed: LiveFeed | undefined;
  readonly #announcesTurns: boolean;
  readonly #maxPollMs: number;
  /** The subscription to turns passed on other instances: made when a run first waits, kept until `close()`. */
  #turnsFeed: Promise<(() => void) | undefined> | undefined;

  constructor(options: RunLifecycleOptions) {
    this.logger = options.logger;
    this.leaseMs = options.leaseMs;
    this.claimMs = Math.min(options.leaseMs, TURN_CLAIM_MS);
    this.waitTimeoutMs = options.turnWaitTimeoutMs ?? TURN_WAIT_TIMEOUT_MS;
    this.#feed = options.feed;
    this.#announcesTurns = options.announcesTurns ?? false;
    this.#maxPollMs = Math.max(MIN_POLL_MS, options.turnPollMaxMs ?? MAX_POLL_MS);
  }

  /**
   * What this process holds for runs, right now: runs in flight, conversations with a run
   * waiting its turn here, turns held. All three go back to 0 when no run is in flight: a
   * process keeps nothing per conversation beyond its runs (for health checks and tests).
   */
  inFlight(): { runs: number; waitingConversations: number; heldTurns: number } {
    return { runs: this.#runs.size, waitingConversations: this.#waiting.size, heldTurns: this.#held.size };
  }

  /** Whether the service is closing: a run admitted now starts aborted. */
  get closed(): boolean {
    return this.#closed !== null;
  }

  /**
   * A new run's abort, aborted when the service closes. Call {@link release} once it is stored.
   * With its `runId`, {@link cancel} finds it on this instance, and from another one when it
   * is `stoppable`: this instance then listens on the feed (an SQLite feed polls while anyone
   * listens, so a service whose runs are never stopped from elsewhere does not listen).
   */
  admit(runId?: string, stoppable = false): RunAbort {
    const abort = new RunAbort();
    if (this.#closed) abort.abort(this.#closed);
    this.#runs.add(abort);
    if (runId !== undefined) {
      this.#byId.set(runId, abort);
      this.#idOf.set(abort, runId);
      if (stoppable) this.#followStops();
    }
    return abort;
  }

  /** The run is stored: `close()` no longer waits for it. Calling it again does nothing. */
  release(abort: RunAbort): void {
    if (!this.#runs.delete(abort)) return;
    const runId = this.#idOf.get(abort);
    if (runId !== undefined) this.#byId.delete(runId);
    if (this.#runs.size === 0 && this.#idle.length > 0) {
      const waiting = this.#idle;
      this.#idle = [];
      for (const wake of waiting) wake();
    }
  }

  /** Aborts the run when the request's client goes away; returns what stops following it. */
  followClient(request: Pick<IncomingRequest, "signal" | "onClientGone">, abort: RunAbort): () => void {
    if (request.onClientGone) return request.onClientGone((reason) => abort.abort(reason));
    const signal = request.signal;
    const onAbort = () => abort.abort(signal.reason);
    if (signal.aborted) {
      onAbort();
      return () => undefined;
    }
    signal.addEventListener("abort", onAbort, { once: true });
    return () => signal.removeEventListener("abort", onAbort);
  }

  /**
   * Keeps the run's lease on its turn until {@link releaseTurn}: every third of the lease,
   * one timer for the whole service (made on the first run, ended by `close()`) renews the
   * leases of the runs held that long. A timer per run would cost every run; most end well
   * before their first renewal.
   */
  holdTurn(turn: HeldTurn): HeldTurn {
    this.#held.add(turn);
    if (this.#renewals === undefined) {
      this.#renewals = setInterval(() => this.#renew(), this.leaseMs / 3);
      // Renewals must not keep a Node process alive on their own.
      (this.#renewals as { unref?: () => void }).unref?.();
    }
    return turn;
  }

  /** The run no longer needs its lease renewed (it is storing its outcome). */
  releaseTurn(turn: HeldTurn): void {
    this.#held.delete(turn);
  }

  #renew(): void {
    const now = Date.now();
    const leaseUntil = isoTimestamp(now + this.leaseMs);
    for (const turn of this.#held) {
      if (now - turn.sinceMs < this.leaseMs / 3) continue;
      turn.storage.renewTurn(turn.conversationId, turn.ticket, leaseUntil).then(
        (held) => {
          if (!held) this.logger.warn(`channelkit: run ${turn.runId} lost its conversation's turn (its lease lapsed)`);
        },
        (error) => this.logger.warn(`channelkit: run ${turn.runId} could not renew its conversation's turn`, error),
      );
    }
  }

  /**
   * Listens, once, for the turns that stores announce on the feed, so that a run waiting for a
   * turn another instance holds is woken when that instance's run ends. Until the
   * subscription is made, and should it fail, waiting runs poll as before.
   */
  #followTurns(): void {
    if (this.#turnsFeed !== undefined || this.#feed === undefined || !this.#announcesTurns || this.#closed) return;
    this.#turnsFeed = this.#feed
      .subscribe(TURN_PASSED_TOPIC, (conversationId) => this.turnPassed(conversationId))
      .catch((error: unknown) => {
        this.logger.warn("channelkit: could not follow the turns passed on other instances; waiting runs poll", error);
        return undefined;
      });
  }

  /**
   * Stops a run wherever it runs: here at once, on another instance on the same database
   * through the store's feed when the run is stoppable (a store without a feed has one
   * instance). Answers whether the run was running here. A run that ended, or that no
   * instance runs, is left as stored.
   */
  async cancel(runId: string, reason: unknown): Promise<boolean> {
    const local = this.#byId.get(runId);
    if (local) {
      local.abort(reason);
      return true;
    }
    await this.#feed?.publish(RUN_STOP_TOPIC, runId);
    return false;
  }

  #followStops(): void {
    if (this.#stopsFeed !== undefined || this.#feed === undefined || this.#closed) return;
    this.#stopsFeed = this.#feed
      .subscribe(RUN_STOP_TOPIC, (runId) => this.#byId.get(runId)?.abort(new DOMException("The run was cancelled from another instance.", "AbortError")))
      .catch((error: unknown) => {
        this.logger.warn("channelkit: this instance does not hear the runs stopped from other instances", error);
        return undefined;
      });
  }

  /** Wakes the runs of this process waiting their turn on `conversationId`. */
  turnPassed(conversationId: string): void {
    const waiting = this.#waiting.get(conversationId);
    if (!waiting) return;
    this.#waiting.delete(conversationId);
    for (const wake of waiting) wake();
  }

  /**
   * Sleeps until a run of `conversationId` ends in this process (or in another, when the store
   * announces turns), the `attempt`-th poll interval passes (growing from 2 ms to
   * `turnPollMaxMs`: the other processes' runs are otherwise seen only by looking), or
   * `abort` aborts (an abort that already did no longer ends the wait: an aborted run still
   * waits for its turn, see `driveRun`).
   */
  async awaitTurn(conversationId: string, attempt: number, abort: RunAbort): Promise<void> {
    this.#followTurns();
    const ms = Math.min(this.#maxPollMs, MIN_POLL_MS * 2 ** attempt);
    let waiting = this.#waiting.get(conversationId);
    if (!waiting) {
      waiting = new Set();
      this.#waiting.set(conversationId, waiting);
    }
    const set = waiting;
    let wake: () => void = () => {};
    let timer: ReturnType<typeof setTimeout> | undefined;
    await new Promise<void>((resolve) => {
      wake = resolve;
      set.add(wake);
      timer = setTimeout(wake, ms);
      abort.listen(wake);
    });
    clearTimeout(timer);
    abort.offAbort(wake);
    set.delete(wake);
    if (set.size === 0 && this.#waiting.get(conversationId) === set) this.#waiting.delete(conversationId);
  }

  /** Resolves once no run is in flight, or after `ms`, whichever comes first; runs go on either way. */
  async drain(ms: number): Promise<void> {
    if (this.#runs.size === 0 || ms <= 0) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await new Promise<void>((resolve) => {
      this.#idle.push(resolve);
      timer = setTimeout(resolve, ms);
    });
    clearTimeout(timer);
  }

  /** Aborts every run in flight and resolves once each is stored. */
  async close(reason = new Error("channelkit service closed")): Promise<void> {
    if (!this.#closed) {
      this.#closed = reason;
      for (const run of this.#runs) run.abort(reason);
    }
    while (this.#runs.size > 0)
      await new Promise<void>((resolve) => {
        this.#idle.push(resolve);
      });
    clearInterval(this.#renewals);
    this.#renewals = undefined;
    this.deadlines.close();
    const following = this.#turnsFeed;
    this.#turnsFeed = undefined;
    (await following)?.();
    const stops = this.#stopsFeed;
    this.#stopsFeed = undefined;
    (await stops)?.();
  }
}
