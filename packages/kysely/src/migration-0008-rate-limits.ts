import type { Kysely, Migration } from "kysely";

/**
 * Rate limits: a channel's own limits (JSON, null for the service's), and the counts every
 * instance on this database shares, in the table rate-limiter-flexible's SQLite and Postgres
 * limiters use (`key`, `points`, `expire` in epoch ms; null never expires).
 */
export const rateLimits: Migration = {
  async up(db: Kysely<any>) {
    await db.schema.alterTable("channels").addColumn("rate_limits", "text").execute();
    await db.schema
      .createTable("rate_limit_counters")
      .addColumn("key", "varchar(255)", (c) => c.primaryKey())
      .addColumn("points", "integer", (c) => c.notNull().defaultTo(0))
      .addColumn("expire", "bigint")
      .execute();
  },
  async down(db: Kysely<any>) {
    await db.schema.dropTable("rate_limit_counters").execute();
    await db.schema.alterTable("channels").dropColumn("rate_limits").execute();
  },
};
