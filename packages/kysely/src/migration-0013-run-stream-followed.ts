import type { Kysely, Migration } from "kysely";

/**
 * Whether anyone follows a recorded run's stream (a resume marked it): its completion stores
 * the stream's last events only then, the one reader of them being a follower. Null on the
 * runs made before, whose completion stores their events as before when followed.
 */
export const runStreamFollowed: Migration = {
  async up(db: Kysely<any>) {
    await db.schema.alterTable("runs").addColumn("stream_followed", "integer").execute();
  },
  async down(db: Kysely<any>) {
    await db.schema.alterTable("runs").dropColumn("stream_followed").execute();
  },
};
