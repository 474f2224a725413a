import type { Logger } from "../context.js";
import type { Reply, ReplyChunk } from "../http/reply.js";
import { PushStream } from "../http/sse.js";
import { isoTimestamp } from "../runs/timestamp.js";
import type { RunSteps } from "../runs/driver.js";
import type { RunOutcome } from "../runs/outcome.js";
import type { StartedRun } from "../runs/start.js";
import { UI_STREAM_HEADERS, uiMessageStream } from "../runs/ui-stream.js";
import type { LiveFeed, RunStreamRecord, RunStreamStore } from "../storage/types.js";

/** Longest a recorded stream's events wait before they are written, in ms: the cost is one write per this much streaming, not one per event. */
const FLUSH_MS = 50;
/** How long an ended stream is kept for followers still reading it, in ms. */
const KEEP_ENDED_MS = 60_000;
/** How often a follower reads its stream when no doorbell rang (a doorbell lost with a connection), in ms. */
const FOLLOW_POLL_MS = 1000;

/** The largest chunk number (a 32-bit integer column): reading after it reads the stream alone. */
const LAST_SEQ = 2 ** 31 - 1;

/** The last event of a stream whose instance stopped before it ended. */
const LOST_FRAME = `data: ${JSON.stringify({ type: "error", errorText: "The reply was interrupted: the server running it stopped." })}\n\n`;
/** Why its run is stored `cancelled`. */
const LOST_ERROR = "The run was abandoned: the instance running it stopped before it ended.";

/** The feed topic that rings when a stream has a new chunk. */
const chunkTopic = (runId: string) => `run-stream:${runId}`;
/** The feed topic that asks the instance running a stream to cancel its run. */
const cancelTopic = (runId: string) => `run-cancel:${runId}`;

/**
 * Resumable streams (docs/streaming.md): a streamed run of a channel with
 * `resumableStreams` is recorded in the storage's {@link RunStreamStore} as it goes, chunk
 * by chunk, and goes on when its client leaves; any instance on the database answers a
 * reconnecting client with the whole stream so far, then the rest live (a doorbell on the
 * live feed per chunk), and can cancel it. Each instance renews its streams and ends those
 * of instances that stopped.
 */
export class RunStreams {
  readonly #store: RunStreamStore | undefined;
  readonly #feed: LiveFeed;
  readonly #logger: Logger;
  readonly #leaseMs: number;
  /** This instance's streams being recorded, by run id. */
  readonly #recording = new Map<string, Recording>();
  /** Followers open here: `close()` ends them. */
  readonly #following = new Set<PushStream>();
  /** Recordings until their last chunk is written: `settled()` waits for them. */
  readonly #pumps = new Set<Promise<void>>();
  #timer: ReturnType<typeof setInterval> | undefined;
  #closed = false;

