import type { RunStreamChunk, RunStreamRecord, RunStreamStore } from "@channelkit/core";
import { type Kysely, sql } from "kysely";
import type { Executor } from "./executor.js";
import type { Database } from "./schema.js";

/** Literal, not bound: the sweep's statement must name the partial index's condition for the planner to use it. */
const RUNNING = sql.lit("running");

/** A recorded run's row as a stream: what a reconnecting client's instance reads. */
const STREAM_COLUMNS = ["id", "conversation_id", "started_at", "status", "stream_alive_until", "stream_cancel_requested_at"] as const;

interface StreamRow {
  id: string;
  conversation_id: string;
  started_at: string;
  status: string;
  stream_alive_until: string | null;
  stream_cancel_requested_at: string | null;
}

/**
 * The {@link RunStreamStore} on the runs' rows (migration `0009_run_streams`): a recorded
 * run's row holds its stream's lease, its cancel and its last events, so a stream that ends
 * within one flush costs its run's own writes only (it never enters the sweep's index,
 * which holds the streams renewed at least once). A longer one writes its earlier events
 * in `run_stream_chunks`, one row per flush, deleted a while after its run ends.
 */
export function kyselyRunStreams(db: Kysely<Database>, exec: Executor): RunStreamStore {
  const recordedRuns = () => db.updateTable("runs").where("status", "=", RUNNING).where("stream_alive_until", "is not", null);
  return {
    async append(runId, seq, frames) {
      await exec.rows(
        db
          .insertInto("run_stream_chunks")
          .values({ run_id: runId, seq, frames })
          // A write retried after it reached the database keeps the first.
          .onConflict((oc) => oc.columns(["run_id", "seq"]).doNothing())
          .compile(),
      );
    },

    async end(runId, frames, at, error) {
      await exec.rows(recordedRuns().set({ stream_tail: frames, status: "error", error, completed_at: at }).where("id", "=", runId).compile());
    },

    async follow(runId) {
      const rows = await exec.rows(recordedRuns().set({ stream_followed: 1 }).where("id", "=", runId).returning("id").compile());
      return rows.length > 0;
    },

    async findLive(conversationId) {
      const [row] = await exec.rows(
        db
          .selectFrom("runs")
          .select(STREAM_COLUMNS)
          .where("conversation_id", "=", conversationId)
          .where("status", "=", RUNNING)
          .where("stream_alive_until", "is not", null)
          .orderBy("ticket", "desc")
          .limit(1)
          .compile(),
      );
      return row ? toRecord(row) : null;
    },

    async read(runId, afterSeq) {
      // The row before the chunks: a run ends after its chunks are written, so a stream read
      // as ended has all its chunks in the read that follows.
      const [row] = await exec.rows(
        db
          .selectFrom("runs")
          .select([...STREAM_COLUMNS, "stream_tail"])
          .where("id", "=", runId)
          .where("stream_alive_until", "is not", null)
          .compile(),
      );
      if (!row) return null;
      const rows = await exec.rows(
        db.selectFrom("run_stream_chunks").select(["seq", "frames"]).where("run_id", "=", runId).where("seq", ">", afterSeq).orderBy("seq").compile(),
      );
      const chunks: RunStreamChunk[] = rows.map((chunk) => ({ seq: Number(chunk.seq), frames: chunk.frames }));
      const stream = toRecord(row);
      return { stream, chunks, last: stream.ended ? row.stream_tail : null };
    },

    async renew(runIds, aliveUntil) {
      if (runIds.length === 0) return [];
      const rows = await exec.rows(
        recordedRuns()
          .set({ stream_alive_until: aliveUntil, stream_renewed: 1 })
          .where("id", "in", runIds)
          .returning(["id", "stream_cancel_requested_at"])
          .compile(),
      );
      return rows.filter((row) => row.stream_cancel_requested_at !== null).map((row) => row.id);
    },

    async requestCancel(runId, at) {
      const rows = await exec.rows(
        recordedRuns()
          .set((eb) => ({ stream_cancel_requested_at: eb.fn.coalesce("stream_cancel_requested_at", eb.val(at)) }))
          .where("id", "=", runId)
          .returning("id")
          .compile(),
      );
      return rows.length > 0;
    },

    async endLapsed(now, error, runId) {
      // One statement: of instances sweeping at once, the guard on `status` lets one end each.
      // The sweep reads the partial index (renewed streams); one stream is found by its key.
      const lapsed = recordedRuns().set({ status: "cancelled", completed_at: now, error }).where("stream_alive_until", "<", now);
      const rows = await exec.rows(
        (runId === undefined ? lapsed.where("stream_renewed", "=", sql.lit(1)) : lapsed.where("id", "=", runId)).returning(STREAM_COLUMNS).compile(),
      );
      return rows.map((row) => ({ ...toRecord(row), ended: true }));
    },

    async prune(before) {
      await exec.rows(
        db
          .deleteFrom("run_stream_chunks")
          .where((eb) =>
            eb.exists(
              eb
                .selectFrom("runs")
                .select("runs.id")
                .whereRef("runs.id", "=", "run_stream_chunks.run_id")
                .where("runs.status", "<>", RUNNING)
                .where("runs.completed_at", "<", before),
            ),
          )
          .compile(),
      );
    },
  };
}

function toRecord(row: StreamRow): RunStreamRecord {
  return {
    runId: row.id,
    conversationId: row.conversation_id,
    startedAt: row.started_at,
    ended: row.status !== "running",
    aliveUntil: row.stream_alive_until ?? row.started_at,
    cancelRequestedAt: row.stream_cancel_requested_at,
  };
}
