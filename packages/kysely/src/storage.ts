import type {
  ApiKeyRecord,
  AuditEventRecord,
  AuditQuery,
  BeginRunInput,
  ChannelPatch,
  ChannelQuery,
  ChannelRecord,
  ClaimedTurn,
  ClaimTurnInput,
  CompleteRunInput,
  ConversationQuery,
  EndedConversationQuery,
  ConversationRecord,
  DeleteConversationsInput,
  DeleteConversationsResult,
  DeletedConversation,
  EndUserQuery,
  KeyWithChannel,
  LiveChatQuery,
  LiveChatUpdate,
  LiveChatWaitingQuery,
  IdempotencyStore,
  LiveFeed,
  MessageRecord,
  MigrateOptions,
  ModeChange,
  PluginStore,
  RateLimitStore,
  RunRecord,
  RunStreamStore,
  RunTicket,
  SchemaStatus,
  ExpectedChannel,
  Storage,
  StoreRunInput,
  TenantRecord,
} from "@channelkit/core";
import { WatchedCache } from "./change-watch.js";
import { ChannelRecords } from "./channel-records.js";
import {
  ABANDONED_RUN_ERROR,
  LIVE_MODES,
  metadataNamesEndUser,
  newConversationRecord,
  storedChannelPatch,
  storedMessage,
  TurnPassedOver,
} from "@channelkit/core";
import { type Kysely, type Selectable, SqliteAdapter, sql, type Updateable } from "kysely";
import { type Executor, kyselyExecutor, rowsOf, runBody, type TransactionBody } from "./executor.js";
import {
  auditToRow,
  channelToRow,
  keyToRow,
  messageToRow,
  rowToChannel,
  rowToConversation,
  rowToAudit,
  rowToMessage,
  rowToRun,
  runToRow,
  toJson,
} from "./mappers.js";
import { migrateToLatest, schemaStatusOf } from "./migrations.js";
import { completeRunKey, MESSAGE_VALUE_COLUMNS, RUN_OUTCOME_COLUMNS, RUN_VALUE_COLUMNS, requestPathQueries } from "./queries.js";
import { kyselyIdempotency } from "./idempotency.js";
import { kyselyPluginStores } from "./plugin-store.js";
import { kyselyRunStreams } from "./run-streams.js";
import {
  type ChannelsTable,
  CONVERSATION_COLUMNS,
  type ConversationsTable,
  type Database,
  MESSAGE_COLUMNS,
  type MessagesTable,
  RUN_COLUMNS,
  type RunsTable,
} from "./schema.js";

/**
 * The {@link Storage} of core on Kysely: every statement is portable SQL built by Kysely
 * and run through one {@link Executor}, the store's own (see `sqlite()` and `postgres()`).
 */
export class KyselyStorage implements Storage {
  /** The Kysely instance, for migrations and your own queries on the same database. */
  readonly db: Kysely<Database>;
  readonly #exec: Executor;
  readonly #queries: ReturnType<typeof requestPathQueries>;
  /** The request path's channel records, made once per version of a channel's row. */
  readonly #channels = new ChannelRecords();
  /**
   * Keys by their hash and channels by their client id, kept between requests while nothing
   * they were read from changed, where the executor can tell (SQLite): see `ChangeWatch`.
   */
  readonly #keys?: WatchedCache<KeyWithChannel>;
  readonly #clients?: WatchedCache<ChannelRecord>;
  /** The feed between the processes on this database: `NOTIFY` on Postgres, a table on SQLite; none on a Kysely of your own. */
  readonly feed?: LiveFeed;
  /**
   * Whether runs waiting for a turn on other instances are told when it passes: on Postgres
   * (a `NOTIFY` from the statement that completes a run, when a run waits after it), not on
   * SQLite, whose feed is itself read every 100 ms.
   */
  readonly announcesTurns: boolean;
  /** Where the rate limits count: a table of this database, shared by every instance on it, the counts of concurrent requests batched. */
  readonly rateLimits?: RateLimitStore;
  /** Where streams of resumable channels are recorded, readable by every instance on this database. */
  readonly runStreams: RunStreamStore;
  /** Where the keys of idempotent requests are kept, shared by every instance on this database. */
  readonly idempotency: IdempotencyStore;
  readonly #pluginStores: (pluginId: string) => PluginStore;
  /**
   * Whether a run that is not recorded gets its `running` row with its claim: where the claim
   * is one statement (Postgres), the row costs it nothing. Elsewhere (SQLite) it is written
   * with the run's outcome, as a hand-written server would: the row's insert and its three
   * pages in the claim's commit were about 20 µs of a stream's first event at rest
   * (docs/benchmarks.md, "The run's row at its end"). A run lost with its instance is then stored `cancelled`
   * from its user message when the next run takes its turn over (`cancelLapsedUnwritten`).
   */
  readonly #runRowAtClaim: boolean;

  /** @internal Use `sqlite()`, `postgres()` or `openStorage()`. */
  constructor(db: Kysely<Database>, executor: Executor, feed?: (exec: Executor) => LiveFeed, rateLimits?: RateLimitStore) {
    this.db = db;
    this.#exec = executor;
    this.#runRowAtClaim = executor.dataModifyingCtes;
    if (executor.changes) {
      this.#keys = new WatchedCache(executor.changes);
      this.#clients = new WatchedCache(executor.changes);
    }
    this.#queries = requestPathQueries(db);
    this.runStreams = kyselyRunStreams(db, executor);
    this.idempotency = kyselyIdempotency(db, executor);
    this.#pluginStores = kyselyPluginStores(db, executor);
    if (feed) this.feed = feed(executor);
    this.announcesTurns = this.feed !== undefined && executor.dataModifyingCtes;
    if (rateLimits) this.rateLimits = rateLimits;
  }

  /** Brings the schema up to date: channelkit's migrations, then those of `options.plugins` (recorded as `<plugin id>/<name>`). */
  migrate(options?: MigrateOptions): Promise<void> {
    return migrateToLatest(this.db, options?.plugins);
  }

