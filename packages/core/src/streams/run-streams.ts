import type { Logger } from "../context.js";
import type { Reply, ReplyChunk } from "../http/reply.js";
import { PushStream } from "../http/sse.js";
import type { RunSteps, StreamEnding } from "../runs/driver.js";
import type { RunOutcome } from "../runs/outcome.js";
import type { StartedRun } from "../runs/start.js";
import { isoTimestamp } from "../runs/timestamp.js";
import { closingFrame, dataRunFrame, UI_STREAM_HEADERS, uiMessageStream } from "../runs/ui-stream.js";
import { ABANDONED_RUN_ERROR } from "../storage/records.js";
import type { ChannelRecord, LiveFeed, RunStreamRecord, RunStreamStore } from "../storage/types.js";

/** Longest a recorded stream's events wait before they are written, in ms: the cost is one write per this much streaming, not one per event. */
const FLUSH_MS = 50;
/** How long the chunks of an ended stream are kept for followers still reading it, in ms. */
const KEEP_ENDED_MS = 60_000;
/** How often a follower on another instance than the run's reads what was recorded, in ms (one indexed read). */
const FOLLOW_POLL_MS = 100;

/** The largest chunk number (a 32-bit integer column): reading after it reads the stream and its last events alone. */
const LAST_SEQ = 2 ** 31 - 1;

/** The last event of a stream whose instance stopped before it ended (no last events were recorded). */
const LOST_FRAME = `data: ${JSON.stringify({ type: "error", errorText: "The reply was interrupted: the server running it stopped." })}\n\n`;
/** Why a run is stored `error` when its outcome could not be, though its stream's end was. */
const UNSTORED_ERROR = "The run's outcome could not be stored.";

/** The feed topic on which an instance asks the one running a stream to cancel its run (the message is the run id). */
const CANCEL_TOPIC = "run-cancel";

