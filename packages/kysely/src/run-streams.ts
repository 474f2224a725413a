import type { RunStreamRecord, RunStreamStore } from "@channelkit/core";
import type { Kysely, Selectable } from "kysely";
import { type Executor, rowsOf } from "./executor.js";
import type { Database, RunStreamsTable } from "./schema.js";

/**
 * The {@link RunStreamStore} on `run_streams` and `run_stream_chunks` (migration
 * `0009_run_streams`): one insert per chunk of events. A run's own writes open and end its
 * stream (see `beginRun` and `completeRun`); the row is also written when its instance renews
 * it (one statement for all its streams).
 */
export function kyselyRunStreams(db: Kysely<Database>, exec: Executor): RunStreamStore {
  const insertChunk = (runId: string, seq: number, frames: string) =>
    db
      .insertInto("run_stream_chunks")
      .values({ run_id: runId, seq, frames })
      // A stream ended by another instance (its owner thought lost) keeps its last chunk.
      .onConflict((oc) => oc.columns(["run_id", "seq"]).doNothing())
      .compile();
  return {
    async open(stream) {
      await exec.rows(
        db
          .insertInto("run_streams")
          .values({ run_id: stream.runId, conversation_id: stream.conversationId, started_at: stream.startedAt, ended: 0, alive_until: stream.aliveUntil })
          .compile(),
      );
    },

    async append(runId, seq, frames, end) {
      if (!end) {
        await exec.rows(insertChunk(runId, seq, frames));
        return;
      }
      await exec.transaction(function* () {
        yield* rowsOf(insertChunk(runId, seq, frames));
        yield* rowsOf(db.updateTable("run_streams").set({ ended: 1 }).where("run_id", "=", runId).compile());
      });
    },

    async findLive(conversationId) {
      const [row] = await exec.rows(
        db
          .selectFrom("run_streams")
          .selectAll()
          .where("conversation_id", "=", conversationId)
          .where("ended", "=", 0)
          .orderBy("started_at", "desc")
          .limit(1)
          .compile(),
      );
      return row ? toRecord(row) : null;
    },

    async read(runId, afterSeq) {
      // The row before the chunks: an end is written with the last chunk, so a stream read as
      // ended has all its chunks in the read that follows.
      const [row] = await exec.rows(db.selectFrom("run_streams").selectAll().where("run_id", "=", runId).compile());
      if (!row) return null;
      const chunks = await exec.rows(
        db.selectFrom("run_stream_chunks").select(["seq", "frames"]).where("run_id", "=", runId).where("seq", ">", afterSeq).orderBy("seq").compile(),
      );
      return { stream: toRecord(row), chunks: chunks.map((chunk) => ({ seq: Number(chunk.seq), frames: chunk.frames })) };
    },

    async renew(runIds, aliveUntil) {
      if (runIds.length === 0) return [];
      const rows = await exec.rows(
        db
          .updateTable("run_streams")
          .set({ alive_until: aliveUntil })
          .where("run_id", "in", runIds)
          .where("ended", "=", 0)
          .returning(["run_id", "cancel_requested_at"])
          .compile(),
      );
      return rows.filter((row) => row.cancel_requested_at !== null).map((row) => row.run_id);
    },

    async requestCancel(runId, at) {
      const rows = await exec.rows(
        db
          .updateTable("run_streams")
          .set((eb) => ({ cancel_requested_at: eb.fn.coalesce("cancel_requested_at", eb.val(at)) }))
          .where("run_id", "=", runId)
          .where("ended", "=", 0)
          .returning("run_id")
          .compile(),
      );
      return rows.length > 0;
    },

    async endLapsed(now, frames, error) {
      return exec.transaction(function* () {
        // The guard on `ended` makes one instance end each stream when several sweep at once.
        const ended = yield* rowsOf(
          db.updateTable("run_streams").set({ ended: 1 }).where("ended", "=", 0).where("alive_until", "<", now).returningAll().compile(),
        );
        for (const stream of ended) {
          const [last] = yield* rowsOf(
            db
              .selectFrom("run_stream_chunks")
              .select((eb) => eb.fn.max("seq").as("seq"))
              .where("run_id", "=", stream.run_id)
              .compile(),
          );
          yield* rowsOf(insertChunk(stream.run_id, Number(last?.seq ?? 0) + 1, frames));
          yield* rowsOf(
            db
              .updateTable("runs")
              .set({ status: "cancelled", completed_at: now, error })
              .where("id", "=", stream.run_id)
              .where("status", "=", "running")
              .compile(),
          );
        }
        return ended.map(toRecord);
      });
    },

    async prune(before) {
      await exec.transaction(function* () {
        const gone = yield* rowsOf(db.deleteFrom("run_streams").where("ended", "=", 1).where("alive_until", "<", before).returning("run_id").compile());
        if (gone.length > 0) {
          yield* rowsOf(
            db
              .deleteFrom("run_stream_chunks")
              .where(
                "run_id",
                "in",
                gone.map((row) => row.run_id),
              )
              .compile(),
          );
        }
      });
    },
  };
}

function toRecord(row: Selectable<RunStreamsTable>): RunStreamRecord {
  return {
    runId: row.run_id,
    conversationId: row.conversation_id,
    startedAt: row.started_at,
    ended: Number(row.ended) === 1,
    aliveUntil: row.alive_until,
    cancelRequestedAt: row.cancel_requested_at,
  };
}