  /** Which of the migrations this version knows (and those of `options.plugins`) the database lacks, and which it has that this version does not know. */
  schemaStatus(options?: MigrateOptions): Promise<SchemaStatus> {
    return schemaStatusOf(this.db, options?.plugins);
  }

  /** The key-value and lease store of the plugin `pluginId`, on this database (see `kyselyPluginStores`). */
  pluginStore(pluginId: string): PluginStore {
    return this.#pluginStores(pluginId);
  }

  async close(): Promise<void> {
    await this.rateLimits?.close?.();
    await this.feed?.close();
    return this.#exec.close();
  }

  findKeyByHash(hash: string): Promise<KeyWithChannel | null> {
    if (this.#keys) return this.#keys.find(hash, this.#readKey);
    return this.#exec.rowVersions ? this.#readKeyByVersion(hash) : this.#readKey(hash);
  }

  readonly #readKey = async (hash: string): Promise<KeyWithChannel | null> => {
    const row = (await this.#exec.rows(this.#queries.keyByHash.bind([hash])))[0];
    if (!row) return null;
    return Object.freeze({ key: keyOf(row), channel: this.#channels.of(row) });
  };

  /**
   * The key with its channel's version, and the channel's columns only when that version is
   * not the one already made into a record: one statement of ten columns instead of the
   * channel's thirty-three in the usual case (docs/benchmarks.md, "The key lookup by its
   * channel's version"). A channel changed by any process is still seen on the next request.
   */
  async #readKeyByVersion(hash: string): Promise<KeyWithChannel | null> {
    const row = (await this.#exec.rows(this.#queries.keyAndChannelVersion.bind([hash])))[0];
    if (!row) return null;
    let channel = this.#channels.ofVersion(row.id, row.channel_version);
    if (channel === undefined) {
      const channelRow = (await this.#exec.rows(this.#queries.channelWithVersion.bind([row.id])))[0];
      // The channel deleted since: the key has nothing to open.
      if (!channelRow) return null;
      channel = this.#channels.of(channelRow, channelRow.channel_version);
    }
    return Object.freeze({ key: keyOf(row), channel });
  }

  async findConversation(id: string): Promise<ConversationRecord | null> {
    const row = (await this.#exec.rows(this.#queries.conversation.bind([id])))[0];
    return row ? rowToConversation(row) : null;
  }

  async listRecentMessages(conversationId: string, limit: number): Promise<MessageRecord[]> {
    const rows = await this.#exec.rows(this.#queries.recentMessages.bind([conversationId, limit]));
    return rows.reverse().map(rowToMessage);
  }

  async beginRun(input: BeginRunInput): Promise<RunTicket | null> {
    const { conversation } = input;
    if (conversation.isNew) {
      // Nobody else can know the id yet: the run holds ticket 0 and its turn at once.
      const { run, userMessage } = input;
      const row = this.#runRowAtClaim || input.stream ? runToRow(run, 0, input.stream) : null;
      await this.#insertConversation(newConversationRow(input), [messageToRow(conversation.id, 0, userMessage)], row);
      return {
        ticket: 0,
        claimed: { conversation: newConversationRecord(conversation, run.startedAt), userMessage: storedMessage(conversation.id, 0, userMessage) },
      };
    }
    // One round trip instead of a transaction of six: docs/benchmarks.md, "Runs that take turns: what they cost".
    if (this.#exec.dataModifyingCtes) return this.#beginInOneStatement(input);
    return this.#exec.transaction(() => takeTicket(this.#queries, input, this.#runRowAtClaim));
  }

  async claimTurn(input: ClaimTurnInput): Promise<ClaimedTurn | null> {
    const queries = this.#queries;
    const { conversation, ticket } = input;
    // A read first: waiting runs poll, and only the one whose turn came (or that finds the
    // turn lapsed) takes the write lock.
    const [row] = await this.#exec.rows(queries.queue.bind([conversation.id]));
    if (!row) return null;
    const serving = Number(row.serving);
    if (serving > ticket) throw new TurnPassedOver(conversation.id, ticket);
    const lapsed = serving < ticket && (row.lease_until === null || row.lease_until < input.now);
    if (serving !== ticket && !lapsed) return null;
    return this.#exec.transaction(() => claimServedTurn(this.#queries, input, serving, lapsed, this.#runRowAtClaim));
  }

  async renewTurn(conversationId: string, ticket: number, leaseUntil: string): Promise<boolean> {
    const rows = await this.#exec.rows(this.#queries.renew.bind([leaseUntil, conversationId, ticket]));
    return rows.length > 0;
  }

  async completeRun(input: CompleteRunInput): Promise<MessageRecord[]> {
    const setsFlowState = input.claimed && "flowState" in input;
    const mode = input.claimed ? input.mode : undefined;
    const liveChatUserTurn = input.claimed ? input.liveChatUserTurn : undefined;
    // One round trip instead of a transaction of five: docs/benchmarks.md, "Runs that take turns: what they cost".
    // A mode change, a live chat's user turn and a run that never held its turn keep the transaction.
    if (this.#exec.dataModifyingCtes && input.claimed && !mode && liveChatUserTurn === undefined) return this.#completeInOneStatement(input, setsFlowState);
    // A recorded run has its row from its ticket on; a claimed one from its claim where the store writes it then.
    const hasRow = input.streamEnd !== undefined || (input.claimed && this.#runRowAtClaim);
    return this.#exec.transaction(() => completeInTransaction(this.#queries, input, setsFlowState, mode, liveChatUserTurn, hasRow));
  }

  /**
   * {@link beginRun} on an existing conversation as one statement (`beginRun` of the
   * queries): the ticket, and the claim when the ticket is served at once, under the row
   * lock the conversation's `UPDATE` takes first, as the transaction does.
   */
  async #beginInOneStatement(input: BeginRunInput): Promise<RunTicket | null> {
    const { conversation, run, userMessage } = input;
    const values = takeTicketValues(input).concat(
      valuesOf(MESSAGE_VALUE_COLUMNS, [messageToRow(conversation.id, 0, userMessage)]),
      valuesOf(RUN_VALUE_COLUMNS, [runToRow(run, null, input.stream)]),
    );
    const [row] = await this.#exec.rows(this.#queries.beginRun.get(input.stream !== undefined).bind(values));
    if (!row) return null;
    const ticket = Number(row.next_ticket) - 1;
    if (Number(row.serving) !== ticket) return { ticket, claimed: null };
    const record = rowToConversation(row);
    return { ticket, claimed: { conversation: record, userMessage: storedMessage(conversation.id, record.nextTurn - 1, userMessage) } };
  }

  /**
   * {@link completeRun} of a claimed run as one statement (`completeRun` of the queries):
   * the counters under the conversation's row lock first, then the messages at the turn
   * indexes they return, then the run's row. Skipping tickets whose run already ended, when
   * some are queued, follows it.
   */
  async #completeInOneStatement(input: CompleteRunInput, setsFlowState: boolean): Promise<MessageRecord[]> {
    const { conversation, messages, run, ticket } = input;
    const count = messages.length;
    const rows = messages.map((message) => messageToRow(conversation.id, 0, message));
    const values = finishTurnArgs(count, run.completedAt, ticket, input.claimUntil, conversation.id, setsFlowState, input.flowState).concat(
      valuesOf(MESSAGE_VALUE_COLUMNS, rows),
      runOutcomeValues(run, input.streamEnd ?? null),
    );
    const [row] = await this.#exec.rows(this.#queries.completeRun.get(completeRunKey(count, setsFlowState)).bind(values));
    if (!row) throw new Error(`channelkit: conversation ${conversation.id} was not stored`);
    const first = Number(row.next_turn) - count;
    const serving = Number(row.serving);
    if (serving === ticket + 1 && serving < Number(row.next_ticket)) await this.#skipEndedTickets(conversation.id, serving, input.claimUntil);
    return messages.map((message, i) => storedMessage(conversation.id, first + i, message));
  }

  /**
   * {@link skipEndedTickets} after the statement that passed the turn on to `from`, outside
   * a transaction: its compare-and-set on `from` moves nothing if the ended run's own
   * completion, or a takeover, moved the queue meanwhile. Until it is done the queue waits on
   * a ticket nobody claims; should it fail, the next ticket takes the turn over when the lease
   * lapses (claimTurn), as after an instance that stopped. The run's outcome is stored either
   * way, so a failure here is not the run's.
   */
  async #skipEndedTickets(conversationId: string, from: number, claimUntil: string): Promise<void> {
    try {
      await runBody(skipEndedTickets(this.#queries, conversationId, from, claimUntil), async (query) => this.#exec.rows(query));
    } catch {
      // See above: the lease passes the turn on.
    }
  }

  async storeRun(input: StoreRunInput): Promise<MessageRecord[]> {
    const { conversation, messages, run } = input;
    const flowState = "flowState" in input ? toJson(input.flowState) : null;
    // Its ticket 0 taken and passed on: the run is over.
    await this.#insertConversation(
      {
        id: conversation.id,
        tenant_id: conversation.tenantId,
        channel_id: conversation.channelId,
        mode: input.mode ?? "bot",
        flow_state: flowState,
        next_turn: messages.length,
        livechat_conversation_id: null,
        created_at: run.startedAt,
        updated_at: run.completedAt,
        next_ticket: 1,
        serving: 1,
        lease_until: null,
        language: conversation.language ?? null,
        mode_since: input.mode === undefined ? run.startedAt : run.completedAt,
      },
      messages.map((message, i) => messageToRow(conversation.id, i, message)),
      runToRow(run, 0),
    );
    return messages.map((message, i) => storedMessage(conversation.id, i, message));
  }

  /**
   * Inserts a conversation, its first messages and a run: one statement where the database
   * allows, else one transaction.
   */
  #insertConversation(conversation: ConversationRow, messages: MessagesTable[], run: RunsTable | null): Promise<unknown> | unknown {
    const queries = this.#queries;
    if (this.#exec.dataModifyingCtes && messages.length > 0 && run) {
      // The statement's parameters: the conversation's row, each message's, the run's.
      const values = new Array<unknown>(CONVERSATION_COLUMNS.length + messages.length * MESSAGE_COLUMNS.length + RUN_COLUMNS.length);
      let at = putValues(values, 0, CONVERSATION_COLUMNS, conversation);
      for (const message of messages) at = putValues(values, at, MESSAGE_COLUMNS, message);
      putValues(values, at, RUN_COLUMNS, run);
      return this.#exec.rows(queries.newConversation.get(messages.length).bind(values));
    }
    return this.#exec.transaction(() => insertConversationRows(queries, conversation, messages, run));
  }

  async updateLiveChat(input: LiveChatUpdate): Promise<{ conversation: ConversationRecord; messages: MessageRecord[] } | null> {
    return this.#exec.transaction(() => changeLiveChat(this.#queries, input));
  }

  async listLiveChatConversations(query: LiveChatQuery): Promise<ConversationRecord[]> {
    if (query.modes.length === 0 || query.limit <= 0) return [];
    const rows = await this.#exec.rows(
      this.db
        .selectFrom("conversations")
        .select(CONVERSATION_COLUMNS)
        .where("tenant_id", "=", query.tenantId)
        .where("mode", "in", query.modes)
        .orderBy("mode_since", "asc")
        .orderBy("id", "asc")
        .limit(query.limit)
        .compile(),
    );
    return rows.map(rowToConversation);
  }

  async countLiveChatWaiting(query: LiveChatWaitingQuery): Promise<number> {
    // The waits the channels set, a few values: a conversation of a channel waits while it
    // entered the mode after the channel's cutoff (ISO 8601 texts compare as their times).
    const waits = await this.#exec.rows(this.db.selectFrom("channels").select("livechat_wait_timeout_seconds as seconds").distinct().compile());
    if (waits.length === 0) return 0;
    const nowMs = Date.parse(query.at);
    const cutoff = (seconds: number | null) => new Date(nowMs - (seconds === null ? query.defaultWaitTimeoutMs : Number(seconds) * 1000)).toISOString();
    const [row] = await this.#exec.rows(
      this.db
        .selectFrom("conversations as c")
        .innerJoin("channels as ch", "ch.id", "c.channel_id")
        .select((eb) => eb.fn.countAll().as("count"))
        // On the index of (tenant_id, mode): a range of each tenant's waiting conversations, never the table.
        .where("c.tenant_id", "in", (eb) => eb.selectFrom("tenants").select("tenants.id"))
        .where("c.mode", "=", "livechat_waiting")
        .where((eb) =>
          eb.or(
            waits.map(({ seconds }) =>
              eb.and([
                seconds === null ? eb("ch.livechat_wait_timeout_seconds", "is", null) : eb("ch.livechat_wait_timeout_seconds", "=", seconds),
                eb("c.mode_since", ">", cutoff(seconds)),
              ]),
            ),
          ),
        )
        .compile(),
    );
    return Number(row?.count ?? 0);
  }

  async listMessagesAfter(conversationId: string, afterTurn: number, limit: number): Promise<MessageRecord[]> {
    if (limit <= 0) return [];
    const rows = await this.#exec.rows(this.#queries.messagesAfter.bind([conversationId, afterTurn, limit]));
    return rows.map(rowToMessage);
  }

  async deleteConversations(input: DeleteConversationsInput): Promise<DeleteConversationsResult> {
    const ids = [...new Set(input.conversationIds)];
    if (ids.length === 0) return { deleted: [], busy: [] };
    const db = this.db;
    // The SQLite feed's table (Postgres's feed is NOTIFY, which keeps nothing) holds doorbells naming conversations.
    const liveFeed = db.getExecutor().adapter instanceof SqliteAdapter;
    return this.#exec.transaction(() => deleteConversationsBody(db, ids, input, liveFeed));
  }

  async findEndUserConversations(query: EndUserQuery): Promise<string[]> {
    // A first cut in SQL (the id as JSON text, anywhere in the metadata), then the exact match on the parsed metadata.
    const pattern = `%${escapeLike(JSON.stringify(query.externalUserId))}%`;
    let select = this.db
      .selectFrom("messages")
      .innerJoin("conversations", "conversations.id", "messages.conversation_id")
      .select(["messages.conversation_id", "messages.metadata", "conversations.created_at"])
      .where(sql<boolean>`${sql.ref("messages.metadata")} like ${pattern} escape '\\'`);
    if (query.tenantId !== undefined) select = select.where("conversations.tenant_id", "=", query.tenantId);
    const rows = await this.#exec.rows(select.compile());
    const found = new Map<string, string>();
    for (const row of rows) {
      if (!found.has(row.conversation_id) && metadataNamesEndUser(row.metadata, query.externalUserId)) found.set(row.conversation_id, row.created_at);
    }
    return [...found].sort(([a, at], [b, bt]) => (at === bt ? (a < b ? -1 : a > b ? 1 : 0) : at < bt ? -1 : 1)).map(([id]) => id);
  }

  async findEndedConversations(query: EndedConversationQuery): Promise<string[]> {
    const rows = await this.#exec.rows(
      this.db
        .selectFrom("conversations")
        .select("id")
        .where("channel_id", "=", query.channelId)
        .where("updated_at", "<", query.before)
        .where((eb) => eb(eb.fn.coalesce("mode_since", "created_at"), "<", query.before))
        .where("mode", "not in", [...LIVE_MODES])
        .limit(query.limit)
        .compile(),
    );
    return rows.map((row) => row.id);
  }

  async listConversations(query: ConversationQuery): Promise<ConversationRecord[]> {
    if (query.limit <= 0 || query.ids?.length === 0) return [];
    const { before } = query;
    let select = this.db.selectFrom("conversations").select(CONVERSATION_COLUMNS);
    if (query.tenantId !== undefined) select = select.where("tenant_id", "=", query.tenantId);
    if (query.channelId !== undefined) select = select.where("channel_id", "=", query.channelId);
    if (query.since !== undefined) select = select.where("created_at", ">=", query.since);
    if (query.until !== undefined) select = select.where("created_at", "<", query.until);
    if (query.ids !== undefined) select = select.where("id", "in", [...query.ids]);
    if (before !== undefined) {
      select = select.where((eb) =>
        eb.or([eb("created_at", "<", before.createdAt), eb.and([eb("created_at", "=", before.createdAt), eb("id", "<", before.id)])]),
      );
    }
    const rows = await this.#exec.rows(select.orderBy("created_at", "desc").orderBy("id", "desc").limit(query.limit).compile());
    return rows.map(rowToConversation);
  }

  async findRun(id: string) {
    const row = (await this.#exec.rows(this.db.selectFrom("runs").selectAll().where("id", "=", id).compile()))[0];
    return row ? rowToRun(row) : null;
  }

  async createTenant(tenant: TenantRecord, audit?: AuditEventRecord): Promise<void> {
    const db = this.db;
    await this.#exec.transaction(function* () {
      yield* rowsOf(db.insertInto("tenants").values({ id: tenant.id, name: tenant.name, created_at: tenant.createdAt }).compile());
      if (audit) yield* rowsOf(db.insertInto("audit_events").values(auditToRow(audit)).compile());
    });
  }

  async findTenant(id: string): Promise<TenantRecord | null> {
    const row = (await this.#exec.rows(this.db.selectFrom("tenants").selectAll().where("id", "=", id).compile()))[0];
    return row ? { id: row.id, name: row.name, createdAt: row.created_at } : null;
  }

  async countTenants(): Promise<number> {
    const [row] = await this.#exec.rows(
      this.db
        .selectFrom("tenants")
        .select((eb) => eb.fn.countAll().as("count"))
        .compile(),
    );
    return Number(row?.count ?? 0);
  }

  async listTenants(): Promise<TenantRecord[]> {
    const rows = await this.#exec.rows(this.db.selectFrom("tenants").selectAll().orderBy("created_at").orderBy("id").compile());
    return rows.map((row) => ({ id: row.id, name: row.name, createdAt: row.created_at }));
  }

  async createChannel(channel: ChannelRecord, key: ApiKeyRecord, audit?: AuditEventRecord): Promise<void> {
    const db = this.db;
    await this.#exec.transaction(function* () {
      yield* rowsOf(db.insertInto("channels").values(channelToRow(channel)).compile());
      yield* rowsOf(db.insertInto("api_keys").values(keyToRow(key)).compile());
      if (audit) yield* rowsOf(db.insertInto("audit_events").values(auditToRow(audit)).compile());
    });
  }

  async findChannel(id: string): Promise<ChannelRecord | null> {
    const row = (await this.#exec.rows(this.db.selectFrom("channels").selectAll().where("id", "=", id).compile()))[0];
    return row ? rowToChannel(row) : null;
  }

  findChannelByClientId(clientId: string): Promise<ChannelRecord | null> {
    return this.#clients ? this.#clients.find(clientId, this.#readClient) : this.#readClient(clientId);
  }

  readonly #readClient = async (clientId: string): Promise<ChannelRecord | null> => {
    const row = (await this.#exec.rows(this.#queries.channelByClientId.bind([clientId])))[0];
    return row ? this.#channels.of(row) : null;
  };

  async listChannels(query: ChannelQuery = {}): Promise<ChannelRecord[]> {
    let select = this.db.selectFrom("channels").selectAll();
    if (query.tenantId !== undefined) select = select.where("tenant_id", "=", query.tenantId);
    const rows = await this.#exec.rows(select.orderBy("created_at").orderBy("id").compile());
    return rows.map(rowToChannel);
  }

  async updateChannel(id: string, patch: ChannelPatch, updatedAt: string, audit?: AuditEventRecord, expected?: ExpectedChannel): Promise<ChannelRecord | null> {
    const db = this.db;
    // Archived is final: the guard is in the statement, so a channel archived by another
    // process between an admin's check and this write stays as it is.
    let update = db
      .updateTable("channels")
      .set({ ...patchToRow(patch), updated_at: updatedAt })
      .where("id", "=", id)
      .where("state", "<>", "archived");
    if (expected?.requireSignature !== undefined) update = update.where("require_signature", "=", expected.requireSignature ? 1 : 0);
    const secret = expected?.signingSecretEncrypted;
    if (secret !== undefined) update = update.where("signing_secret_encrypted", secret === null ? "is" : "=", secret);
    if (expected?.settings !== undefined) update = update.where("settings", "=", JSON.stringify(expected.settings));
    const sealed = expected?.sealedSettings;
    if (sealed !== undefined) update = update.where("sealed_settings", sealed === null ? "is" : "=", sealed);
    const compiled = update.returningAll().compile();
    const row = await this.#exec.transaction(function* () {
      const [updated] = yield* rowsOf(compiled);
      if (updated && audit) yield* rowsOf(db.insertInto("audit_events").values(auditToRow(audit)).compile());
      return updated;
    });
    return row ? rowToChannel(row) : null;
  }

  async replaceChannelKey(channelId: string, key: ApiKeyRecord, revokedAt: string, audit?: AuditEventRecord): Promise<boolean> {
    const db = this.db;
    return this.#exec.transaction(function* () {
      // The channel first: its row lock orders concurrent rotations, and an archived channel gets no new key.
      const [channel] = yield* rowsOf(
        db
          .updateTable("channels")
          .set({ api_key_hint: key.hint, updated_at: revokedAt })
          .where("id", "=", channelId)
          .where("state", "<>", "archived")
          .returning("id")
          .compile(),
      );
      if (!channel) return false;
      yield* rowsOf(db.updateTable("api_keys").set({ revoked_at: revokedAt }).where("channel_id", "=", channelId).where("revoked_at", "is", null).compile());
      yield* rowsOf(db.insertInto("api_keys").values(keyToRow(key)).compile());
      if (audit) yield* rowsOf(db.insertInto("audit_events").values(auditToRow(audit)).compile());
      return true;
    });
  }

  async appendAuditEvent(event: AuditEventRecord): Promise<void> {
    await this.#exec.rows(this.db.insertInto("audit_events").values(auditToRow(event)).compile());
  }

  async listAuditEvents(query: AuditQuery): Promise<AuditEventRecord[]> {
    const { before, tenantId, channelId } = query;
    let select = this.db.selectFrom("audit_events").selectAll();
    if (tenantId !== undefined) select = select.where("tenant_id", "=", tenantId);
    if (channelId !== undefined) select = select.where("channel_id", "=", channelId);
    if (before !== undefined) {
      select = select.where((eb) =>
        eb.or([eb("timestamp", "<", before.timestamp), eb.and([eb("timestamp", "=", before.timestamp), eb("id", "<", before.id)])]),
      );
    }
    const rows = await this.#exec.rows(select.orderBy("timestamp", "desc").orderBy("id", "desc").limit(query.limit).compile());
    return rows.map(rowToAudit);
  }
}