/**
 * Resumable streams (docs/streaming.md): a streamed run of a channel with
 * `resumableStreams` is recorded in the storage's {@link RunStreamStore} as it goes, and
 * goes on when its client leaves. The stream opens with the run's ticket and ends with its
 * outcome, in the run's own writes; a run streaming longer than {@link FLUSH_MS} writes its
 * events in chunks between. Any instance on the database answers a reconnecting client with
 * the whole stream so far, then the rest as it is recorded (followers here are woken by the
 * recording; elsewhere they read every {@link FOLLOW_POLL_MS}), and can cancel it (through
 * the live feed). Each instance renews its streams and ends those of instances that stopped.
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
  /** Readers here of a stream recorded here, woken when it records a chunk, by run id. */
  readonly #wakers = new Map<string, Set<() => void>>();
  /** The recordings whose events wait to be written. */
  readonly #flushes = new Flushes();
  /** Recordings until their last chunk is written: `settled()` waits for them. */
  readonly #pumps = new Set<Promise<void>>();
  /** The one subscription to cancels from other instances, made by the first recording. */
  #cancels: Promise<() => void> | undefined;
  #timer: ReturnType<typeof setInterval> | undefined;
  #closed = false;

  constructor(options: { store: RunStreamStore | undefined; feed: LiveFeed; logger: Logger; leaseMs: number }) {
    this.#store = options.store;
    this.#feed = options.feed;
    this.#logger = options.logger;
    this.#leaseMs = options.leaseMs;
    if (this.#store) {
      // Renewals, cancels whose message was lost, and streams of stopped instances: every
      // third of the lease, on every instance, whether or not it records anything.
      this.#timer = setInterval(() => void this.#maintain(), this.#leaseMs / 3);
      (this.#timer as { unref?: () => void }).unref?.();
    }
  }

  /** Whether the runs of `channel` are recorded: it has resumable streams, and the storage keeps them. */
  records(channel: Pick<ChannelRecord, "resumableStreams">): boolean {
    return channel.resumableStreams && this.#store !== undefined;
  }

  /**
   * Records the stream of a run started `recorded` and answers its client with it. The run
   * no longer follows that client: it runs to its end (or its time limit) whether it stays.
   */
  record(started: StartedRun): Reply {
    const client = new PushStream(() => undefined);
    this.#record(started, client);
    return { status: 200, headers: { ...UI_STREAM_HEADERS }, body: client };
  }

  /**
   * Records a run answered as JSON (started `recorded` and `live`: its stream is what a
   * reconnecting client gets) and resolves with its outcome once stored.
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
    await this.#record({ ...started, steps }, null);
    if (outcome === undefined) throw failure;
    return outcome;
  }

  /** Pumps the run's stream to its end, recording it; resolves once its last chunk is written. */
  #record(started: StartedRun, client: PushStream | null): Promise<void> {
    const store = this.#store as RunStreamStore;
    this.#cancels ??= this.#feed
      .subscribe(CANCEL_TOPIC, (runId) => this.#recording.get(runId)?.cancel())
      .catch((error: unknown) => {
        // Cancels from elsewhere then arrive with the renewals; the next recording listens again.
        this.#logger.warn("channelkit: this instance does not hear cancels from other instances", error);
        this.#cancels = undefined;
        return () => undefined;
      });
    const recording = new Recording(started, store, this.#logger, client, this.#flushes, this.#leaseMs, () => this.#wake(started.runId));
    // Its first tick renews it, which puts it in the sweep's watch: a stream that ended
    // sooner costs the sweep nothing (docs/streaming.md).
    this.#flushes.add(recording);
    started.endStream(recording);
    this.#recording.set(started.runId, recording);
    const pumped = recording.pump(uiMessageStream(started, this.#logger));
    this.#pumps.add(pumped);
    void pumped.finally(() => {
      this.#pumps.delete(pumped);
      this.#recording.delete(started.runId);
    });
    return pumped;
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
      await store.endLapsed(isoTimestamp(Date.now()), ABANDONED_RUN_ERROR, live.runId);
      live = await store.findLive(conversationId);
    }
    if (!live || this.#closed) return noContent();
    // Followed before its first byte: its completion then keeps its last events for this reader.
    if (store.follow && !(await store.follow(live.runId))) return noContent();
    return { status: 200, headers: { ...UI_STREAM_HEADERS }, body: this.#follow(store, live) };
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
    else await this.#feed.publish(CANCEL_TOPIC, live.runId);
    return { runId: live.runId, ended: await this.#awaitEnd(store, live.runId, waitMs) };
  }

  /** Ends the followers and answers no new ones; the recordings end with their runs. */
  close(): void {
    this.#closed = true;
    for (const follower of this.#following) follower.end();
    this.#following.clear();
  }

  /**
   * Resolves once every recording has written its last chunk (their runs ended first), then
   * stops renewing and listening: what `service.close()` waits for after the runs.
   */
  async settled(): Promise<void> {
    while (this.#pumps.size > 0) await Promise.allSettled([...this.#pumps]);
    clearInterval(this.#timer);
    const stop = await this.#cancels?.catch(() => undefined);
    stop?.();
  }

  #follow(store: RunStreamStore, live: RunStreamRecord): PushStream {
    let poll: ReturnType<typeof setInterval> | undefined;
    let unwake: () => void = () => undefined;
    const stream = new PushStream(() => {
      clearInterval(poll);
      unwake();
      this.#following.delete(stream);
    });
    this.#following.add(stream);
    stream.push(dataRunFrame(live.runId, live.conversationId));
    let after = 0;
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
            stream.push(found?.last ?? LOST_FRAME);
            stream.end();
            return;
          }
          if (found.stream.aliveUntil < isoTimestamp(Date.now())) await store.endLapsed(isoTimestamp(Date.now()), ABANDONED_RUN_ERROR, live.runId);
        } while (again && !stream.ended);
      } catch (error) {
        this.#logger.warn(`channelkit: a resumed stream could not read run ${live.runId}`, error);
      } finally {
        reading = false;
      }
    };
    // A stream recorded here wakes its readers; one recorded elsewhere is read every poll.
    unwake = this.#onWrite(live.runId, () => void read());
    poll = setInterval(() => void read(), FOLLOW_POLL_MS);
    (poll as { unref?: () => void }).unref?.();
    void read();
    return stream;
  }

  /** Calls `listener` each time the stream of `runId`, recorded here, writes; returns what stops it. */
  #onWrite(runId: string, listener: () => void): () => void {
    let set = this.#wakers.get(runId);
    if (!set) {
      set = new Set();
      this.#wakers.set(runId, set);
    }
    const listeners = set;
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0 && this.#wakers.get(runId) === listeners) this.#wakers.delete(runId);
    };
  }

  #wake(runId: string): void {
    for (const listener of [...(this.#wakers.get(runId) ?? [])]) listener();
  }

  /** Resolves true once the stream has ended, false after `waitMs`. */
  async #awaitEnd(store: RunStreamStore, runId: string, waitMs: number): Promise<boolean> {
    const deadline = Date.now() + waitMs;
    let ring: () => void = () => undefined;
    const stop = this.#onWrite(runId, () => ring());
    try {
      for (;;) {
        const found = await store.read(runId, LAST_SEQ);
        if (!found || found.stream.ended) return true;
        const left = deadline - Date.now();
        if (left <= 0) return false;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.min(left, FOLLOW_POLL_MS));
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
      await store.endLapsed(isoTimestamp(Date.now()), ABANDONED_RUN_ERROR);
      await store.prune(isoTimestamp(Date.now() - KEEP_ENDED_MS));
    } catch (error) {
      if (!this.#closed) this.#logger.warn("channelkit: resumable streams could not be renewed or swept", error);
    }
  }
}

/**
 * The recordings whose events wait to be written: one timer for all, every
 * {@link FLUSH_MS} while any waits, rather than one per stream (a stream that lives a few
 * milliseconds would pay for setting one up and clearing it). A tick writes the recordings
 * that were already waiting at the tick before, so events wait one to two periods: a stream
 * that ends within {@link FLUSH_MS} of its first event writes nothing of its own, whenever
 * the ticks fall.
 */
class Flushes {
  /** Waiting since the last tick. */
  #fresh = new Set<Recording>();
  /** Waiting since before the last tick: the next tick writes them. */
  #due = new Set<Recording>();
  #timer: ReturnType<typeof setInterval> | undefined;

  add(recording: Recording): void {
    if (this.#due.has(recording)) return;
    this.#fresh.add(recording);
    if (this.#timer) return;
    this.#timer = setInterval(() => this.#tick(), FLUSH_MS);
    (this.#timer as { unref?: () => void }).unref?.();
  }

  delete(recording: Recording): void {
    this.#fresh.delete(recording);
    this.#due.delete(recording);
  }

  #tick(): void {
    if (this.#fresh.size === 0 && this.#due.size === 0) {
      clearInterval(this.#timer);
      this.#timer = undefined;
      return;
    }
    const due = this.#due;
    this.#due = this.#fresh;
    this.#fresh = new Set();
    for (const recording of due) void recording.flush(false);
  }
}

/**
 * One run's stream being recorded: pulled to its end whatever its client does, each event
 * pushed to the client while it stays, written in chunks of at most {@link FLUSH_MS} while
 * the run goes on, and its last chunk handed to the run's completion ({@link StreamEnding}).
 */
class Recording implements StreamEnding {
  #pending: string[] = [];
  /** The last chunk written. */
  #seq = 0;
  #writing: Promise<void> = Promise.resolve();
  /** Whether this instance renewed the stream yet (once it has, the sweep watches it). */
  #renewed = false;
  /** Whether the run's completion is writing (or wrote) the last events. */
  #ending = false;
  /** Whether the run's completion stored the last chunk. */
  #storedWithRun = false;

  constructor(
    private readonly started: StartedRun,
    private readonly store: RunStreamStore,
    private readonly logger: Logger,
    /** Who asked for the stream, while it listens; null for a run answered as JSON. */
    private readonly client: PushStream | null,
    private readonly flushes: Flushes,
    private readonly leaseMs: number,
    /** Tells this instance's followers that a chunk was written. */
    private readonly written: () => void,
  ) {}

  cancel(): void {
    this.started.cancel(new DOMException("The run was cancelled.", "AbortError"));
  }

  async lastEvents(outcome: RunOutcome): Promise<string> {
    // From here the events not yet written are the run's completion's to write.
    this.#ending = true;
    this.flushes.delete(this);
    await this.#writing;
    return this.#pending.join("") + closingFrame(outcome);
  }

  stored(): void {
    this.#pending = [];
    this.#storedWithRun = true;
    this.written();
  }

  async pump(source: { pull(): ReplyChunk | null | Promise<ReplyChunk | null>; readonly finished: boolean }): Promise<void> {
    let last: string | null = null;
    // The first event, data-run, is not recorded: a follower makes it from the stream's ids.
    // It is ready at once and pushed at once, before the client's first read, so that the
    // status line and it leave in one packet (see ReplyStream.pull).
    const first = source.pull();
    this.client?.push((first instanceof Promise ? await first : first) as string);
    for (;;) {
      const frame = (await source.pull()) as string | null;
      if (frame === null) break;
      // The last event reaches the client once recorded: once a client has it, the run is
      // in flight nowhere, and a reconnect is answered 204.
      if (source.finished) {
        last = frame;
        break;
      }
      this.client?.push(frame);
      this.#pending.push(frame);
      this.flushes.add(this);
    }
    this.flushes.delete(this);
    if (!this.#storedWithRun) {
      // The run's completion did not record the end (its storage failed): written here.
      if (last !== null) this.#pending.push(last);
      await this.flush(true);
    }
    if (last !== null) this.client?.push(last);
    this.client?.end();
  }

  /** Renews the stream a first time (the instance's renewals do it after), honouring a cancel asked for meanwhile. */
  async #renew(): Promise<void> {
    try {
      const cancelled = await this.store.renew([this.started.runId], isoTimestamp(Date.now() + this.leaseMs));
      this.#renewed = true;
      if (cancelled.length > 0) this.cancel();
    } catch (error) {
      this.logger.warn(`channelkit: the stream of run ${this.started.runId} could not be renewed`, error);
    }
  }

  /**
   * Writes what is pending as the next chunk, after the write before it: chunks stay in
   * order. A failed write keeps its events for the next one (the database may be back by
   * then); the end is tried a few times before the stream is left to the sweep.
   */
  flush(end: boolean): Promise<void> {
    this.#writing = this.#writing.then(async () => {
      if (!end && !this.#renewed && !this.#ending) await this.#renew();
      for (let attempt = 0; attempt < (end ? 3 : 1); attempt++) {
        if (!end && (this.#pending.length === 0 || this.#ending)) return;
        const frames = this.#pending.join("");
        this.#pending = [];
        try {
          if (end) await this.store.end(this.started.runId, frames, isoTimestamp(Date.now()), UNSTORED_ERROR);
          else await this.store.append(this.started.runId, this.#seq + 1, frames);
        } catch (error) {
          this.#pending.unshift(frames);
          this.logger.warn(`channelkit: the stream of run ${this.started.runId} could not be recorded`, error);
          if (end) await new Promise((resolve) => setTimeout(resolve, 500));
          continue;
        }
        this.#seq += 1;
        this.written();
        return;
      }
      if (!end) {
        // Tried again a little later.
        const retry = setTimeout(() => this.flushes.add(this), FLUSH_MS * 9);
        (retry as { unref?: () => void }).unref?.();
      }
    });
    return this.#writing;
  }
}

function noContent(): Reply {
  return { status: 204, headers: {}, body: null };
}