  constructor(options: { store: RunStreamStore | undefined; feed: LiveFeed; logger: Logger; leaseMs: number }) {
    this.#store = options.store;
    this.#feed = options.feed;
    this.#logger = options.logger;
    this.#leaseMs = options.leaseMs;
    if (this.#store) {
      // Renewals, cancels asked while a doorbell was lost, and streams of stopped instances:
      // every third of the lease, on every instance, whether or not it records anything.
      this.#timer = setInterval(() => void this.#maintain(), this.#leaseMs / 3);
      (this.#timer as { unref?: () => void }).unref?.();
    }
  }

  /** Whether streams can be recorded here (the storage keeps them). */
  get available(): boolean {
    return this.#store !== undefined;
  }

  /**
   * Records a started run's stream and answers its client with it. The run no longer
   * follows that client: it runs to its end (or its time limit) whether the client stays.
   */
  async record(started: StartedRun): Promise<Reply> {
    const client = new PushStream(() => undefined);
    await this.#record(started, client);
    return { status: 200, headers: { ...UI_STREAM_HEADERS }, body: client };
  }

  /**
   * Records a run answered as JSON (start it `live`: its stream is what a reconnecting
   * client gets) and resolves with its outcome once it is stored and its stream recorded.
   */
  async recordToEnd(started: StartedRun): Promise<RunOutcome> {
    let outcome: RunOutcome | undefined;
    let failure: unknown;
    const steps: RunSteps = {
      async next() {
        try {
          const step = await started.steps.next();
          if (step.done) outcome = step.value;
          return step;
        } catch (error) {
          failure = error;
          throw error;
        }
      },
    };
    const { pumped } = await this.#record({ ...started, steps }, null);
    await pumped;
    if (outcome === undefined) throw failure;
    return outcome;
  }

  /**
   * Opens the run's stream in the store, then pumps it to its end: resolves once the stream
   * is open, with the pump (in an object: a promise resolving to a promise would wait for it).
   */
  async #record(started: StartedRun, client: PushStream | null): Promise<{ pumped: Promise<void> }> {
    const store = this.#store as RunStreamStore;
    const source = uiMessageStream(started, (error) => this.#logger.error(`channelkit: run ${started.runId} could not be stored`, error));
    const first = (await source.pull()) as string;
    const nowMs = Date.now();
    try {
      await store.open(
        { runId: started.runId, conversationId: started.conversationId, startedAt: isoTimestamp(nowMs), aliveUntil: isoTimestamp(nowMs + this.#leaseMs) },
        first,
      );
    } catch (error) {
      // Nothing was sent: the run is cancelled (and stored so, if the database lets it) and the request fails.
      source.cancel();
      throw error;
    }
    client?.push(first);
    const recording = new Recording(started, store, this.#feed, this.#logger, client);
    this.#recording.set(started.runId, recording);
    // Cancels from other instances: the doorbell, with the renewal's look as the fallback.
    void this.#feed
      .subscribe(cancelTopic(started.runId), () => started.cancel())
      .then(
        (stop) => (recording.ended ? stop() : recording.onEnd(stop)),
        (error) => this.#logger.warn(`channelkit: run ${started.runId} does not hear cancels from other instances`, error),
      );
    const pumped = recording.pump(source);
    this.#pumps.add(pumped);
    void pumped.finally(() => {
      this.#pumps.delete(pumped);
      this.#recording.delete(started.runId);
    });
    return { pumped };
  }

  /**
   * The stream of the conversation's run in flight, from its first event: 204 when none is.
   * A stream whose instance stopped is ended here rather than followed.
   */
  async resume(conversationId: string): Promise<Reply> {
    const store = this.#store;
    if (!store) return noContent();
    let live = await store.findLive(conversationId);
    if (live && live.aliveUntil < isoTimestamp(Date.now())) {
      await this.#endLapsed();
      live = await store.findLive(conversationId);
    }
    if (!live || this.#closed) return noContent();
    return { status: 200, headers: { ...UI_STREAM_HEADERS }, body: await this.#follow(store, live) };
  }

  /**
   * Stops the conversation's run in flight, from any instance, and waits (at most `waitMs`)
   * for it to be stored. Null when no run of the conversation is in flight.
   */
  async cancel(conversationId: string, waitMs = 10_000): Promise<{ runId: string; ended: boolean } | null> {
    const store = this.#store;
    if (!store) return null;
    const live = await store.findLive(conversationId);
    if (!live || !(await store.requestCancel(live.runId, isoTimestamp(Date.now())))) return null;
    const local = this.#recording.get(live.runId);
    if (local) local.cancel();
    else await this.#feed.publish(cancelTopic(live.runId), "cancel");
    const ended = await this.#awaitEnd(store, live.runId, waitMs);
    return { runId: live.runId, ended };
  }

  /**
   * Resolves once every recording has written its last chunk (their runs ended first), then
   * stops renewing: what `service.close()` waits for after the runs.
   */
  async settled(): Promise<void> {
    while (this.#pumps.size > 0) await Promise.allSettled([...this.#pumps]);
    clearInterval(this.#timer);
  }

  /** Ends the followers and answers no new ones; the recordings end with their runs. */
  close(): void {
    this.#closed = true;
    for (const follower of this.#following) follower.end();
    this.#following.clear();
  }

  async #follow(store: RunStreamStore, live: RunStreamRecord): Promise<PushStream> {
    let stop: () => void = () => undefined;
    let poll: ReturnType<typeof setInterval> | undefined;
    const stream = new PushStream(() => {
      stop();
      clearInterval(poll);
      this.#following.delete(stream);
    });
    this.#following.add(stream);
    let after = -1;
    let reading = false;
    let again = false;
    const read = async (): Promise<void> => {
      if (reading) {
        again = true;
        return;
      }
      reading = true;
      try {
        do {
          again = false;
          const found = await store.read(live.runId, after);
          if (stream.ended) return;
          for (const chunk of found?.chunks ?? []) {
            stream.push(chunk.frames);
            after = chunk.seq;
          }
          if (!found || found.stream.ended) {
            stream.end();
            return;
          }
          if (found.stream.aliveUntil < isoTimestamp(Date.now())) await this.#endLapsed();
        } while (again && !stream.ended);
      } catch (error) {
        this.#logger.warn(`channelkit: a resumed stream could not read run ${live.runId}`, error);
      } finally {
        reading = false;
      }
    };
    // Listening before the first read: a chunk written in between rings.
    stop = await this.#feed.subscribe(chunkTopic(live.runId), () => void read());
    if (stream.ended) stop();
    poll = setInterval(() => void read(), FOLLOW_POLL_MS);
    (poll as { unref?: () => void }).unref?.();
    await read();
    return stream;
  }

  /** Resolves true once the stream has ended, false after `waitMs`. */
  async #awaitEnd(store: RunStreamStore, runId: string, waitMs: number): Promise<boolean> {
    const deadline = Date.now() + waitMs;
    let ring: () => void = () => undefined;
    const stop = await this.#feed.subscribe(chunkTopic(runId), () => ring());
    try {
      for (;;) {
        const found = await store.read(runId, LAST_SEQ);
        if (!found || found.stream.ended) return true;
        const left = deadline - Date.now();
        if (left <= 0) return false;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.min(left, 200));
          ring = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
    } finally {
      stop();
    }
  }

  async #maintain(): Promise<void> {
    const store = this.#store as RunStreamStore;
    try {
      const local = [...this.#recording.keys()];
      const cancelled = await store.renew(local, isoTimestamp(Date.now() + this.#leaseMs));
      for (const runId of cancelled) this.#recording.get(runId)?.cancel();
      await this.#endLapsed();
      await store.prune(isoTimestamp(Date.now() - KEEP_ENDED_MS));
    } catch (error) {
      if (!this.#closed) this.#logger.warn("channelkit: resumable streams could not be renewed or swept", error);
    }
  }

  /** Ends the streams of instances that stopped, and rings their followers. */
  async #endLapsed(): Promise<void> {
    const store = this.#store as RunStreamStore;
    const ended = await store.endLapsed(isoTimestamp(Date.now()), LOST_FRAME, LOST_ERROR);
    for (const stream of ended) await this.#feed.publish(chunkTopic(stream.runId), "end").catch(() => undefined);
  }
}

/**
 * One run's stream being recorded: pulled to its end whatever its client does, each event
 * pushed to the client while it stays, and written in chunks of at most {@link FLUSH_MS}.
 */
class Recording {
  ended = false;
  #pending: string[] = [];
  #seq = 0;
  #writing: Promise<void> = Promise.resolve();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #onEnd: (() => void)[] = [];

  constructor(
    private readonly started: StartedRun,
    private readonly store: RunStreamStore,
    private readonly feed: LiveFeed,
    private readonly logger: Logger,
    /** Who asked for the stream, while it listens; null for a run answered as JSON. */
    private readonly client: PushStream | null,
  ) {}

  onEnd(listener: () => void): void {
    if (this.ended) listener();
    else this.#onEnd.push(listener);
  }

  cancel(): void {
    this.started.cancel(new DOMException("The run was cancelled.", "AbortError"));
  }

  async pump(source: { pull(): ReplyChunk | null | Promise<ReplyChunk | null>; readonly finished: boolean }): Promise<void> {
    let last: string | null = null;
    for (;;) {
      const frame = (await source.pull()) as string | null;
      if (frame === null) break;
      this.#pending.push(frame);
      // The last event is recorded before its client sees it: once a client has it, the run
      // is in flight nowhere, and a reconnect is answered 204.
      if (source.finished) {
        last = frame;
        break;
      }
      this.client?.push(frame);
      this.#timer ??= setTimeout(() => this.#flush(false), FLUSH_MS);
    }
    clearTimeout(this.#timer);
    await this.#flush(true);
    if (last !== null) this.client?.push(last);
    this.client?.end();
    this.ended = true;
    for (const listener of this.#onEnd) listener();
    this.#onEnd = [];
  }

  /**
   * Writes what is pending as the next chunk, after the write before it: chunks stay in
   * order. A failed write keeps its events for the next one (the database may be back by
   * then); the end is tried a few times before the stream is left to the sweep.
   */
  #flush(end: boolean): Promise<void> {
    this.#timer = undefined;
    this.#writing = this.#writing.then(async () => {
      for (let attempt = 0; attempt < (end ? 3 : 1); attempt++) {
        if (this.#pending.length === 0 && !end) return;
        const frames = this.#pending.join("");
        this.#pending = [];
        try {
          await this.store.append(this.started.runId, this.#seq + 1, frames, end);
        } catch (error) {
          this.#pending.unshift(frames);
          this.logger.warn(`channelkit: the stream of run ${this.started.runId} could not be recorded`, error);
          if (end) await new Promise((resolve) => setTimeout(resolve, 500));
          continue;
        }
        this.#seq += 1;
        // A lost doorbell costs a follower one poll, not the chunk.
        await this.feed.publish(chunkTopic(this.started.runId), String(this.#seq)).catch(() => undefined);
        return;
      }
      if (!end) this.#timer ??= setTimeout(() => this.#flush(false), FLUSH_MS * 10);
    });
    return this.#writing;
  }
}

function noContent(): Reply {
  return { status: 204, headers: {}, body: null };
}
