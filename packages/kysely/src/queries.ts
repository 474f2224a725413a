import { TURN_PASSED_TOPIC } from "@channelkit/core";
import { type ExpressionBuilder, type Kysely, sql } from "kysely";
import { FEED_CHANNEL } from "./feed-channel.js";
import { PreparedQueries, PreparedQuery } from "./prepared.js";
import { CHANNEL_COLUMNS, CONVERSATION_COLUMNS, type Database, MESSAGE_COLUMNS, RUN_COLUMNS } from "./schema.js";

/**
 * A row of placeholders, one per column, numbered from `offset` in the order of `columns`:
 * the statement's parameters are then a row's values in that order (`valuesOf` in storage.ts).
 */
function placeholderRow<Column extends string>(columns: readonly Column[], $: (index: number) => never, offset = 0): Record<Column, never> {
  return Object.fromEntries(columns.map((column, i) => [column, $(offset + i)])) as Record<Column, never>;
}

/** A key's columns in a key lookup, named apart from its channel's. */
const KEY_COLUMNS = [
  "api_keys.id as key_id",
  "api_keys.tenant_id as key_tenant_id",
  "api_keys.hash as key_hash",
  "api_keys.prefix as key_prefix",
  "api_keys.environment as key_environment",
  "api_keys.hint as key_hint",
  "api_keys.created_at as key_created_at",
  "api_keys.expires_at as key_expires_at",
  "api_keys.revoked_at as key_revoked_at",
] as const;

/**
 * The statements of the request path, compiled once per storage (see {@link PreparedQuery}):
 * the key lookup, the conversation and its recent messages, and the writes of a run: its
 * ticket, its turn, its lease and its outcome.
 */
