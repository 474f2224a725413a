import type { IdempotencyRecord, IdempotencyStore, IdempotentResponse } from "@channelkit/core";
import { type Kysely, sql } from "kysely";
import type { Executor } from "./executor.js";
import type { Database, IdempotencyKeysTable } from "./schema.js";

const RUNNING = sql.lit("running");
const DONE = sql.lit("done");

/** How many times a claim that lost its row to a deletion in between is tried again. */
const CLAIM_ATTEMPTS = 3;

/**
 * The {@link IdempotencyStore} on `idempotency_keys` (migration `0010_idempotency_keys`):
 * one statement per call. A claim is an insert that takes over, in the same statement, a
 * record that may be claimed (`ON CONFLICT … DO UPDATE … WHERE`): of instances claiming one
 * key at once, the database lets one write it; the others read the record it wrote.
 */
export function kyselyIdempotency(db: Kysely<Database>, exec: Executor): IdempotencyStore {
  const table = "idempotency_keys" as const;
  const held = (channelId: string, key: string, token: string) =>
    db.updateTable(table).where("channel_id", "=", channelId).where("idempotency_key", "=", key).where("token", "=", token).where("state", "=", RUNNING);
  return {
    async claim(claim) {
      for (let attempt = 0; ; attempt++) {
        const claimed = await exec.rows(
          db
            .insertInto(table)
            .values({
              channel_id: claim.channelId,
              idempotency_key: claim.key,
              request_hash: claim.requestHash,
              token: claim.token,
              state: "running",
              created_at: claim.now,
              expires_at: claim.expiresAt,
              locked_until: claim.lockedUntil,
              response_status: null,
              response_kind: null,
              response_body: null,
            })
            .onConflict((oc) =>
              oc
                .columns(["channel_id", "idempotency_key"])
                .doUpdateSet((eb) => ({
                  request_hash: eb.ref("excluded.request_hash"),
                  token: eb.ref("excluded.token"),
                  state: eb.ref("excluded.state"),
                  created_at: eb.ref("excluded.created_at"),
                  expires_at: eb.ref("excluded.expires_at"),
                  locked_until: eb.ref("excluded.locked_until"),
                  response_status: null,
                  response_kind: null,
                  response_body: null,
                }))
                // What `claimable` of the memory store says: expired and not held by a request
                // running, or held by one whose lease lapsed and that sent the same body.
                .where((eb) =>
                  eb.or([
                    eb.and([eb("idempotency_keys.state", "=", DONE), eb("idempotency_keys.expires_at", "<=", claim.now)]),
                    eb.and([
                      eb("idempotency_keys.state", "=", RUNNING),
                      eb("idempotency_keys.locked_until", "<=", claim.now),
                      eb.or([eb("idempotency_keys.request_hash", "=", claim.requestHash), eb("idempotency_keys.expires_at", "<=", claim.now)]),
                    ]),
                  ]),
                ),
            )
            .returning("token")
            .compile(),
        );
        if (claimed.length > 0) return null;
        const [row] = await exec.rows(
          db.selectFrom(table).selectAll().where("channel_id", "=", claim.channelId).where("idempotency_key", "=", claim.key).compile(),
        );
        if (row) return toRecord(row);
        // Deleted between the two statements (it expired): claim it again.
        if (attempt + 1 >= CLAIM_ATTEMPTS) throw new Error(`channelkit: the Idempotency-Key ${JSON.stringify(claim.key)} could not be claimed`);
      }
    },

    async renew(channelId, key, token, lockedUntil) {
      const rows = await exec.rows(held(channelId, key, token).set({ locked_until: lockedUntil }).returning("token").compile());
      return rows.length > 0;
    },

    async complete(channelId, key, token, response) {
      const rows = await exec.rows(
        held(channelId, key, token)
          .set({ state: "done", response_status: response.status, response_kind: response.kind, response_body: response.body })
          .returning("token")
          .compile(),
      );
      return rows.length > 0;
    },

    async release(channelId, key, token) {
      await exec.rows(
        db
          .deleteFrom(table)
          .where("channel_id", "=", channelId)
          .where("idempotency_key", "=", key)
          .where("token", "=", token)
          .where("state", "=", RUNNING)
          .compile(),
      );
    },

    async prune(before) {
      await exec.rows(
        db
          .deleteFrom(table)
          .where("expires_at", "<", before)
          .where((eb) => eb.or([eb("state", "=", DONE), eb("locked_until", "<", before)]))
          .compile(),
      );
    },
  };
}

function toRecord(row: IdempotencyKeysTable): IdempotencyRecord {
  const response: IdempotentResponse | null =
    row.state === "done" && row.response_body !== null
      ? { status: Number(row.response_status), kind: row.response_kind === "stream" ? "stream" : "json", body: row.response_body }
      : null;
  return {
    channelId: row.channel_id,
    key: row.idempotency_key,
    requestHash: row.request_hash,
    token: row.token,
    state: row.state === "done" ? "done" : "running",
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    lockedUntil: row.locked_until,
    response,
  };
}
