import { type Kysely, type Migration, SqliteAdapter, sql } from "kysely";

/**
 * Live chat: when a conversation entered its mode (a wait expires from it, and a mode change
 * is a compare-and-set on it), a channel's wait timeout, the index of a tenant's inbox, and on
 * SQLite the table through which processes sharing the file tell each other of changes.
 */
export const liveChat: Migration = {
  async up(db: Kysely<any>) {
    await db.schema.alterTable("conversations").addColumn("mode_since", "text").execute();
    await db.updateTable("conversations").set({ mode_since: sql`updated_at` }).execute();
    await db.schema.alterTable("channels").addColumn("livechat_wait_timeout_seconds", "integer").execute();
    await db.schema.createIndex("conversations_tenant_mode_idx").on("conversations").columns(["tenant_id", "mode"]).execute();
    if (db.getExecutor().adapter instanceof SqliteAdapter) {
      await db.schema
        .createTable("live_feed")
        .addColumn("id", "integer", (c) => c.primaryKey().autoIncrement())
        .addColumn("topic", "text", (c) => c.notNull())
        .addColumn("message", "text", (c) => c.notNull())
        .addColumn("created_at", "text", (c) => c.notNull())
        .execute();
    }
  },
  async down(db: Kysely<any>) {
    await db.schema.dropTable("live_feed").ifExists().execute();
    await db.schema.dropIndex("conversations_tenant_mode_idx").execute();
    await db.schema.alterTable("channels").dropColumn("livechat_wait_timeout_seconds").execute();
    await db.schema.alterTable("conversations").dropColumn("mode_since").execute();
  },
};
