import type { Kysely, Migration } from "kysely";

/**
 * A channel's retention: the days an ended conversation is kept (null: for ever). No index for
 * the sweep: one on the conversations' last activity would cost every run a few microseconds
 * (each run moves it twice), for a query that runs once an hour on the channel's own index.
 */
export const channelRetention: Migration = {
  async up(db: Kysely<any>) {
    await db.schema.alterTable("channels").addColumn("retention_days", "integer").execute();
  },
  async down(db: Kysely<any>) {
    await db.schema.alterTable("channels").dropColumn("retention_days").execute();
  },
};
