import type { Kysely, Migration } from "kysely";

/**
 * Runs of one conversation take turns: a ticket counter and the ticket being served on the
 * conversation, the lease of the run being served, and each run's ticket (unique per
 * conversation, which also serves the lookups that skip tickets whose run already ended, and
 * replaces the index on `conversation_id` alone: one index fewer to write per run).
 */
export const runTurns: Migration = {
  async up(db: Kysely<any>) {
    await db.schema
      .alterTable("conversations")
      .addColumn("next_ticket", "integer", (c) => c.notNull().defaultTo(0))
      .execute();
    await db.schema
      .alterTable("conversations")
      .addColumn("serving", "integer", (c) => c.notNull().defaultTo(0))
      .execute();
    await db.schema.alterTable("conversations").addColumn("lease_until", "text").execute();
    await db.schema.alterTable("runs").addColumn("ticket", "integer").execute();
    await db.schema.createIndex("runs_conversation_ticket_idx").on("runs").columns(["conversation_id", "ticket"]).unique().execute();
    await db.schema.dropIndex("runs_conversation_idx").execute();
  },
  async down(db: Kysely<any>) {
    await db.schema.createIndex("runs_conversation_idx").on("runs").column("conversation_id").execute();
    await db.schema.dropIndex("runs_conversation_ticket_idx").execute();
    await db.schema.alterTable("runs").dropColumn("ticket").execute();
    for (const column of ["lease_until", "serving", "next_ticket"]) await db.schema.alterTable("conversations").dropColumn(column).execute();
  },
};
