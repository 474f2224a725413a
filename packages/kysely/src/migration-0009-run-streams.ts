import { type Kysely, type Migration, sql } from "kysely";

/**
 * Resumable streams (docs/streaming.md): a channel's setting, and a recorded stream kept on
 * its run's own row (the run's writes open and end it: no write of its own) with the
 * events of runs streaming longer than a flush in `run_stream_chunks`.
 */
export const runStreams: Migration = {
  async up(db: Kysely<any>) {
    await db.schema
      .alterTable("channels")
      .addColumn("resumable_streams", "integer", (c) => c.notNull().defaultTo(0))
      .execute();
    // Set on a recorded run only: until when its instance vouches for it (renewed while it
    // runs), whether it was renewed yet, when a cancel was asked for, and its last events
    // (written with its outcome).
    await db.schema.alterTable("runs").addColumn("stream_alive_until", "text").execute();
    await db.schema.alterTable("runs").addColumn("stream_renewed", "integer").execute();
    await db.schema.alterTable("runs").addColumn("stream_cancel_requested_at", "text").execute();
    await db.schema.alterTable("runs").addColumn("stream_tail", "text").execute();
    // The sweep for streams whose instance stopped reads this index, which holds the recorded
    // runs in flight that their instance renewed (within 50 ms of their start): a run that is
    // not recorded, or one that ends sooner, never enters it (an index written with each run
    // costs SQLite a page per transaction: docs/streaming.md).
    await db.schema
      .createIndex("runs_stream_live_idx")
      .on("runs")
      .column("stream_alive_until")
      .where(sql.ref("status"), "=", sql.lit("running"))
      .where(sql.ref("stream_renewed"), "=", sql.lit(1))
      .execute();
    await db.schema
      .createTable("run_stream_chunks")
      .addColumn("run_id", "text", (c) => c.notNull())
      .addColumn("seq", "integer", (c) => c.notNull())
      .addColumn("frames", "text", (c) => c.notNull())
      .addPrimaryKeyConstraint("run_stream_chunks_pk", ["run_id", "seq"])
      .execute();
  },
  async down(db: Kysely<any>) {
    await db.schema.dropTable("run_stream_chunks").execute();
    await db.schema.dropIndex("runs_stream_live_idx").execute();
    for (const column of ["stream_tail", "stream_cancel_requested_at", "stream_renewed", "stream_alive_until"])
      await db.schema.alterTable("runs").dropColumn(column).execute();
    await db.schema.alterTable("channels").dropColumn("resumable_streams").execute();
  },
};
