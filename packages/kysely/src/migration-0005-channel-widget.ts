import type { Kysely, Migration } from "kysely";

/** A channel's chat widget settings (JSON text): what it overrides of the widget's defaults. */
export const channelWidget: Migration = {
  async up(db: Kysely<any>) {
    await db.schema
      .alterTable("channels")
      .addColumn("widget", "text", (c) => c.notNull().defaultTo("{}"))
      .execute();
  },
  async down(db: Kysely<any>) {
    await db.schema.alterTable("channels").dropColumn("widget").execute();
  },
};