/** `text` for a `LIKE` pattern whose escape character is a backslash: its `%`, `_` and backslashes match themselves. */
function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (character) => `\\${character}`);
}

/** Counts by conversation id, from rows of `(conversation_id, n)`. */
function countsOf(rows: { conversation_id: string; n: unknown }[]): Map<string, number> {
  return new Map(rows.map((row) => [row.conversation_id, Number(row.n)]));
}

/**
 * {@link KyselyStorage.deleteConversations}'s transaction: the conversations' rows locked
 * first (an update that changes nothing), so that a run taking a ticket meanwhile either
 * comes before (and the conversation is busy) or finds it gone; then every row of theirs,
 * children before the conversations their foreign keys name.
 */
function* deleteConversationsBody(
  db: Kysely<Database>,
  ids: string[],
  input: DeleteConversationsInput,
  liveFeed: boolean,
): TransactionBody<DeleteConversationsResult> {
  let lock = db
    .updateTable("conversations")
    .set((eb) => ({ updated_at: eb.ref("updated_at") }))
    .where("id", "in", ids);
  if (input.tenantId !== undefined) lock = lock.where("tenant_id", "=", input.tenantId);
  const found = yield* rowsOf(lock.returning(["id", "tenant_id", "channel_id", "serving", "next_ticket", "lease_until"]).compile());
  const busy = found
    .filter((row) => Number(row.serving) < Number(row.next_ticket) && row.lease_until !== null && row.lease_until >= input.now)
    .map((row) => row.id);
  if (busy.length > 0 || found.length === 0) return { deleted: [], busy };
  const gone = found.map((row) => row.id);
  const messages = countsOf(
    yield* rowsOf(
      db
        .selectFrom("messages")
        .select((eb) => ["conversation_id", eb.fn.countAll().as("n")])
        .where("conversation_id", "in", gone)
        .groupBy("conversation_id")
        .compile(),
    ),
  );
  const runs = countsOf(
    yield* rowsOf(
      db
        .selectFrom("runs")
        .select((eb) => ["conversation_id", eb.fn.countAll().as("n")])
        .where("conversation_id", "in", gone)
        .groupBy("conversation_id")
        .compile(),
    ),
  );
  yield* rowsOf(
    db
      .deleteFrom("run_stream_chunks")
      .where("run_id", "in", db.selectFrom("runs").select("id").where("conversation_id", "in", gone))
      .compile(),
  );
  yield* rowsOf(db.deleteFrom("runs").where("conversation_id", "in", gone).compile());
  yield* rowsOf(db.deleteFrom("messages").where("conversation_id", "in", gone).compile());
  for (const row of found) {
    // A conversation's id is a UUID (no LIKE wildcard in it): an answer or a key that names it is its own.
    yield* rowsOf(db.deleteFrom("idempotency_keys").where("channel_id", "=", row.channel_id).where("response_body", "like", `%${row.id}%`).compile());
    yield* rowsOf(db.deleteFrom("plugin_kv").where("key", "like", `%${row.id}%`).compile());
    if (liveFeed) {
      yield* rowsOf(
        db
          .deleteFrom("live_feed")
          .where((eb) => eb.or([eb("topic", "like", `%${row.id}%`), eb("message", "like", `%${row.id}%`)]))
          .compile(),
      );
    }
  }
  yield* rowsOf(db.deleteFrom("conversations").where("id", "in", gone).compile());
  const deleted: DeletedConversation[] = found.map((row) => ({
    id: row.id,
    tenantId: row.tenant_id,
    channelId: row.channel_id,
    messages: messages.get(row.id) ?? 0,
    runs: runs.get(row.id) ?? 0,
  }));
  if (input.audit)
    yield* rowsOf(
      db
        .insertInto("audit_events")
        .values(auditToRow(input.audit(deleted)))
        .compile(),
    );
  return { deleted, busy: [] };
}

