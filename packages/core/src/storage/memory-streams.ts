import type { RunStreamChunk, RunStreamRecord, RunStreamStore } from "./types.js";

/**
 * The {@link RunStreamStore} of the in-memory storage: streams in a map, as the SQL stores
 * keep them in `run_streams` and `run_stream_chunks`. `cancelRun` stores a lapsed stream's
 * run `cancelled` if it is still running; `checkOpen` throws once the storage is closed.
 */
export function memoryRunStreams(cancelRun: (runId: string, at: string, error: string) => void, checkOpen: () => void): RunStreamStore {
  const streams = new Map<string, { record: RunStreamRecord; chunks: RunStreamChunk[] }>();
  return {
    async open(stream, frames) {
      checkOpen();
      if (streams.has(stream.runId)) throw new Error(`channelkit (memory storage): stream ${stream.runId} exists`);
      streams.set(stream.runId, { record: { ...stream, ended: false, cancelRequestedAt: null }, chunks: [{ seq: 0, frames }] });
    },
    async append(runId, seq, frames, end) {
      checkOpen();
      const stream = streams.get(runId);
      if (!stream) return;
      if (stream.chunks.some((chunk) => chunk.seq === seq)) throw new Error(`channelkit (memory storage): chunk ${seq} of stream ${runId} exists`);
      stream.chunks.push({ seq, frames });
      if (end) stream.record = { ...stream.record, ended: true };
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
        stream.chunks.push({ seq: Math.max(...stream.chunks.map((chunk) => chunk.seq)) + 1, frames });
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
