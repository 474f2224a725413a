import type { Kysely, Migration } from "kysely";

/**
 * Plugins' key-value and lease store (`storage.pluginStore(id)`): values as JSON text by
 * plugin and key, and leases by plugin and name, each with when it expires (ISO 8601 text;
 * null for a value kept for ever). The primary keys are the lookups and the claims (an insert
 * that two instances cannot both win); the indexes on `expires_at` serve the deletion of
 * expired rows.
 */
export const pluginStore: Migration = {
  async up(db: Kysely<any>) {
    await db.schema
      .createTable("plugin_kv")
      .addColumn("plugin_id", "text", (c) => c.notNull())
      .addColumn("key", "text", (c) => c.notNull())
      .addColumn("value", "text", (c) => c.notNull())
      .addColumn("expires_at", "text")
      .addPrimaryKeyConstraint("plugin_kv_pk", ["plugin_id", "key"])
      .execute();
    await db.schema.createIndex("plugin_kv_expires_idx").on("plugin_kv").column("expires_at").execute();
    await db.schema
      .createTable("plugin_leases")
      .addColumn("plugin_id", "text", (c) => c.notNull())
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("holder", "text", (c) => c.notNull())
      .addColumn("expires_at", "text", (c) => c.notNull())
      .addPrimaryKeyConstraint("plugin_leases_pk", ["plugin_id", "name"])
      .execute();
    await db.schema.createIndex("plugin_leases_expires_idx").on("plugin_leases").column("expires_at").execute();
  },
  async down(db: Kysely<any>) {
    await db.schema.dropTable("plugin_leases").execute();
    await db.schema.dropTable("plugin_kv").execute();
  },
};