type Queries = ReturnType<typeof requestPathQueries>;

// The request path's transaction bodies are generator functions of the module, given their
// inputs as arguments, not closures made per call: a generator function made afresh needs a
// hidden class and a prototype of its own on its first call, 1.4 µs in a loop and 3.6 µs at
// rest for each transaction (docs/benchmarks.md, "Transaction bodies made once").

/** {@link KyselyStorage.beginRun}'s transaction on an existing conversation: its ticket, and its claim when served at once. */
function* takeTicket(queries: Queries, input: BeginRunInput, rowAtClaim: boolean): TransactionBody<RunTicket | null> {
  const [row] = yield* rowsOf(queries.takeTicket.bind(takeTicketValues(input)));
  if (!row) return null;
  const ticket = Number(row.next_ticket) - 1;
  if (Number(row.serving) !== ticket) {
    // A recorded stream is findable from its first event: a run that waits for its turn
    // has its row from its ticket on.
    if (input.stream) yield* rowsOf(queries.insertRun.bind(valuesOf(RUN_COLUMNS, [runToRow(input.run, ticket, input.stream)])));
    return { ticket, claimed: null };
  }
  const record = rowToConversation(row);
  const userMessage = yield* storeClaim(queries, input, ticket, record.nextTurn - 1, false, rowAtClaim);
  return { ticket, claimed: { conversation: record, userMessage } };
}

