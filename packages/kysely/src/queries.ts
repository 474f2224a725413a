import type { Kysely } from "kysely";
import { PreparedQueries, PreparedQuery } from "./prepared.js";
import { CHANNEL_COLUMNS, CONVERSATION_COLUMNS, type Database, MESSAGE_COLUMNS, RUN_COLUMNS } from "./schema.js";

/** A row of placeholders, one per column, numbered from `offset`. */
function placeholderRow<Column extends string>(columns: readonly Column[], $: (index: number) => never, offset = 0): Record<Column, never> {
  return Object.fromEntries(columns.map((column, i) => [column, $(offset + i)])) as Record<Column, never>;
}

/** Values of a new conversation's row, the first placeholders of the statements that insert one. */
export const CONVERSATION_VALUES = 14;

/** A new conversation's row: its {@link CONVERSATION_VALUES} values are the first placeholders of the statement. */
function conversationRow($: (index: number) => never) {
  return {
    id: $(0),
    tenant_id: $(1),
    channel_id: $(2),
    mode: $(3),
    flow_state: $(4),
    next_turn: $(5),
    livechat_conversation_id: $(13),
    created_at: $(6),
    updated_at: $(7),
    next_ticket: $(8),
    serving: $(9),
    lease_until: $(10),
    language: $(11),
    mode_since: $(12),
  };
}

/**
 * The statements of the request path, compiled once per storage (see {@link PreparedQuery}):
 * the key lookup, the conversation and its recent messages, and the writes of a run: its
 * ticket, its turn, its lease and its outcome.
 */
