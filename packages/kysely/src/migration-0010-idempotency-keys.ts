import type { Kysely, Migration } from "kysely";

/**
 * Idempotent requests (docs/api.md, "Idempotent requests"): a request's `Idempotency-Key`,
 * scoped to its channel, with the hash of its body (never the body), who holds it while it
 * runs, then its answer, kept a day. The primary key is the lookup and the claim (an insert
 * that two instances cannot both win); the index on `expires_at` serves the deletion of
 * expired keys.
 */
export const idempotencyKeys: Migration = {
  async up(db: Kysely<any>) {
    await db.schema
      .createTable("idempotency_keys")
      .addColumn("channel_id", "text", (c) => c.notNull())
      .addColumn("idempotency_key", "text", (c) => c.notNull())
      .addColumn("request_hash", "text", (c) => c.notNull())
      .addColumn("token", "text", (c) => c.notNull())
      .addColumn("state", "text", (c) => c.notNull())
      .addColumn("created_at", "text", (c) => c.notNull())
      .addColumn("expires_at", "text", (c) => c.notNull())
      .addColumn("locked_until", "text", (c) => c.notNull())
      .addColumn("response_status", "integer")
      .addColumn("response_kind", "text")
      .addColumn("response_body", "text")
      .addPrimaryKeyConstraint("idempotency_keys_pk", ["channel_id", "idempotency_key"])
      .execute();
    await db.schema.createIndex("idempotency_keys_expires_idx").on("idempotency_keys").column("expires_at").execute();
  },
  async down(db: Kysely<any>) {
    await db.schema.dropTable("idempotency_keys").execute();
  },
};