/** {@link KyselyStorage.claimTurn}'s transaction: a lapsed turn taken over first, then the claim. */
function* claimServedTurn(queries: Queries, input: ClaimTurnInput, serving: number, lapsed: boolean, rowAtClaim: boolean): TransactionBody<ClaimedTurn | null> {
  const { conversation, ticket } = input;
  if (lapsed) {
    // The run being served stopped with its instance, or its ticket was never claimed:
    // store it cancelled and serve this ticket at once, past the ones between (each of
    // which would otherwise cost its claim time again, for a waiter that died with the
    // instance; a live one queues again). The CAS on `serving` makes one waiter do it; the
    // others find the queue moved.
    const [moved] = yield* rowsOf(queries.takeOver.bind([input.claimUntil, conversation.id, serving, input.now, ticket]));
    if (moved) {
      yield* rowsOf(queries.cancelLapsed.bind([input.now, ABANDONED_RUN_ERROR, conversation.id, serving, ticket]));
      // A lapsed run that is not recorded has no row where it is written with its outcome.
      if (!rowAtClaim) yield* rowsOf(queries.cancelLapsedUnwritten.bind([input.now, ABANDONED_RUN_ERROR, conversation.id, serving]));
    }
  }
  return yield* claim(queries, input, ticket, input.stream !== undefined, rowAtClaim);
}

