import type { Kysely, Migration } from "kysely";

/**
 * A channel's retention (days an ended conversation is kept; null: for ever), and the index
 * the retention sweep reads a channel's conversations by, oldest activity first.
 */
export const channelRetention: Migration = {
  async up(db: Kysely<any>) {
    await db.schema.alterTable("channels").addColumn("retention_days", "integer").execute();
    await db.schema.createIndex("conversations_channel_updated_idx").on("conversations").columns(["channel_id", "updated_at"]).execute();
  },
  async down(db: Kysely<any>) {
    await db.schema.dropIndex("conversations_channel_updated_idx").execute();
    await db.schema.alterTable("channels").dropColumn("retention_days").execute();
  },
};
