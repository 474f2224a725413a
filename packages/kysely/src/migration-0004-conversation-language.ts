import type { Kysely, Migration } from "kysely";

/** The language a conversation was started in (webhook channels choose one at `startConversation`). */
export const conversationLanguage: Migration = {
  async up(db: Kysely<any>) {
    await db.schema.alterTable("conversations").addColumn("language", "text").execute();
  },
  async down(db: Kysely<any>) {
    await db.schema.alterTable("conversations").dropColumn("language").execute();
  },
};