/** {@link KyselyStorage.completeRun}'s transaction: the mode, the counters, the messages, the run, the turn passed on. */
function* completeInTransaction(
  queries: Queries,
  input: CompleteRunInput,
  setsFlowState: boolean,
  mode: ModeChange | undefined,
  liveChatUserTurn: number | undefined,
  hasRow: boolean,
): TransactionBody<MessageRecord[]> {
  const { conversation, messages, run, ticket, streamEnd } = input;
  const count = messages.length;
  // A mode change goes before the counters move: its guard is that the run still holds
  // its turn. Like the counters, it takes the write lock (SQLite) or the row lock (Postgres).
  if (mode) {
    yield* rowsOf(queries.runModeChange.bind([mode.to, mode.at, mode.livechatConversationId ?? null, mode.at, conversation.id, ticket, mode.from, mode.since]));
  }
  if (liveChatUserTurn !== undefined) yield* rowsOf(queries.toLiveChatUser.bind([conversation.id, liveChatUserTurn, input.liveChatUserMessageId ?? null]));
  // Moving the counters takes the write lock (SQLite) or the row lock (Postgres) at once
  // when nothing above did, so this run's turn indexes are a range nobody else can take.
  const [row] = yield* rowsOf(
    queries.finishTurn
      .get(setsFlowState)
      .bind(finishTurnArgs(count, run.completedAt, ticket, input.claimUntil, conversation.id, setsFlowState, input.flowState)),
  );
  if (!row) throw new Error(`channelkit: conversation ${conversation.id} was not stored`);
  const first = Number(row.next_turn) - count;
  if (count > 0) {
    const rows = messages.map((message, i) => messageToRow(conversation.id, first + i, message));
    yield* rowsOf(queries.insertMessages.get(count).bind(valuesOf(MESSAGE_COLUMNS, rows)));
  }
  // A recorded stream ends with its run's outcome, in the same write.
  if (hasRow) {
    yield* rowsOf(queries.finishRun.bind(runOutcomeValues(run, streamEnd ?? null)));
  } else {
    const insert = input.claimed ? queries.storeRunOutcome : queries.insertRun;
    yield* rowsOf(insert.bind(valuesOf(RUN_COLUMNS, [runToRow(run, ticket)])));
  }
  // The turn passed on when this ticket was the one served: skip tickets whose run
  // already ended (cancelled while waiting), unless nobody else is queued.
  const serving = Number(row.serving);
  if (serving === ticket + 1 && serving < Number(row.next_ticket)) yield* skipEndedTickets(queries, conversation.id, serving, input.claimUntil);
  // What was stored, from what was given rather than parsed back from the rows.
  return messages.map((message, i) => storedMessage(conversation.id, first + i, message));
}

