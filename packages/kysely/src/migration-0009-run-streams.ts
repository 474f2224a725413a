import type { Kysely, Migration } from "kysely";

/**
 * Resumable streams: a channel's setting, and the streams of its runs in flight with their
 * events in chunks (one row per write), readable by every instance (docs/streaming.md).
 */
export const runStreams: Migration = {
  async up(db: Kysely<any>) {
    await db.schema
      .alterTable("channels")
      .addColumn("resumable_streams", "integer", (c) => c.notNull().defaultTo(0))
      .execute();
    await db.schema
      .createTable("run_streams")
      .addColumn("run_id", "text", (c) => c.primaryKey())
      .addColumn("conversation_id", "text", (c) => c.notNull())
      .addColumn("started_at", "text", (c) => c.notNull())
      .addColumn("ended", "integer", (c) => c.notNull().defaultTo(0))
      .addColumn("alive_until", "text", (c) => c.notNull())
      .addColumn("cancel_requested_at", "text")
      .execute();
    // One index: every index is written with each stream a run opens. The sweeps read the
    // whole table, which holds only streams in flight and those ended in the last minute.
    await db.schema.createIndex("run_streams_conversation_idx").on("run_streams").column("conversation_id").execute();
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
    await db.schema.dropTable("run_streams").execute();
    await db.schema.alterTable("channels").dropColumn("resumable_streams").execute();
  },
};