export function requestPathQueries(db: Kysely<Database>) {
  const keys = () => db.selectFrom("api_keys").innerJoin("channels", "channels.id", "api_keys.channel_id").select(KEY_COLUMNS);
  return {
    keyByHash: new PreparedQuery(1, ($) =>
      keys()
        .select(CHANNEL_COLUMNS.map((column) => `channels.${column}` as const))
        .where("api_keys.hash", "=", $(0)),
    ),
    // Postgres (Executor.rowVersions): the key with its channel's id and version, then the
    // channel's columns only when that version has not been made into a record yet.
    keyAndChannelVersion: new PreparedQuery(1, ($) =>
      keys()
        .select(["channels.id", sql<string>`channels.xmin::text`.as("channel_version")])
        .where("api_keys.hash", "=", $(0)),
    ),
    channelWithVersion: new PreparedQuery(1, ($) =>
      db.selectFrom("channels").select(CHANNEL_COLUMNS).select(sql<string>`xmin::text`.as("channel_version")).where("id", "=", $(0)),
    ),
    conversation: new PreparedQuery(1, ($) => db.selectFrom("conversations").select(CONVERSATION_COLUMNS).where("id", "=", $(0))),
    // The webhook routes find their channel by its public client id (a unique index).
    channelByClientId: new PreparedQuery(1, ($) => db.selectFrom("channels").select(CHANNEL_COLUMNS).where("client_id", "=", $(0))),
    recentMessages: new PreparedQuery(2, ($) =>
      db.selectFrom("messages").select(MESSAGE_COLUMNS).where("conversation_id", "=", $(0)).orderBy("turn_index", "desc").limit($(1)),
    ),
    // A new conversation's row: its values in the order of CONVERSATION_COLUMNS.
    insertConversation: new PreparedQuery(CONVERSATION_COLUMNS.length, ($) => db.insertInto("conversations").values(placeholderRow(CONVERSATION_COLUMNS, $))),
    // A new conversation with its first messages and its run, as one statement where the
    // database allows (Executor.dataModifyingCtes), keyed by the number of messages.
    newConversation: new PreparedQueries((count: number) => newConversationQuery(db, count)),
    // A run's ticket and, when served at once, its claim as one statement where the
    // database allows (Executor.dataModifyingCtes), keyed by whether its stream is recorded.
    beginRun: new PreparedQueries((recorded: boolean) => beginRunQuery(db, recorded)),
    // A claimed run's outcome as one statement where the database allows, keyed by
    // {@link completeRunKey}.
    completeRun: new PreparedQueries((key: number) => completeRunQuery(db, key >> 1, (key & 1) === 1)),
    // A run's ticket and, when it is served at once, its turn and lease: one statement of
    // `beginRun` where the database has no data-modifying CTEs (SQLite), where a ticket and
    // a claim were two (docs/benchmarks.md, "Why the code looks like this").
    takeTicket: new PreparedQuery(TAKE_TICKET_VALUES, ($) => takeTicketQuery(db, $)),
    queue: new PreparedQuery(1, ($) => db.selectFrom("conversations").select(["serving", "lease_until"]).where("id", "=", $(0))),
    claim: new PreparedQuery(4, ($) =>
      db
        .updateTable("conversations")
        .set((eb) => ({ next_turn: eb("next_turn", "+", 1), lease_until: $(0), updated_at: $(1) }))
        .where("id", "=", $(2))
        .where("serving", "=", $(3))
        .returning(CONVERSATION_COLUMNS),
    ),
    // A lapsed turn taken over by the waiting run of ticket $(4): served at once, past the
    // tickets between, whose runs are gone with the instance that held the lapsed turn or
    // queue again (TurnPassedOver).
    takeOver: new PreparedQuery(5, ($) =>
      db
        .updateTable("conversations")
        .set({ serving: $(4), lease_until: $(0) })
        .where("id", "=", $(1))
        .where("serving", "=", $(2))
        .where((eb) => eb.or([eb("lease_until", "is", null), eb("lease_until", "<", $(3))]))
        .returning("serving"),
    ),
    // The runs of the tickets passed over, from the lapsed one ($(3)) to the taker's ($(4)), excluded.
    cancelLapsed: new PreparedQuery(5, ($) =>
      db
        .updateTable("runs")
        .set({ status: "cancelled", completed_at: $(0), error: $(1) })
        .where("conversation_id", "=", $(2))
        .where("ticket", ">=", $(3))
        .where("ticket", "<", $(4))
        .where("status", "=", "running"),
    ),
    // A lapsed run that is not recorded, where its row is written with its outcome (SQLite):
    // stored `cancelled` from its user message, the conversation's last one whose run has no
    // row (no other run of the conversation wrote since it took the turn), under the flow its
    // channel is bound to. Nothing when it has a row (recorded, or already stored).
    cancelLapsedUnwritten: new PreparedQuery(4, ($) =>
      db
        .insertInto("runs")
        .columns([
          "id",
          "conversation_id",
          "channel_id",
          "tenant_id",
          "status",
          "flow_name",
          "error",
          "execution_order",
          "started_at",
          "completed_at",
          "duration_ms",
          "ticket",
        ])
        .expression(
          db
            .selectFrom("messages as m")
            .innerJoin("conversations as c", "c.id", "m.conversation_id")
            .innerJoin("channels as ch", "ch.id", "c.channel_id")
            .select((eb) => [
              "m.run_id",
              "m.conversation_id",
              "c.channel_id",
              "c.tenant_id",
              eb.val("cancelled").as("status"),
              "ch.flow_name",
              eb.val($(1)).as("error"),
              eb.val("[]").as("execution_order"),
              "m.timestamp",
              eb.val($(0)).as("completed_at"),
              eb.val(0).as("duration_ms"),
              eb.val($(3)).as("ticket"),
            ])
            .where("m.conversation_id", "=", $(2))
            .where("m.role", "=", "user")
            .where("m.run_id", "is not", null)
            .where(({ not, exists, selectFrom }) => not(exists(selectFrom("runs as r").select("r.id").whereRef("r.id", "=", "m.run_id"))))
            .orderBy("m.turn_index", "desc")
            .limit(1),
        ),
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
    finishTurn: new PreparedQueries(
      (setsFlowState: boolean) =>
        new PreparedQuery(5 + Number(setsFlowState), ($) => finishTurn(db, $, setsFlowState).returning(["next_turn", "serving", "next_ticket"])),
    ),
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
    toLiveChatUser: new PreparedQuery(3, ($) =>
      db
        .updateTable("messages")
        .set({ origin: "livechat", sender: "user", livechat_message_id: $(2) })
        .where("conversation_id", "=", $(0))
        .where("turn_index", "=", $(1)),
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
    // Serves a later ticket only if `from` is still the one served (a compare-and-set: see skipEndedTickets).
    serveFrom: new PreparedQuery(4, ($) =>
      db
        .updateTable("conversations")
        .set({ serving: $(0), lease_until: $(1) })
        .where("id", "=", $(2))
        .where("serving", "=", $(3)),
    ),
    insertMessages: new PreparedQueries(
      (count: number) =>
        new PreparedQuery(count * MESSAGE_COLUMNS.length, ($) =>
          db.insertInto("messages").values(Array.from({ length: count }, (_, row) => placeholderRow(MESSAGE_COLUMNS, $, row * MESSAGE_COLUMNS.length))),
        ),
    ),
    insertRun: new PreparedQuery(RUN_COLUMNS.length, ($) => db.insertInto("runs").values(placeholderRow(RUN_COLUMNS, $))),
    // The outcome of a claimed run whose row is written with it (SQLite): its row, or, when a
    // later run stored it cancelled after its lease lapsed, the outcome on that row, as
    // `finishRun` writes it on a row written at the claim.
    storeRunOutcome: new PreparedQuery(RUN_COLUMNS.length, ($) =>
      db
        .insertInto("runs")
        .values(placeholderRow(RUN_COLUMNS, $))
        .onConflict((oc) =>
          oc.column("id").doUpdateSet((eb) => ({
            status: eb.ref("excluded.status"),
            result: eb.ref("excluded.result"),
            error: eb.ref("excluded.error"),
            execution_order: eb.ref("excluded.execution_order"),
            completed_at: eb.ref("excluded.completed_at"),
            duration_ms: eb.ref("excluded.duration_ms"),
          })),
        ),
    ),
    // The claim of a recorded run that waited: its row was written with its ticket.
    claimRecordedRun: new PreparedQuery(2, ($) =>
      db
        .updateTable("runs")
        .set({ started_at: $(0), completed_at: $(0) })
        .where("id", "=", $(1)),
    ),
    // A run's outcome on its row: the values of RUN_OUTCOME_COLUMNS, then the run's id.
    finishRun: new PreparedQuery(RUN_OUTCOME_COLUMNS.length + 1, ($) =>
      db.updateTable("runs").set(runOutcomeRow($)).where("id", "=", $(RUN_OUTCOME_COLUMNS.length)),
    ),
  };
}

/**
 * A new conversation with its first `count` messages and its run, as one statement (for
 * databases with data-modifying `WITH`). Placeholders: the conversation's row, then each
 * message's, then the run's, each in the order of its table's columns.
 */
function newConversationQuery(db: Kysely<Database>, count: number) {
  const messageOffset = CONVERSATION_COLUMNS.length;
  const runOffset = messageOffset + count * MESSAGE_COLUMNS.length;
  return new PreparedQuery(runOffset + RUN_COLUMNS.length, ($) =>
    db
      .with("c", (qc) => qc.insertInto("conversations").values(placeholderRow(CONVERSATION_COLUMNS, $)).returning("id"))
      .with("m", (qc) =>
        qc
          .insertInto("messages")
          .values(Array.from({ length: count }, (_, row) => placeholderRow(MESSAGE_COLUMNS, $, messageOffset + row * MESSAGE_COLUMNS.length)))
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

/** What a run's end writes on its row (`finishRun`, the end of `completeRun`): the values of these, then the run's id. */
export const RUN_OUTCOME_COLUMNS = ["status", "result", "error", "execution_order", "completed_at", "duration_ms", "stream_tail"] as const;

/**
 * The outcome's placeholders, numbered from `offset`; a recorded stream's last events are
 * kept only if a reader followed it (`stream_followed`, set by `RunStreamStore.follow`):
 * its own client has them, and no one else reads them. The case is evaluated on the row as
 * the update finds it, so a follow committed before the outcome is always honoured.
 */
function runOutcomeRow($: (index: number) => never, offset = 0) {
  const row = placeholderRow(RUN_OUTCOME_COLUMNS, $, offset);
  const tail = $(offset + RUN_OUTCOME_COLUMNS.length - 1);
  return { ...row, stream_tail: sql<string | null>`case when ${sql.ref("runs.stream_followed")} = 1 then ${tail} end` };
}

/** The columns of a message whose turn index the statement computes: its values are the statement's placeholders. */
export const MESSAGE_VALUE_COLUMNS = MESSAGE_COLUMNS.filter((column) => column !== "turn_index") as Exclude<(typeof MESSAGE_COLUMNS)[number], "turn_index">[];
/** The columns of a run whose ticket the statement computes. */
export const RUN_VALUE_COLUMNS = RUN_COLUMNS.filter((column) => column !== "ticket") as Exclude<(typeof RUN_COLUMNS)[number], "ticket">[];

/** The values of `columns` as select items, placeholders numbered from `offset`, each named after its column. */
function selectedValues<Column extends string>(eb: ExpressionBuilder<any, any>, columns: readonly Column[], $: (index: number) => never, offset: number) {
  return columns.map((column, i) => eb.val($(offset + i)).as(column));
}

/**
 * Moves a conversation's counters when a run ends (placeholders: the number of messages, the
 * time, the run's ticket, the next run's claim deadline, the conversation's id, the flow state
 * when set): its turn indexes, and the turn passed on when this run held it.
 */
function finishTurn(db: Kysely<Database>, p: (index: number) => never, setsFlowState: boolean) {
  return db
    .updateTable("conversations")
    .set((eb) => ({
      next_turn: eb("next_turn", "+", p(0)),
      updated_at: p(1),
      serving: eb
        .case()
        .when("serving", "=", p(2))
        .then(eb("serving", "+", 1))
        .else(eb.ref("serving"))
        .end(),
      lease_until: eb.case().when("serving", "=", p(2)).then(p(3)).else(eb.ref("lease_until")).end(),
      // A run whose turn was taken over (its lease lapsed) no longer sets the state.
      ...(setsFlowState ? { flow_state: eb.case().when("serving", "=", p(2)).then(p(5)).else(eb.ref("flow_state")).end() } : {}),
    }))
    .where("id", "=", p(4));
}

/** The placeholders of {@link takeTicketQuery}: the conversation's id, the lease's end, now, its tenant, its channel. */
export const TAKE_TICKET_VALUES = 5;

/**
 * Takes the conversation's next ticket (`$(0)` its id) and, when that ticket is the one
 * served, its turn and lease (`$(1)` the lease's end, `$(2)` now): the conversation's row as
 * updated. The ticket taken is `next_ticket - 1`; it was served when `serving` equals it.
 * Only a conversation of the run's tenant (`$(3)`) and channel (`$(4)`) is touched: no row
 * is the channel's 404, with no read before it.
 */
function takeTicketQuery(db: Kysely<Database>, $: (index: number) => never) {
  return db
    .updateTable("conversations")
    .set((eb) => {
      // Old values on the right of SET: the ticket taken is the old next_ticket.
      const served = () => eb("serving", "=", eb.ref("next_ticket"));
      return {
        next_ticket: eb("next_ticket", "+", 1),
        next_turn: eb
          .case()
          .when(served())
          .then(eb("next_turn", "+", 1))
          .else(eb.ref("next_turn"))
          .end(),
        lease_until: eb.case().when(served()).then($(1)).else(eb.ref("lease_until")).end(),
        updated_at: eb.case().when(served()).then($(2)).else(eb.ref("updated_at")).end(),
      };
    })
    .where("id", "=", $(0))
    .where("tenant_id", "=", $(3))
    .where("channel_id", "=", $(4))
    .returning(CONVERSATION_COLUMNS);
}

/**
 * A run arriving on an existing conversation, as one statement (data-modifying `WITH`, see
 * docs/benchmarks.md, "Runs that take turns: what they cost"): the conversation's row takes
 * the run's ticket and, when that ticket is the one served, the claim (next turn index, lease),
 * under the row lock the `UPDATE` takes first; the user message and the `running` row are
 * inserted from what it returns, only when claimed (the row also when the stream is
 * `recorded`). Returns the conversation as the claim left it, or nothing when it is not the
 * run's tenant's and channel's. Placeholders: {@link takeTicketQuery}'s five, the message's
 * {@link MESSAGE_VALUE_COLUMNS}, the run's {@link RUN_VALUE_COLUMNS}.
 */
function beginRunQuery(db: Kysely<Database>, recorded: boolean) {
  const messageOffset = TAKE_TICKET_VALUES;
  const runOffset = messageOffset + MESSAGE_VALUE_COLUMNS.length;
  return new PreparedQuery(runOffset + RUN_VALUE_COLUMNS.length, ($) =>
    db
      .with("t", () => takeTicketQuery(db, $))
      .with("m", (qc) =>
        qc
          .insertInto("messages")
          .columns([...MESSAGE_VALUE_COLUMNS, "turn_index"])
          .expression(
            qc
              .selectFrom("t")
              .select((eb) => [...selectedValues(eb, MESSAGE_VALUE_COLUMNS, $, messageOffset), eb("t.next_turn", "-", eb.lit(1)).as("turn_index")])
              .where((eb) => eb("t.serving", "=", eb("t.next_ticket", "-", eb.lit(1)))),
          )
          .returning("turn_index"),
      )
      .with("r", (qc) =>
        qc
          .insertInto("runs")
          .columns([...RUN_VALUE_COLUMNS, "ticket"])
          .expression(
            qc
              .selectFrom("t")
              .select((eb) => [...selectedValues(eb, RUN_VALUE_COLUMNS, $, runOffset), eb("t.next_ticket", "-", eb.lit(1)).as("ticket")])
              .$if(!recorded, (select) => select.where((eb) => eb("t.serving", "=", eb("t.next_ticket", "-", eb.lit(1))))),
          )
          .returning("id"),
      )
      .selectFrom("t")
      .selectAll("t"),
  );
}

/** The key of `completeRun`'s statement: its number of messages and whether it sets the flow state. */
export function completeRunKey(count: number, setsFlowState: boolean): number {
  return count * 2 + Number(setsFlowState);
}

/**
 * A claimed run's outcome, as one statement (data-modifying `WITH`, see docs/benchmarks.md,
 * "Runs that take turns: what they cost"): `finishTurn` on the conversation's row first
 * (its row lock, its counters), each message at the turn index it returns, then the run's
 * row, updated only if the conversation's was. Placeholders: `finishTurn`'s, then the
 * messages' {@link MESSAGE_VALUE_COLUMNS}, then `finishRun`'s. Returns `finishTurn`'s row.
 */
function completeRunQuery(db: Kysely<Database>, count: number, setsFlowState: boolean) {
  const messageOffset = 5 + Number(setsFlowState);
  const r = messageOffset + count * MESSAGE_VALUE_COLUMNS.length;
  return new PreparedQuery(r + RUN_OUTCOME_COLUMNS.length + 1, ($) => {
    const t = finishTurn(db, $, setsFlowState).returning(["next_turn", "serving", "next_ticket"]);
    // One insert per message: a multi-row insert from `t` would need its values in a `VALUES`
    // list or a `UNION`, where Postgres types the placeholders as text, not as their columns.
    let query = db.with("t", () => t);
    for (let i = 0; i < count; i++) {
      const offset = messageOffset + i * MESSAGE_VALUE_COLUMNS.length;
      query = query.with(
        `m${i}` as never,
        (qc) =>
          qc
            .insertInto("messages")
            .columns([...MESSAGE_VALUE_COLUMNS, "turn_index"])
            .expression(
              qc
                .selectFrom("t")
                .select((eb) => [...selectedValues(eb, MESSAGE_VALUE_COLUMNS, $, offset), eb("t.next_turn", "-", eb.lit(count - i)).as("turn_index")]),
            )
            .returning("turn_index") as never,
      ) as unknown as typeof query;
    }
    return query
      .with("r", (qc) =>
        qc
          .updateTable("runs")
          // From `t`: the run's row is written only when the conversation's was.
          .from("t")
          .set(runOutcomeRow($, r))
          .where("runs.id", "=", $(r + RUN_OUTCOME_COLUMNS.length))
          .returning("runs.id"),
      )
      .selectFrom("t")
      .select(["t.next_turn", "t.serving", "t.next_ticket"])
      .select(announceTurn($(4)));
  });
}

/**
 * Tells the instances listening on the feed that the conversation's turn passed to a run that
 * waits for it (a ticket is taken after the one now served): `pg_notify` on the feed's
 * channel, topic {@link TURN_PASSED_TOPIC}, delivered at the statement's commit. Nothing is
 * sent when nobody waits.
 */
function announceTurn(conversationId: unknown) {
  return sql<null>`case when ${sql.ref("t.next_ticket")} > ${sql.ref("t.serving")} then pg_notify(${FEED_CHANNEL}, ${`${TURN_PASSED_TOPIC}\n`} || ${conversationId}) end`.as(
    "announced",
  );
}