/** {@link KyselyStorage}'s new conversation as a transaction: its row, its first messages and a run. */
function* insertConversationRows(queries: Queries, conversation: ConversationRow, messages: MessagesTable[], run: RunsTable | null): TransactionBody<void> {
  yield* rowsOf(queries.insertConversation.bind(valuesOf(CONVERSATION_COLUMNS, [conversation])));
  if (messages.length > 0) yield* rowsOf(queries.insertMessages.get(messages.length).bind(valuesOf(MESSAGE_COLUMNS, messages)));
  if (run) yield* rowsOf(queries.insertRun.bind(valuesOf(RUN_COLUMNS, [run])));
}

/** {@link KyselyStorage.updateLiveChat}'s transaction: the mode change under its guard, then the messages. */
function* changeLiveChat(queries: Queries, input: LiveChatUpdate): TransactionBody<{ conversation: ConversationRecord; messages: MessageRecord[] } | null> {
  const { change, conversationId, messages } = input;
  const since = change.to === change.from ? change.since : change.at;
  const count = messages.length;
  const [row] = yield* rowsOf(
    queries.liveChatChange.bind([count, change.to, since, change.livechatConversationId ?? null, change.at, conversationId, change.from, change.since]),
  );
  if (!row) return null;
  const conversation = rowToConversation(row);
  const first = conversation.nextTurn - count;
  if (count > 0) {
    const rows = messages.map((message, i) => messageToRow(conversationId, first + i, message));
    yield* rowsOf(queries.insertMessages.get(count).bind(valuesOf(MESSAGE_COLUMNS, rows)));
  }
  return { conversation, messages: messages.map((message, i) => storedMessage(conversationId, first + i, message)) };
}

/**
 * Claims `ticket`'s turn if it is the one served: the lease, the next turn index for the
 * user message, the message and the run's row (see {@link storeClaim}). Null when it is not
 * its turn. `queued` when the run's row was written with its ticket (a recorded run that
 * waited); `rowAtClaim` when a run that is not recorded gets its row now rather than with
 * its outcome.
 */
function* claim(queries: Queries, input: BeginRunInput, ticket: number, queued: boolean, rowAtClaim: boolean): TransactionBody<ClaimedTurn | null> {
  const { conversation } = input;
  const [row] = yield* rowsOf(queries.claim.bind([input.leaseUntil, input.now, conversation.id, ticket]));
  if (!row) return null;
  const record = rowToConversation(row);
  const userMessage = yield* storeClaim(queries, input, ticket, record.nextTurn - 1, queued, rowAtClaim);
  return { conversation: record, userMessage };
}

/** A conversation's row as inserted: every column, by name (the statements take them in the order of {@link CONVERSATION_COLUMNS}). */
type ConversationRow = { [Column in (typeof CONVERSATION_COLUMNS)[number]]: Selectable<ConversationsTable>[Column] };

/** The row of the conversation a run starts: its ticket 0 served, its user message counted. */
function newConversationRow(input: BeginRunInput): ConversationRow {
  const { conversation, run } = input;
  return {
    id: conversation.id,
    tenant_id: conversation.tenantId,
    channel_id: conversation.channelId,
    mode: "bot",
    flow_state: null,
    next_turn: 1,
    livechat_conversation_id: null,
    created_at: run.startedAt,
    updated_at: run.startedAt,
    next_ticket: 1,
    serving: 0,
    lease_until: input.leaseUntil,
    language: conversation.language ?? null,
    mode_since: run.startedAt,
  };
}

/** The values of `finishRun`: the run's outcome on its row, by column, then the run's id. */
function runOutcomeValues(run: RunRecord, streamTail: string | null): unknown[] {
  const outcome: { [Column in (typeof RUN_OUTCOME_COLUMNS)[number]]: RunsTable[Column] } = {
    status: run.status,
    result: toJson(run.result),
    error: run.error,
    execution_order: JSON.stringify(run.executionOrder),
    completed_at: run.completedAt,
    duration_ms: run.durationMs,
    stream_tail: streamTail,
  };
  const values = new Array<unknown>(RUN_OUTCOME_COLUMNS.length + 1);
  values[putValues(values, 0, RUN_OUTCOME_COLUMNS, outcome)] = run.id;
  return values;
}

