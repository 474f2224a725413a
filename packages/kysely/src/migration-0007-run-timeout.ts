import type { Kysely, Migration } from "kysely";

/** A channel's run time limit, in seconds (null: the default). */
export const runTimeout: Migration = {
  async up(db: Kysely<any>) {
    await db.schema.alterTable("channels").addColumn("run_timeout_seconds", "integer").execute();
  },
  async down(db: Kysely<any>) {
    await db.schema.alterTable("channels").dropColumn("run_timeout_seconds").execute();
  },
};
