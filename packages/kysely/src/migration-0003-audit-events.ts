import type { Kysely, Migration } from "kysely";

/**
 * The audit trail of admin operations. Read per tenant (optionally per channel), newest
 * first, a page at a time: the indexes lead with what is filtered on and end with the
 * order (timestamp, id), so a page is an index range scan.
 */
export const auditEvents: Migration = {
  async up(db: Kysely<any>) {
    await db.schema
      .createTable("audit_events")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("timestamp", "text", (c) => c.notNull())
      .addColumn("tenant_id", "text")
      .addColumn("channel_id", "text")
      .addColumn("actor", "text")
      .addColumn("via", "text", (c) => c.notNull())
      .addColumn("operation", "text", (c) => c.notNull())
      .addColumn("changes", "text", (c) => c.notNull())
      .addColumn("outcome", "text", (c) => c.notNull())
      .addColumn("error_code", "text")
      .execute();
    await db.schema.createIndex("audit_events_tenant_idx").on("audit_events").columns(["tenant_id", "timestamp", "id"]).execute();
    await db.schema.createIndex("audit_events_channel_idx").on("audit_events").columns(["channel_id", "timestamp", "id"]).execute();
  },
  async down(db: Kysely<any>) {
    await db.schema.dropTable("audit_events").execute();
  },
};