/**
 * Writes what a claim stores: the user message at `turn` and the run's `running` row (a run
 * that is not recorded: only when `rowAtClaim`), or, when `queued`, its start on the row it
 * wrote with its ticket.
 */
function* storeClaim(
  queries: Queries,
  input: BeginRunInput,
  ticket: number,
  turn: number,
  queued: boolean,
  rowAtClaim: boolean,
): TransactionBody<MessageRecord> {
  const id = input.conversation.id;
  yield* rowsOf(queries.insertMessages.get(1).bind(valuesOf(MESSAGE_COLUMNS, [messageToRow(id, turn, input.userMessage)])));
  if (queued) yield* rowsOf(queries.claimRecordedRun.bind([input.run.startedAt, input.run.id]));
  else if (rowAtClaim || input.stream) yield* rowsOf(queries.insertRun.bind(valuesOf(RUN_COLUMNS, [runToRow(input.run, ticket, input.stream)])));
  return storedMessage(id, turn, input.userMessage);
}

/** The arguments of `finishTurn`: the flow state follows only when the run sets it. */
function finishTurnArgs(
  count: number,
  completedAt: string,
  ticket: number,
  claimUntil: string,
  conversationId: string,
  setsFlowState: boolean,
  flowState: unknown,
): unknown[] {
  const args: unknown[] = [count, completedAt, ticket, claimUntil, conversationId];
  if (setsFlowState) args.push(toJson(flowState));
  return args;
}

/**
 * Serves `from`, or the first ticket after it whose run has not already ended: a run
 * cancelled while it waited stored itself with its ticket and is skipped. The serve is a
 * compare-and-set on `from` being served: inside the transaction that passed the turn on to
 * it, it always is; after a statement of its own, the queue may have moved meanwhile.
 */
function* skipEndedTickets(queries: Queries, conversationId: string, from: number, claimUntil: string): TransactionBody<void> {
  let next = from;
  for (;;) {
    const [ended] = yield* rowsOf(queries.endedTicket.bind([conversationId, next]));
    if (!ended) break;
    next++;
  }
  if (next !== from) yield* rowsOf(queries.serveFrom.bind([next, claimUntil, conversationId, from]));
}

/**
 * The values of `rows`, row after row, each in the order of `columns`: the parameters of a
 * prepared insert. A loop rather than `flatMap`: see docs/benchmarks.md, "Why the code looks
 * like this".
 */
function valuesOf<Column extends string>(columns: readonly Column[], rows: readonly Record<Column, unknown>[]): unknown[] {
  const values = new Array<unknown>(columns.length * rows.length);
  let at = 0;
  for (const row of rows) at = putValues(values, at, columns, row);
  return values;
}

/** Puts `row`'s values into `values` from `at`, in the order of `columns`; returns where the next go. */
function putValues<Column extends string>(values: unknown[], at: number, columns: readonly Column[], row: Record<Column, unknown>): number {
  for (const column of columns) values[at++] = row[column];
  return at;
}

/** The column of each field a channel patch may set. */
const PATCH_COLUMNS = {
  name: "name",
  environment: "environment",
  state: "state",
  flowName: "flow_name",
  allowedOrigins: "allowed_origins",
  defaultStream: "default_stream",
  requireSignature: "require_signature",
  signingSecretEncrypted: "signing_secret_encrypted",
  languages: "languages",
  livechatMessages: "livechat_messages",
  livechatWaitTimeoutSeconds: "livechat_wait_timeout_seconds",
  runTimeoutSeconds: "run_timeout_seconds",
  rateLimits: "rate_limits",
  resumableStreams: "resumable_streams",
  widget: "widget",
  settings: "settings",
  sealedSettings: "sealed_settings",
  retentionDays: "retention_days",
} as const satisfies { [Field in keyof ChannelPatch]-?: keyof ChannelsTable };

/** The columns a patch sets: core's {@link storedChannelPatch} in their columns, flags as 0 or 1. */
function patchToRow(patch: ChannelPatch): Updateable<ChannelsTable> {
  const fields = storedChannelPatch(patch);
  const row: Record<string, unknown> = {};
  for (const field of Object.keys(fields) as (keyof ChannelPatch)[]) {
    const value = fields[field];
    row[PATCH_COLUMNS[field]] = typeof value === "boolean" ? Number(value) : value;
  }
  return row as Updateable<ChannelsTable>;
}

/**
 * Storage on a Kysely instance you configure: any dialect, your own logger or plugins. Its
 * statements go through Kysely's driver, which costs more per statement than the executors
 * of `sqlite()` and `postgres()`. `close()` destroys `db`.
 *
 * @example
 * const storage = kyselyStorage(new Kysely({ dialect, log: ["error"] }));
 */
export function kyselyStorage(db: Kysely<any>): KyselyStorage {
  return new KyselyStorage(db, kyselyExecutor(db));
}

/** The values of `takeTicketQuery` for a run arriving on an existing conversation. */
function takeTicketValues(input: BeginRunInput): unknown[] {
  const { conversation } = input;
  return [conversation.id, input.leaseUntil, input.now, conversation.tenantId, conversation.channelId];
}

/** The key of a key lookup's row, frozen: a kept key is handed to every request (WatchedCache). */
function keyOf(row: {
  id: string;
  key_id: string;
  key_tenant_id: string;
  key_hash: string;
  key_prefix: string;
  key_environment: string;
  key_hint: string;
  key_created_at: string;
  key_expires_at: string | null;
  key_revoked_at: string | null;
}): ApiKeyRecord {
  return Object.freeze({
    id: row.key_id,
    channelId: row.id,
    tenantId: row.key_tenant_id,
    hash: row.key_hash,
    prefix: row.key_prefix,
    environment: row.key_environment as ApiKeyRecord["environment"],
    hint: row.key_hint,
    createdAt: row.key_created_at,
    expiresAt: row.key_expires_at,
    revokedAt: row.key_revoked_at,
  });
}
