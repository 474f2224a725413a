import type { Kysely, Migration } from "kysely";

/**
 * Channels of a plugin's type hold the type's settings: those that are not secrets as JSON
 * text (`{}` for the built-in types and the channels made before), and the secret ones as one
 * JSON object sealed with the master key (null when none is set).
 */
export const channelSettings: Migration = {
  async up(db: Kysely<any>) {
    await db.schema
      .alterTable("channels")
      .addColumn("settings", "text", (c) => c.notNull().defaultTo("{}"))
      .execute();
    await db.schema.alterTable("channels").addColumn("sealed_settings", "text").execute();
  },
  async down(db: Kysely<any>) {
    await db.schema.alterTable("channels").dropColumn("sealed_settings").execute();
    await db.schema.alterTable("channels").dropColumn("settings").execute();
  },
};