export function requestPathQueries(db: Kysely<Database>) {
  return {
    keyByHash: new PreparedQuery(1, ($) =>
      db
        .selectFrom("api_keys")
        .innerJoin("channels", "channels.id", "api_keys.channel_id")
        .select(CHANNEL_COLUMNS.map((column) => `channels.${column}` as const))
        .select([
          "api_keys.id as key_id",
          "api_keys.hash as key_hash",
          "api_keys.prefix as key_prefix",
          "api_keys.environment as key_environment",
          "api_keys.hint as key_hint",
          "api_keys.created_at as key_created_at",
          "api_keys.expires_at as key_expires_at",
          "api_keys.revoked_at as key_revoked_at",
        ])
        .where("api_keys.hash", "=", $(0)),
    ),
    conversation: new PreparedQuery(1, ($) => db.selectFrom("conversations").select(CONVERSATION_COLUMNS).where("id", "=", $(0))),
    // The webhook routes find their channel by its public client id (a unique index).
    channelByClientId: new PreparedQuery(1, ($) => db.selectFrom("channels").select(CHANNEL_COLUMNS).where("client_id", "=", $(0))),
    recentMessages: new PreparedQuery(2, ($) =>
      db.selectFrom("messages").select(MESSAGE_COLUMNS).where("conversation_id", "=", $(0)).orderBy("turn_index", "desc").limit($(1)),
    ),
    insertConversation: new PreparedQuery(CONVERSATION_VALUES, ($) => db.insertInto("conversations").values(conversationRow($))),
    // A new conversation with its first messages and its run, as one statement where the
    // database allows (Executor.dataModifyingCtes), keyed by the number of messages.
    newConversation: new PreparedQueries((count: number) => newConversationQuery(db, count)),
    takeTicket: new PreparedQuery(1, ($) =>
      db
        .updateTable("conversations")
        .set((eb) => ({ next_ticket: eb("next_ticket", "+", 1) }))
        .where("id", "=", $(0))
        .returning(["next_ticket", "serving"]),
    ),
    queue: new PreparedQuery(1, ($) => db.selectFrom("conversations").select(["serving", "lease_until"]).where("id", "=", $(0))),
    claim: new PreparedQuery(4, ($) =>
      db
        .updateTable("conversations")
        .set((eb) => ({ next_turn: eb("next_turn", "+", 1), lease_until: $(0), updated_at: $(1) }))
        .where("id", "=", $(2))
        .where("serving", "=", $(3))
        .returning(CONVERSATION_COLUMNS),
    ),
    takeOver: new PreparedQuery(4, ($) =>
      db
        .updateTable("conversations")
        .set((eb) => ({ serving: eb("serving", "+", 1), lease_until: $(0) }))
        .where("id", "=", $(1))
        .where("serving", "=", $(2))
        .where((eb) => eb.or([eb("lease_until", "is", null), eb("lease_until", "<", $(3))]))
        .returning("serving"),
    ),
    cancelLapsed: new PreparedQuery(4, ($) =>
      db
        .updateTable("runs")
        .set({ status: "cancelled", completed_at: $(0), error: $(1) })
        .where("conversation_id", "=", $(2))
        .where("ticket", "=", $(3))
        .where("status", "=", "running"),
    ),
    renew: new PreparedQuery(3, ($) =>
      db
        .updateTable("conversations")
        .set({ lease_until: $(0) })
        .where("id", "=", $(1))
        .where("serving", "=", $(2))
        .returning("serving"),
    ),
    // Keyed by whether the run sets the flow state: left out, the stored one is kept.
    finishTurn: new PreparedQueries((setsFlowState: boolean) => {
      return new PreparedQuery(5 + Number(setsFlowState), ($) =>
        db
          .updateTable("conversations")
          .set((eb) => ({
            next_turn: eb("next_turn", "+", $(0)),
            updated_at: $(1),
            serving: eb
              .case()
              .when("serving", "=", $(2))
              .then(eb("serving", "+", 1))
              .else(eb.ref("serving"))
              .end(),
            lease_until: eb.case().when("serving", "=", $(2)).then($(3)).else(eb.ref("lease_until")).end(),
            // A run whose turn was taken over (its lease lapsed) no longer sets the state.
            ...(setsFlowState ? { flow_state: eb.case().when("serving", "=", $(2)).then($(5)).else(eb.ref("flow_state")).end() } : {}),
          }))
          .where("id", "=", $(4))
          .returning(["next_turn", "serving", "next_ticket"]),
      );
    }),
    // A run's change of mode: by the run still holding the turn, from the mode it read (a
    // compare-and-set on the mode and the time it was entered). A given live-chat id replaces the stored one.
    runModeChange: new PreparedQuery(8, ($) =>
      db
        .updateTable("conversations")
        .set((eb) => ({
          mode: $(0),
          mode_since: $(1),
          livechat_conversation_id: eb.fn.coalesce(eb.val($(2)), eb.ref("livechat_conversation_id")),
          updated_at: $(3),
        }))
        .where("id", "=", $(4))
        .where("serving", "=", $(5))
        .where("mode", "=", $(6))
        .where("mode_since", "=", $(7)),
    ),
    // A live-chat event: the mode change as above (no turn involved) and the turns of its messages.
    liveChatChange: new PreparedQuery(8, ($) =>
      db
        .updateTable("conversations")
        .set((eb) => ({
          next_turn: eb("next_turn", "+", $(0)),
          mode: $(1),
          mode_since: $(2),
          livechat_conversation_id: eb.fn.coalesce(eb.val($(3)), eb.ref("livechat_conversation_id")),
          updated_at: $(4),
        }))
        .where("id", "=", $(5))
        .where("mode", "=", $(6))
        .where("mode_since", "=", $(7))
        .returning(CONVERSATION_COLUMNS),
    ),
    // The user's message of a run that found a human with the conversation: theirs, not the flow's.
    toLiveChatUser: new PreparedQuery(2, ($) =>
      db.updateTable("messages").set({ origin: "livechat", sender: "user" }).where("conversation_id", "=", $(0)).where("turn_index", "=", $(1)),
    ),
    messagesAfter: new PreparedQuery(3, ($) =>
      db
        .selectFrom("messages")
        .select(MESSAGE_COLUMNS)
        .where("conversation_id", "=", $(0))
        .where("turn_index", ">", $(1))
        .orderBy("turn_index", "asc")
        .limit($(2)),
    ),
    endedTicket: new PreparedQuery(2, ($) =>
      db.selectFrom("runs").select("status").where("conversation_id", "=", $(0)).where("ticket", "=", $(1)).where("status", "<>", "running"),
    ),
    serve: new PreparedQuery(3, ($) =>
      db
        .updateTable("conversations")
        .set({ serving: $(0), lease_until: $(1) })
        .where("id", "=", $(2)),
    ),
    insertMessages: new PreparedQueries(
      (count: number) =>
        new PreparedQuery(count * MESSAGE_COLUMNS.length, ($) =>
          db.insertInto("messages").values(Array.from({ length: count }, (_, row) => placeholderRow(MESSAGE_COLUMNS, $, row * MESSAGE_COLUMNS.length))),
        ),
    ),
    insertRun: new PreparedQuery(RUN_COLUMNS.length, ($) => db.insertInto("runs").values(placeholderRow(RUN_COLUMNS, $))),
    // The claim of a recorded run that waited: its row was written with its ticket.
    claimRecordedRun: new PreparedQuery(2, ($) =>
      db
        .updateTable("runs")
        .set({ started_at: $(0), completed_at: $(0) })
        .where("id", "=", $(1)),
    ),
    finishRun: new PreparedQuery(8, ($) =>
      db
        .updateTable("runs")
        .set({ status: $(0), result: $(1), error: $(2), execution_order: $(3), completed_at: $(4), duration_ms: $(5), stream_tail: $(6) })
        .where("id", "=", $(7)),
    ),
  };
}

/**
 * A new conversation with its first `count` messages and its run, as one statement (for
 * databases with data-modifying `WITH`).
 */
function newConversationQuery(db: Kysely<Database>, count: number) {
  const runOffset = CONVERSATION_VALUES + count * MESSAGE_COLUMNS.length;
  return new PreparedQuery(runOffset + RUN_COLUMNS.length, ($) =>
    db
      .with("c", (qc) => qc.insertInto("conversations").values(conversationRow($)).returning("id"))
      .with("m", (qc) =>
        qc
          .insertInto("messages")
          .values(Array.from({ length: count }, (_, row) => placeholderRow(MESSAGE_COLUMNS, $, CONVERSATION_VALUES + row * MESSAGE_COLUMNS.length)))
          .returning("turn_index"),
      )
      .with("r", (qc) =>
        qc
          .insertInto("runs")
          .values(placeholderRow(RUN_COLUMNS, $, runOffset))
          .returning("id"),
      )
      .selectFrom("c")
      .select("c.id"),
  );
}
