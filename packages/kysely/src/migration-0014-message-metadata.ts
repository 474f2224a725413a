import type { Kysely, Migration } from "kysely";

/** A message's own data (a chat platform's ids of it), as JSON; null on the messages before. */
export const messageMetadata: Migration = {
  async up(db: Kysely<any>) {
    await db.schema.alterTable("messages").addColumn("metadata", "text").execute();
  },
  async down(db: Kysely<any>) {
    await db.schema.alterTable("messages").dropColumn("metadata").execute();
  },
};
