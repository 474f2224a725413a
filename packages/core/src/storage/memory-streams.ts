import type { RunStreamChunk, RunStreamRecord, RunStreamStore } from "./types.js";

/** The in-memory {@link RunStreamStore}, and the writes the memory storage's runs make in their own transactions. */
export interface MemoryRunStreams extends RunStreamStore {
  /** Opens a stream (what `beginRun` does with its ticket). */
  openNow(stream: Omit<RunStreamRecord, "ended" | "cancelRequestedAt">): void;
  /** Ends a stream at `at`, with its last events if it was followed (what `completeRun` does with its outcome). */
  endNow(runId: string, tail: string | null, at: string): void;
  /** Deletes the streams of these runs, chunks and all (what deleting their conversation does). */
  forget(runIds: Iterable<string>): void;
}

/** What the memory storage does to a recorded stream's run when the stream ends without it. */
export type EndRun = (runId: string, status: "cancelled" | "error", at: string, error: string) => void;

interface Stream {
  record: RunStreamRecord;
  /** Renewed at least once: the sweep watches it. */
  renewed: boolean;
  chunks: RunStreamChunk[];
  tail: string | null;
  endedAt: string | null;
  /** A reader followed it: its last events are kept. */
  followed: boolean;
}

/**
 * The {@link RunStreamStore} of the in-memory storage: streams in a map beside the runs, as
 * the SQL stores keep them on the runs' rows. `endRun` stores the run of a stream ended
 * without it (lapsed, or its completion not stored) if it is still running; a stream whose
 * run ended otherwise (`runEnded` gives when, e.g. its turn was taken over) has ended too; `checkOpen`
 * throws once the storage is closed.
 */
export function memoryRunStreams(endRun: EndRun, runEnded: (runId: string) => string | null, checkOpen: () => void): MemoryRunStreams {
  const streams = new Map<string, Stream>();
  /** The stream as stored: ended with its run, whatever ended it. */
  function current(stream: Stream): RunStreamRecord {
    const endedAt = stream.record.ended ? null : runEnded(stream.record.runId);
    if (endedAt !== null) {
      stream.record = { ...stream.record, ended: true };
      stream.endedAt = endedAt;
    }
    return stream.record;
  }
  function endNow(runId: string, tail: string | null, at: string, keepTail = false): void {
    checkOpen();
    const stream = streams.get(runId);
    if (!stream || stream.record.ended) return;
    stream.record = { ...stream.record, ended: true };
    stream.tail = keepTail || stream.followed ? tail : null;
    stream.endedAt = at;
  }
  return {
    forget(runIds) {
      checkOpen();
      for (const runId of runIds) streams.delete(runId);
    },
    openNow(stream) {
      checkOpen();
      if (streams.has(stream.runId)) throw new Error(`channelkit (memory storage): stream ${stream.runId} exists`);
      streams.set(stream.runId, {
        record: { ...stream, ended: false, cancelRequestedAt: null },
        renewed: false,
        chunks: [],
        tail: null,
        endedAt: null,
        followed: false,
      });
    },
    endNow,
    async append(runId, seq, frames) {
      checkOpen();
      const stream = streams.get(runId);
      if (!stream || stream.chunks.some((stored) => stored.seq === seq)) return;
      stream.chunks.push({ seq, frames });
    },
    async end(runId, frames, at, error) {
      const stream = streams.get(runId);
      const live = stream !== undefined && !current(stream).ended;
      endNow(runId, frames, at, true);
      if (live) endRun(runId, "error", at, error);
    },
    async follow(runId) {
      checkOpen();
      const stream = streams.get(runId);
      if (stream === undefined || current(stream).ended) return false;
      stream.followed = true;
      return true;
    },
    async findLive(conversationId) {
      checkOpen();
      let live: RunStreamRecord | null = null;
      for (const stream of streams.values()) {
        const record = current(stream);
        if (record.conversationId === conversationId && !record.ended && (!live || record.startedAt >= live.startedAt)) live = record;
      }
      return live ? { ...live } : null;
    },
    async read(runId, afterSeq) {
      checkOpen();
      const stream = streams.get(runId);
      if (!stream) return null;
      const record = { ...current(stream) };
      return {
        stream: record,
        chunks: stream.chunks.filter((chunk) => chunk.seq > afterSeq).map((chunk) => ({ ...chunk })),
        last: record.ended ? stream.tail : null,
      };
    },
    async renew(runIds, aliveUntil) {
      checkOpen();
      const cancelled: string[] = [];
      for (const runId of runIds) {
        const stream = streams.get(runId);
        if (!stream || current(stream).ended) continue;
        stream.record = { ...stream.record, aliveUntil };
        stream.renewed = true;
        if (stream.record.cancelRequestedAt !== null) cancelled.push(runId);
      }
      return cancelled;
    },
    async requestCancel(runId, at) {
      checkOpen();
      const stream = streams.get(runId);
      if (!stream || current(stream).ended) return false;
      stream.record = { ...stream.record, cancelRequestedAt: stream.record.cancelRequestedAt ?? at };
      return true;
    },
    async endLapsed(now, error, runId) {
      checkOpen();
      const ended: RunStreamRecord[] = [];
      for (const stream of runId === undefined ? streams.values() : [streams.get(runId)]) {
        if (!stream || current(stream).ended || stream.record.aliveUntil >= now) continue;
        if (runId === undefined && !stream.renewed) continue;
        endNow(stream.record.runId, null, now);
        endRun(stream.record.runId, "cancelled", now, error);
        ended.push({ ...stream.record });
      }
      return ended;
    },
    async prune(before) {
      checkOpen();
      // The chunks only: the stream, like its run's row, stays.
      for (const stream of streams.values()) {
        current(stream);
        if (stream.endedAt !== null && stream.endedAt < before) stream.chunks = [];
      }
    },
  };
}
