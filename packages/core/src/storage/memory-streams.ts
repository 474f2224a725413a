import type { RunStreamChunk, RunStreamRecord, RunStreamStore } from "./types.js";

/** The in-memory {@link RunStreamStore}, and the writes the memory storage's runs make in their own transactions. */
export interface MemoryRunStreams extends RunStreamStore {
  /** Opens a stream (what `beginRun` does with its ticket). */
  openNow(stream: Omit<RunStreamRecord, "ended" | "cancelRequestedAt">): void;
  /** Appends a chunk, ending the stream with it when `end` (what `completeRun` does with its outcome). */
  appendNow(runId: string, chunk: RunStreamChunk, end: boolean): void;
}

/**
 * The {@link RunStreamStore} of the in-memory storage: streams in a map, as the SQL stores
 * keep them in `run_streams` and `run_stream_chunks`. `cancelRun` stores a lapsed stream's
 * run `cancelled` if it is still running; `checkOpen` throws once the storage is closed.
 */
export function memoryRunStreams(cancelRun: (runId: string, at: string, error: string) => void, checkOpen: () => void): MemoryRunStreams {
  const streams = new Map<string, { record: RunStreamRecord; chunks: RunStreamChunk[] }>();
  function openNow(stream: Omit<RunStreamRecord, "ended" | "cancelRequestedAt">): void {
    checkOpen();
    if (streams.has(stream.runId)) throw new Error(`channelkit (memory storage): stream ${stream.runId} exists`);
    streams.set(stream.runId, { record: { ...stream, ended: false, cancelRequestedAt: null }, chunks: [] });
  }
  function appendNow(runId: string, chunk: RunStreamChunk, end: boolean): void {
    checkOpen();
    const stream = streams.get(runId);
    if (!stream) return;
    // A stream ended by another instance (its owner thought lost) keeps its last chunk.
    if (stream.chunks.some((stored) => stored.seq === chunk.seq)) return;
    stream.chunks.push({ ...chunk });
    if (end) stream.record = { ...stream.record, ended: true };
  }
  return {
    openNow,
    appendNow,
    async open(stream) {
      openNow(stream);
    },
    async append(runId, seq, frames, end) {
      appendNow(runId, { seq, frames }, end);
    },
    async findLive(conversationId) {
      checkOpen();
      let live: RunStreamRecord | null = null;
      for (const { record } of streams.values()) {
        if (record.conversationId === conversationId && !record.ended && (!live || record.startedAt >= live.startedAt)) live = record;
      }
      return live ? { ...live } : null;
    },
    async read(runId, afterSeq) {
      checkOpen();
      const stream = streams.get(runId);
      if (!stream) return null;
      return { stream: { ...stream.record }, chunks: stream.chunks.filter((chunk) => chunk.seq > afterSeq).map((chunk) => ({ ...chunk })) };
    },
    async renew(runIds, aliveUntil) {
      checkOpen();
      const cancelled: string[] = [];
      for (const runId of runIds) {
        const stream = streams.get(runId);
        if (!stream || stream.record.ended) continue;
        stream.record = { ...stream.record, aliveUntil };
        if (stream.record.cancelRequestedAt !== null) cancelled.push(runId);
      }
      return cancelled;
    },
    async requestCancel(runId, at) {
      checkOpen();
      const stream = streams.get(runId);
      if (!stream || stream.record.ended) return false;
      stream.record = { ...stream.record, cancelRequestedAt: stream.record.cancelRequestedAt ?? at };
      return true;
    },
    async endLapsed(now, frames, error) {
      checkOpen();
      const ended: RunStreamRecord[] = [];
      for (const stream of streams.values()) {
        if (stream.record.ended || stream.record.aliveUntil >= now) continue;
        stream.chunks.push({ seq: Math.max(0, ...stream.chunks.map((chunk) => chunk.seq)) + 1, frames });
        stream.record = { ...stream.record, ended: true };
        cancelRun(stream.record.runId, now, error);
        ended.push({ ...stream.record });
      }
      return ended;
    },
    async prune(before) {
      checkOpen();
      for (const [runId, stream] of streams) if (stream.record.ended && stream.record.aliveUntil < before) streams.delete(runId);
    },
  };
}
