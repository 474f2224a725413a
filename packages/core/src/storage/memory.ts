import { memoryIdempotencyStore } from "./memory-idempotency.js";
import { memoryPluginStores, refuseTables } from "./memory-plugin-store.js";
import { TurnPassedOver } from "./turn-passed-over.js";
import { memoryRunStreams } from "./memory-streams.js";
import { ABANDONED_RUN_ERROR, LIVE_MODES, metadataNamesEndUser, storedChannelPatch } from "./records.js";
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
  MessageRecord,
  MigrateOptions,
  ModeChange,
  NewMessage,
  RunRecord,
  RunTicket,
  SchemaStatus,
  ExpectedChannel,
  Storage,
  TenantRecord,
  StoreRunInput,
} from "./types.js";

/*
 * Rows are kept as the SQL stores keep them: JSON fields as JSON text, so that what is read
 * back is always a new value (never an alias of what was written or of the store), and
 * `undefined` comes back exactly as the SQL stores give it back (a flow state of
 * `undefined` is read as `undefined`, a run result of `undefined` as `null`). Rows are
 * never mutated in place: an update puts a new row, so that a transaction can be undone.
 */

interface TenantRow {
  id: string;
  name: string;
  createdAt: string;
}

interface ChannelRow extends Omit<ChannelRecord, "allowedOrigins" | "languages" | "livechatMessages" | "widget" | "rateLimits" | "settings"> {
  widget: string;
  settings: string;
  rateLimits: string | null;
  allowedOrigins: string;
  languages: string;
  livechatMessages: string;
}

type KeyRow = ApiKeyRecord;

interface ConversationRow extends Omit<ConversationRecord, "flowState"> {
  flowState: string | null;
  nextTicket: number;
  serving: number;
  leaseUntil: string | null;
}

interface MessageRow extends Omit<MessageRecord, "toolCalls" | "metadata"> {
  toolCalls: string | null;
  metadata: string | null;
}

interface AuditRow extends Omit<AuditEventRecord, "changes"> {
  changes: string;
}

interface RunRow extends Omit<RunRecord, "result" | "executionOrder"> {
  result: string | null;
  executionOrder: string;
  ticket: number | null;
}

/** JSON text of a value; `undefined` is stored as null (as the SQL stores do). */
function toJson(value: unknown): string | null {
  return value === undefined ? null : (JSON.stringify(value) ?? null);
}

function fromJson<T>(text: string | null, fallback: T): T {
  return text === null ? fallback : (JSON.parse(text) as T);
}

/** A constraint the SQL schema enforces, failed: the write is refused as a database would refuse it. */
class ConstraintError extends Error {
  constructor(message: string) {
    super(`channelkit (memory storage): ${message}`);
    this.name = "ConstraintError";
  }
}

/**
 * A {@link Storage} kept in this process's memory, for unit tests of your own flows and
 * channels: no database, no migration, nothing to clean up. It behaves as the SQL stores
 * (`sqlite()`, `postgres()`) do, runs taking turns and constraint failures included (a
 * duplicate key hash, a conversation id that exists, a run of an unknown conversation), and
 * every write is atomic. Its data is per process and lost on exit: it cannot be shared by
 * several instances of a service, so it is not for production. `migrate()` does nothing (it
 * refuses a plugin with tables of its own: a plugin keeps its data in `pluginStore(id)`);
 * after `close()` every call fails, as on a closed database.
 *
 * @example
 * import { createChannelService, memoryStorage } from "@channelkit/core";
 *
 * const service = await createChannelService({ storage: memoryStorage(), flows: [myFlow] });
 * const { tenant } = await service.admin.createTenant({ name: "Test" });
 * const { api_key } = await service.admin.createChannel({ tenantId: tenant.id, flow: myFlow.name });
 * // ... then call service.handler(request) with `Authorization: Bearer ${api_key}`.
 */
export function memoryStorage(): Storage {
  const tenants = new Map<string, TenantRow>();
  const channels = new Map<string, ChannelRow>();
  /** Unique index on `channels.client_id` (nulls allowed, any number of them). */
  const channelsByClientId = new Map<string, string>();
  const keys = new Map<string, KeyRow>();
  /** Unique index on `api_keys.hash`. */
  const keysByHash = new Map<string, string>();
  const conversations = new Map<string, ConversationRow>();
  /** Messages by conversation, then by turn index (the primary key). */
  const messages = new Map<string, Map<number, MessageRow>>();
  const runs = new Map<string, RunRow>();
  /** Unique index on `runs (conversation_id, ticket)`. */
  const runsByTicket = new Map<string, string>();
  const auditEvents = new Map<string, AuditRow>();
  let closed = false;

  /** The undo steps of the transaction being applied, or null outside one. */
  let journal: (() => void)[] | null = null;

  /** Sets `map[key]` to `value` (or deletes it when `value` is undefined), undone if the transaction fails. */
  function put<K, V>(map: Map<K, V>, key: K, value: V | undefined): void {
    if (journal) {
      const had = map.has(key);
      const old = map.get(key);
      journal.push(() => (had ? map.set(key, old as V) : map.delete(key)));
    }
    if (value === undefined) map.delete(key);
    else map.set(key, value);
  }

  /** Runs `body` as one transaction: when it throws, every write it made is undone. */
  function transaction<T>(body: () => T): T {
    if (closed) throw new Error("channelkit (memory storage): the storage is closed");
    const undo: (() => void)[] = [];
    journal = undo;
    try {
      return body();
    } catch (error) {
      for (let i = undo.length - 1; i >= 0; i--) (undo[i] as () => void)();
      throw error;
    } finally {
      journal = null;
    }
  }

  // Inserts and their constraints (primary keys, unique indexes, foreign keys).

  function insertTenant(tenant: TenantRecord): void {
    if (tenants.has(tenant.id)) throw new ConstraintError(`tenant ${tenant.id} exists`);
    put(tenants, tenant.id, { id: tenant.id, name: tenant.name, createdAt: tenant.createdAt });
  }

  function insertChannel(channel: ChannelRecord): void {
    if (channels.has(channel.id)) throw new ConstraintError(`channel ${channel.id} exists`);
    if (!tenants.has(channel.tenantId)) throw new ConstraintError(`tenant ${channel.tenantId} of channel ${channel.id} does not exist`);
    if (channel.clientId !== null && channelsByClientId.has(channel.clientId)) throw new ConstraintError(`a channel with client id ${channel.clientId} exists`);
    put(channels, channel.id, channelToRow(channel));
    if (channel.clientId !== null) put(channelsByClientId, channel.clientId, channel.id);
  }

  function insertKey(key: ApiKeyRecord): void {
    if (keys.has(key.id)) throw new ConstraintError(`key ${key.id} exists`);
    if (keysByHash.has(key.hash)) throw new ConstraintError("a key with this hash exists");
    if (!channels.has(key.channelId)) throw new ConstraintError(`channel ${key.channelId} of key ${key.id} does not exist`);
    put(keys, key.id, { ...key });
    put(keysByHash, key.hash, key.id);
  }

  function insertConversation(row: ConversationRow): void {
    if (conversations.has(row.id)) throw new ConstraintError(`conversation ${row.id} exists`);
    if (!channels.has(row.channelId)) throw new ConstraintError(`channel ${row.channelId} of conversation ${row.id} does not exist`);
    put(conversations, row.id, row);
  }

  function insertMessage(conversationId: string, turnIndex: number, message: NewMessage): MessageRecord {
    if (!conversations.has(conversationId)) throw new ConstraintError(`conversation ${conversationId} does not exist`);
    let stored = messages.get(conversationId);
    if (!stored) {
      stored = new Map();
      put(messages, conversationId, stored);
    }
    if (stored.has(turnIndex)) throw new ConstraintError(`conversation ${conversationId} has a message at turn ${turnIndex}`);
    const row = messageToRow(conversationId, turnIndex, message);
    put(stored, turnIndex, row);
    return rowToMessage(row);
  }

  function insertRun(run: RunRecord, ticket: number | null): void {
    if (runs.has(run.id)) throw new ConstraintError(`run ${run.id} exists`);
    if (!conversations.has(run.conversationId)) throw new ConstraintError(`conversation ${run.conversationId} of run ${run.id} does not exist`);
    const ticketKey = ticket === null ? null : `${run.conversationId}\u0000${ticket}`;
    if (ticketKey !== null && runsByTicket.has(ticketKey)) throw new ConstraintError(`conversation ${run.conversationId} has a run with ticket ${ticket}`);
    put(runs, run.id, runToRow(run, ticket));
    if (ticketKey !== null) put(runsByTicket, ticketKey, run.id);
  }

  function insertAudit(event: AuditEventRecord | undefined): void {
    if (event === undefined) return;
    if (auditEvents.has(event.id)) throw new ConstraintError(`audit event ${event.id} exists`);
    put(auditEvents, event.id, { ...event, changes: JSON.stringify(event.changes) });
  }

  function runOfTicket(conversationId: string, ticket: number): RunRow | undefined {
    const id = runsByTicket.get(`${conversationId}\u0000${ticket}`);
    return id === undefined ? undefined : runs.get(id);
  }

  // The run queue, statement by statement as the SQL stores run it.

  /**
   * Claims `ticket`'s turn if it is the one served; null when it is not its turn. `queued`
   * when the run's row was written with its ticket (a recorded run that waited).
   */
  function claim(input: BeginRunInput, ticket: number, queued: boolean): ClaimedTurn | null {
    const id = input.conversation.id;
    const row = conversations.get(id);
    if (!row || row.serving !== ticket) return null;
    const claimed: ConversationRow = { ...row, nextTurn: row.nextTurn + 1, leaseUntil: input.leaseUntil, updatedAt: input.now };
    put(conversations, id, claimed);
    const userMessage = storeClaim(input, ticket, claimed.nextTurn - 1, queued);
    return { conversation: rowToConversation(claimed), userMessage };
  }

  /**
   * What a claim stores: the user message at `turn`, and a recorded run's `running` row or its
   * start on the row written with its ticket. A run that is not recorded gets its row with its
   * outcome, as on SQLite.
   */
  function storeClaim(input: BeginRunInput, ticket: number, turn: number, queued: boolean): MessageRecord {
    const userMessage = insertMessage(input.conversation.id, turn, input.userMessage);
    const row = runs.get(input.run.id);
    if (queued && row) put(runs, row.id, { ...row, startedAt: input.run.startedAt, completedAt: input.run.startedAt });
    else if (input.stream) insertRun(input.run, ticket);
    return userMessage;
  }

  /**
   * Stores a lapsed run that has no row (not recorded) `cancelled`, from its user message: the
   * conversation's last one whose run has no row, under the flow its channel is bound to.
   */
  function cancelUnwritten(conversationId: string, ticket: number, now: string): void {
    const conversation = conversations.get(conversationId);
    const channel = conversation && channels.get(conversation.channelId);
    const stored = messages.get(conversationId);
    if (!conversation || !channel || !stored) return;
    const user = [...stored.values()]
      .sort((a, b) => b.turnIndex - a.turnIndex)
      .find((message) => message.role === "user" && message.runId !== null && !runs.has(message.runId));
    if (!user?.runId) return;
    insertRun(
      {
        id: user.runId,
        conversationId,
        channelId: conversation.channelId,
        tenantId: conversation.tenantId,
        status: "cancelled",
        flowName: channel.flowName,
        flowVersion: null,
        result: null,
        error: ABANDONED_RUN_ERROR,
        executionOrder: [],
        startedAt: user.timestamp,
        completedAt: now,
        durationMs: 0,
      },
      ticket,
    );
  }

  /** Serves `from`, or the first ticket after it whose run has not already ended. */
  function skipEndedTickets(conversationId: string, from: number, claimUntil: string): void {
    let next = from;
    for (;;) {
      const run = runOfTicket(conversationId, next);
      if (!run || run.status === "running") break;
      next++;
    }
    const row = conversations.get(conversationId);
    if (next !== from && row) put(conversations, conversationId, { ...row, serving: next, leaseUntil: claimUntil });
  }

  /**
   * The row after a mode change (see {@link ModeChange}), entered at `since`, or the row
   * unchanged when the mode moved since it was read.
   */
  function changeMode(row: ConversationRow, change: ModeChange, since: string): ConversationRow {
    if (row.mode !== change.from || row.modeSince !== change.since) return row;
    return {
      ...row,
      mode: change.to,
      modeSince: since,
      livechatConversationId: change.livechatConversationId ?? row.livechatConversationId,
      updatedAt: change.at,
    };
  }

  /** A run's user message, stored when a human had the conversation: a message for the human side. */
  function relabelUserMessage(conversationId: string, turn: number, livechatMessageId: string | undefined): void {
    const stored = messages.get(conversationId);
    const message = stored?.get(turn);
    if (stored && message) put(stored, turn, { ...message, origin: "livechat", sender: "user", livechatMessageId: livechatMessageId ?? null });
  }

  /** Takes a run's ticket in its conversation (creating it when new), claiming the turn when it is the run's. */
  function takeTicket(input: BeginRunInput): RunTicket | null {
    const { conversation } = input;
    if (conversation.isNew) {
      // Nobody else can know the id yet: the run holds ticket 0 and its turn at once.
      const row: ConversationRow = {
        id: conversation.id,
        tenantId: conversation.tenantId,
        channelId: conversation.channelId,
        mode: "bot",
        modeSince: input.run.startedAt,
        flowState: null,
        nextTurn: 1,
        livechatConversationId: null,
        language: conversation.language ?? null,
        createdAt: input.run.startedAt,
        updatedAt: input.run.startedAt,
        nextTicket: 1,
        serving: 0,
        leaseUntil: input.leaseUntil,
      };
      insertConversation(row);
      const userMessage = storeClaim(input, 0, 0, false);
      return { ticket: 0, claimed: { conversation: rowToConversation(row), userMessage } };
    }
    const row = conversations.get(conversation.id);
    if (!row || row.tenantId !== conversation.tenantId || row.channelId !== conversation.channelId) return null;
    const ticket = row.nextTicket;
    put(conversations, row.id, { ...row, nextTicket: ticket + 1 });
    if (row.serving !== ticket) {
      // A recorded stream is findable from its first event: a run that waits has its row.
      if (input.stream) insertRun(input.run, ticket);
      return { ticket, claimed: null };
    }
    return { ticket, claimed: claim(input, ticket, false) };
  }

  const runStreams = memoryRunStreams(
    (runId, status, at, error) => {
      const run = runs.get(runId);
      if (run && run.status === "running") put(runs, runId, { ...run, status, completedAt: at, error });
    },
    (runId) => {
      const run = runs.get(runId);
      return run && run.status !== "running" ? run.completedAt : null;
    },
    () => open(),
  );

  const idempotency = memoryIdempotencyStore(() => open());
  const pluginStores = memoryPluginStores(() => open());

  const storage: Storage = {
    runStreams,
    idempotency,
    pluginStore: pluginStores,

    async deleteConversations(input: DeleteConversationsInput): Promise<DeleteConversationsResult> {
      const found = [...new Set(input.conversationIds)].flatMap((id) => {
        const row = conversations.get(id);
        return row && (input.tenantId === undefined || row.tenantId === input.tenantId) ? [row] : [];
      });
      const runIds: string[] = [];
      const result = transaction((): DeleteConversationsResult => {
        const busy = found.filter((row) => inFlight(row, input.now)).map((row) => row.id);
        if (busy.length > 0) return { deleted: [], busy };
        const deleted: DeletedConversation[] = [];
        for (const row of found) {
          runIds.push(...[...runs.values()].filter((run) => run.conversationId === row.id).map((run) => run.id));
          const stored = messages.get(row.id);
          const ofRuns = [...runs.values()].filter((run) => run.conversationId === row.id);
          for (const run of ofRuns) {
            put(runs, run.id, undefined);
            if (run.ticket !== null) put(runsByTicket, `${row.id}\u0000${run.ticket}`, undefined);
          }
          put(messages, row.id, undefined);
          put(conversations, row.id, undefined);
          deleted.push({ id: row.id, tenantId: row.tenantId, channelId: row.channelId, messages: stored?.size ?? 0, runs: ofRuns.length });
        }
        if (deleted.length > 0 && input.audit) insertAudit(input.audit(deleted));
        return { deleted, busy: [] };
      });
      // Last, as nothing after it can fail: the streams, keys and plugin values are not in the transaction's journal.
      runStreams.forget(runIds);
      for (const conversation of result.deleted) {
        idempotency.forgetAnswersNaming(conversation.channelId, conversation.id);
        pluginStores.forgetKeysContaining(conversation.id);
      }
      return result;
    },

    async findEndUserConversations(query: EndUserQuery): Promise<string[]> {
      open();
      const found: ConversationRow[] = [];
      for (const [conversationId, stored] of messages) {
        const row = conversations.get(conversationId);
        if (!row || (query.tenantId !== undefined && row.tenantId !== query.tenantId)) continue;
        for (const message of stored.values()) {
          if (metadataNamesEndUser(message.metadata, query.externalUserId)) {
            found.push(row);
            break;
          }
        }
      }
      return found.sort(byCreation).map((row) => row.id);
    },

    async findEndedConversations(query: EndedConversationQuery): Promise<string[]> {
      open();
      return [...conversations.values()]
        .filter((row) => row.channelId === query.channelId && row.updatedAt < query.before && row.modeSince < query.before && !LIVE_MODES.includes(row.mode))
        .slice(0, query.limit)
        .map((row) => row.id);
    },

    async listConversations(query: ConversationQuery): Promise<ConversationRecord[]> {
      open();
      const ids = query.ids === undefined ? undefined : new Set(query.ids);
      const { before } = query;
      return [...conversations.values()]
        .filter(
          (row) =>
            (query.tenantId === undefined || row.tenantId === query.tenantId) &&
            (query.channelId === undefined || row.channelId === query.channelId) &&
            (query.since === undefined || row.createdAt >= query.since) &&
            (query.until === undefined || row.createdAt < query.until) &&
            (ids === undefined || ids.has(row.id)) &&
            (before === undefined || row.createdAt < before.createdAt || (row.createdAt === before.createdAt && row.id < before.id)),
        )
        .sort((a, b) => byCreation(b, a))
        .slice(0, query.limit)
        .map(rowToConversation);
    },

    async findKeyByHash(hash: string): Promise<KeyWithChannel | null> {
      open();
      const id = keysByHash.get(hash);
      const key = id === undefined ? undefined : keys.get(id);
      const channel = key ? channels.get(key.channelId) : undefined;
      return key && channel ? { key: { ...key }, channel: rowToChannel(channel) } : null;
    },

    async findConversation(id: string): Promise<ConversationRecord | null> {
      open();
      const row = conversations.get(id);
      return row ? rowToConversation(row) : null;
    },

    async listRecentMessages(conversationId: string, limit: number): Promise<MessageRecord[]> {
      open();
      const stored = messages.get(conversationId);
      if (!stored || limit <= 0) return [];
      const rows = [...stored.values()].sort((a, b) => a.turnIndex - b.turnIndex);
      return rows.slice(Math.max(0, rows.length - limit)).map(rowToMessage);
    },

    async beginRun(input: BeginRunInput): Promise<RunTicket | null> {
      const { conversation } = input;
      return transaction(() => {
        const ticket = takeTicket(input);
        if (ticket === null) return null;
        // Last, as nothing after it can fail: the streams are not in the transaction's journal.
        if (input.stream) {
          runStreams.openNow({ runId: input.run.id, conversationId: conversation.id, startedAt: input.run.startedAt, aliveUntil: input.stream.aliveUntil });
        }
        return ticket;
      });
    },

    async storeRun(input: StoreRunInput): Promise<MessageRecord[]> {
      const { conversation, messages, run } = input;
      return transaction(() => {
        insertConversation({
          id: conversation.id,
          tenantId: conversation.tenantId,
          channelId: conversation.channelId,
          mode: input.mode ?? "bot",
          modeSince: input.mode === undefined ? run.startedAt : run.completedAt,
          flowState: "flowState" in input ? toJson(input.flowState) : null,
          nextTurn: messages.length,
          livechatConversationId: null,
          language: conversation.language ?? null,
          createdAt: run.startedAt,
          updatedAt: run.completedAt,
          nextTicket: 1,
          serving: 1,
          leaseUntil: null,
        });
        const stored = messages.map((message, i) => insertMessage(conversation.id, i, message));
        insertRun(run, 0);
        return stored;
      });
    },

    async claimTurn(input: ClaimTurnInput): Promise<ClaimedTurn | null> {
      const { conversation, ticket } = input;
      return transaction(() => {
        const row = conversations.get(conversation.id);
        if (!row) return null;
        const serving = row.serving;
        if (serving > ticket) throw new TurnPassedOver(conversation.id, ticket);
        const lapsed = serving < ticket && (row.leaseUntil === null || row.leaseUntil < input.now);
        if (serving !== ticket && !lapsed) return null;
        if (lapsed) {
          // The run being served stopped with its instance, or its ticket was never claimed:
          // it is stored cancelled and this ticket is served at once, past the ones between
          // (their runs cancelled where they have a row; a live one queues again).
          put(conversations, row.id, { ...row, serving: ticket, leaseUntil: input.claimUntil });
          for (let passed = serving; passed < ticket; passed++) {
            const stale = runOfTicket(conversation.id, passed);
            if (stale && stale.status === "running") put(runs, stale.id, { ...stale, status: "cancelled", completedAt: input.now, error: ABANDONED_RUN_ERROR });
            else if (!stale && passed === serving) cancelUnwritten(conversation.id, serving, input.now);
          }
        }
        return claim(input, ticket, input.stream !== undefined);
      });
    },

    async renewTurn(conversationId: string, ticket: number, leaseUntil: string): Promise<boolean> {
      return transaction(() => {
        const row = conversations.get(conversationId);
        if (!row || row.serving !== ticket) return false;
        put(conversations, conversationId, { ...row, leaseUntil });
        return true;
      });
    },

    async completeRun(input: CompleteRunInput): Promise<MessageRecord[]> {
      const { conversation, run, ticket } = input;
      const setsFlowState = input.claimed && "flowState" in input;
      const mode = input.claimed ? input.mode : undefined;
      return transaction(() => {
        const before = conversations.get(conversation.id);
        if (!before) throw new Error(`channelkit: conversation ${conversation.id} was not stored`);
        // The mode first, as the SQL stores do: only by the run holding the turn, only from the mode it read.
        const row = mode && before.serving === ticket ? changeMode(before, mode, mode.at) : before;
        if (input.claimed && input.liveChatUserTurn !== undefined) relabelUserMessage(conversation.id, input.liveChatUserTurn, input.liveChatUserMessageId);
        const count = input.messages.length;
        const served = row.serving === ticket;
        const updated: ConversationRow = {
          ...row,
          nextTurn: row.nextTurn + count,
          updatedAt: run.completedAt,
          serving: served ? row.serving + 1 : row.serving,
          leaseUntil: served ? input.claimUntil : row.leaseUntil,
        };
        // A run whose turn was taken over (its lease lapsed) stores its messages and outcome,
        // but no longer the conversation's state: the run holding the turn owns it.
        if (setsFlowState && served) updated.flowState = toJson(input.flowState);
        put(conversations, row.id, updated);
        const first = row.nextTurn;
        const stored = input.messages.map((message, i) => insertMessage(conversation.id, first + i, message));
        // A recorded run has its row from its ticket on; another gets it now, unless a later run
        // stored it cancelled when its lease lapsed (its outcome then goes on that row).
        const existing = runs.get(run.id);
        if (input.streamEnd !== undefined || (input.claimed && existing)) {
          if (existing) {
            put(runs, run.id, {
              ...existing,
              status: run.status,
              result: toJson(run.result),
              error: run.error,
              executionOrder: JSON.stringify(run.executionOrder),
              completedAt: run.completedAt,
              durationMs: run.durationMs,
            });
          }
        } else {
          insertRun(run, ticket);
        }
        // The turn passed on when this ticket was the one served: skip tickets whose run
        // already ended (cancelled while waiting), unless nobody else is queued.
        if (updated.serving === ticket + 1 && updated.serving < updated.nextTicket) skipEndedTickets(conversation.id, updated.serving, input.claimUntil);
        if (input.streamEnd !== undefined) runStreams.endNow(run.id, input.streamEnd, run.completedAt);
        return stored;
      });
    },

    async updateLiveChat(input: LiveChatUpdate) {
      return transaction(() => {
        const row = conversations.get(input.conversationId);
        if (!row) return null;
        const { change } = input;
        const changed = changeMode(row, change, change.to === change.from ? change.since : change.at);
        if (changed === row) return null;
        const count = input.messages.length;
        const updated: ConversationRow = { ...changed, nextTurn: row.nextTurn + count };
        put(conversations, row.id, updated);
        const stored = input.messages.map((message, i) => insertMessage(row.id, row.nextTurn + i, message));
        return { conversation: rowToConversation(updated), messages: stored };
      });
    },

    async listLiveChatConversations(query: LiveChatQuery): Promise<ConversationRecord[]> {
      open();
      const modes = new Set<string>(query.modes);
      return [...conversations.values()]
        .filter((row) => row.tenantId === query.tenantId && modes.has(row.mode))
        .sort((a, b) => (a.modeSince < b.modeSince ? -1 : a.modeSince > b.modeSince ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
        .slice(0, Math.max(0, query.limit))
        .map(rowToConversation);
    },

    async countLiveChatWaiting(query: LiveChatWaitingQuery): Promise<number> {
      open();
      const nowMs = Date.parse(query.at);
      let count = 0;
      for (const row of conversations.values()) {
        if (row.mode !== "livechat_waiting") continue;
        const seconds = channels.get(row.channelId)?.livechatWaitTimeoutSeconds;
        const waitMs = seconds == null ? query.defaultWaitTimeoutMs : seconds * 1000;
        if (nowMs - Date.parse(row.modeSince) < waitMs) count++;
      }
      return count;
    },

    async listMessagesAfter(conversationId: string, afterTurn: number, limit: number): Promise<MessageRecord[]> {
      open();
      const stored = messages.get(conversationId);
      if (!stored || limit <= 0) return [];
      return [...stored.values()]
        .filter((row) => row.turnIndex > afterTurn)
        .sort((a, b) => a.turnIndex - b.turnIndex)
        .slice(0, limit)
        .map(rowToMessage);
    },

    async findRun(id: string): Promise<RunRecord | null> {
      open();
      const row = runs.get(id);
      return row ? rowToRun(row) : null;
    },

    async createTenant(tenant: TenantRecord, audit?: AuditEventRecord): Promise<void> {
      transaction(() => {
        insertTenant(tenant);
        insertAudit(audit);
      });
    },

    async findTenant(id: string): Promise<TenantRecord | null> {
      open();
      const row = tenants.get(id);
      return row ? { ...row } : null;
    },

    async countTenants(): Promise<number> {
      open();
      return tenants.size;
    },

    async listTenants(): Promise<TenantRecord[]> {
      open();
      return [...tenants.values()].sort(byCreation).map((row) => ({ ...row }));
    },

    async createChannel(channel: ChannelRecord, key: ApiKeyRecord, audit?: AuditEventRecord): Promise<void> {
      transaction(() => {
        insertChannel(channel);
        insertKey(key);
        insertAudit(audit);
      });
    },

    async findChannel(id: string): Promise<ChannelRecord | null> {
      open();
      const row = channels.get(id);
      return row ? rowToChannel(row) : null;
    },

    async listChannels(query: ChannelQuery = {}): Promise<ChannelRecord[]> {
      open();
      const rows = [...channels.values()].filter((row) => query.tenantId === undefined || row.tenantId === query.tenantId);
      return rows.sort(byCreation).map(rowToChannel);
    },

    async findChannelByClientId(clientId: string): Promise<ChannelRecord | null> {
      open();
      const id = channelsByClientId.get(clientId);
      const row = id === undefined ? undefined : channels.get(id);
      return row ? rowToChannel(row) : null;
    },

    async updateChannel(
      id: string,
      patch: ChannelPatch,
      updatedAt: string,
      audit?: AuditEventRecord,
      expected?: ExpectedChannel,
    ): Promise<ChannelRecord | null> {
      return transaction(() => {
        const row = channels.get(id);
        if (!row || row.state === "archived") return null;
        if (expected && !hasExpected(row, expected)) return null;
        const updated = { ...row, ...storedChannelPatch(patch), updatedAt };
        put(channels, id, updated);
        insertAudit(audit);
        return rowToChannel(updated);
      });
    },

    async replaceChannelKey(channelId: string, key: ApiKeyRecord, revokedAt: string, audit?: AuditEventRecord): Promise<boolean> {
      return transaction(() => {
        const channel = channels.get(channelId);
        if (!channel || channel.state === "archived") return false;
        for (const stored of [...keys.values()]) {
          if (stored.channelId === channelId && stored.revokedAt === null) put(keys, stored.id, { ...stored, revokedAt });
        }
        insertKey(key);
        put(channels, channelId, { ...channel, apiKeyHint: key.hint, updatedAt: revokedAt });
        insertAudit(audit);
        return true;
      });
    },

    async appendAuditEvent(event: AuditEventRecord): Promise<void> {
      transaction(() => insertAudit(event));
    },

    async listAuditEvents(query: AuditQuery): Promise<AuditEventRecord[]> {
      open();
      const { before } = query;
      return [...auditEvents.values()]
        .filter(
          (row) =>
            (query.tenantId === undefined || row.tenantId === query.tenantId) &&
            (query.channelId === undefined || row.channelId === query.channelId) &&
            (before === undefined || row.timestamp < before.timestamp || (row.timestamp === before.timestamp && row.id < before.id)),
        )
        .sort((a, b) => (a.timestamp === b.timestamp ? compare(b.id, a.id) : compare(b.timestamp, a.timestamp)))
        .slice(0, query.limit)
        .map((row) => ({ ...row, changes: JSON.parse(row.changes) }));
    },

    /** Nothing to migrate: refuses a plugin with migrations (the memory storage has no tables). */
    async migrate(options?: MigrateOptions): Promise<void> {
      open();
      refuseTables(options);
    },

    /** Always up to date: the memory storage has no schema to migrate (and refuses a plugin with migrations). */
    async schemaStatus(options?: MigrateOptions): Promise<SchemaStatus> {
      open();
      refuseTables(options);
      return { known: [], pending: [], unknown: [] };
    },

    async close(): Promise<void> {
      closed = true;
    },
  };

  /** Reads fail once the storage is closed, as on a closed database. */
  function open(): void {
    if (closed) throw new Error("channelkit (memory storage): the storage is closed");
  }

  return storage;
}

/**
 * Whether a conversation has a run in flight at `now`: a ticket taken and not yet passed on
 * (a run served or queued), under a lease that has not lapsed. A run lost with its instance
 * (its lease lapsed) does not keep its conversation from being deleted.
 */
function inFlight(row: ConversationRow, now: string): boolean {
  return row.serving < row.nextTicket && row.leaseUntil !== null && row.leaseUntil >= now;
}

/** Orders strings by code unit, as SQL's binary collation (SQLite's default, Postgres's `C`) does. */
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Oldest first, by creation time then id: the order of {@link Storage.listTenants} and {@link Storage.listChannels}. */
function byCreation(a: { createdAt: string; id: string }, b: { createdAt: string; id: string }): number {
  return compare(a.createdAt, b.createdAt) || compare(a.id, b.id);
}

function channelToRow(channel: ChannelRecord): ChannelRow {
  return {
    id: channel.id,
    tenantId: channel.tenantId,
    name: channel.name,
    type: channel.type,
    mode: channel.mode,
    environment: channel.environment,
    state: channel.state,
    flowName: channel.flowName,
    allowedOrigins: JSON.stringify(channel.allowedOrigins),
    defaultStream: Boolean(channel.defaultStream),
    requireSignature: Boolean(channel.requireSignature),
    signingSecretEncrypted: channel.signingSecretEncrypted,
    apiKeyHint: channel.apiKeyHint,
    clientId: channel.clientId,
    languages: JSON.stringify(channel.languages),
    livechatMessages: JSON.stringify(channel.livechatMessages),
    livechatWaitTimeoutSeconds: channel.livechatWaitTimeoutSeconds ?? null,
    runTimeoutSeconds: channel.runTimeoutSeconds ?? null,
    rateLimits: channel.rateLimits ? JSON.stringify(channel.rateLimits) : null,
    resumableStreams: Boolean(channel.resumableStreams),
    widget: JSON.stringify(channel.widget),
    // A record made before plugin types existed has neither: none.
    settings: JSON.stringify(channel.settings ?? {}),
    sealedSettings: channel.sealedSettings ?? null,
    retentionDays: channel.retentionDays ?? null,
    createdAt: channel.createdAt,
    updatedAt: channel.updatedAt,
  };
}

function rowToChannel({ retentionDays, ...row }: ChannelRow): ChannelRecord {
  return {
    ...row,
    // Absent unless set, as on a record written without it.
    ...(retentionDays === null || retentionDays === undefined ? {} : { retentionDays }),
    allowedOrigins: fromJson(row.allowedOrigins, []),
    languages: fromJson(row.languages, []),
    livechatMessages: fromJson(row.livechatMessages, {}),
    widget: fromJson(row.widget, {}),
    rateLimits: fromJson(row.rateLimits, null),
    settings: fromJson(row.settings, {}),
  };
}

/** Whether a channel's row still has what an update expects of it (each field given). */
function hasExpected(row: ChannelRow, expected: ExpectedChannel): boolean {
  if (expected.requireSignature !== undefined && row.requireSignature !== expected.requireSignature) return false;
  if (expected.signingSecretEncrypted !== undefined && row.signingSecretEncrypted !== expected.signingSecretEncrypted) return false;
  if (expected.settings !== undefined && row.settings !== JSON.stringify(expected.settings)) return false;
  if (expected.sealedSettings !== undefined && row.sealedSettings !== expected.sealedSettings) return false;
  return true;
}

function rowToConversation(row: ConversationRow): ConversationRecord {
  return {
    id: row.id,
    tenantId: row.tenantId,
    channelId: row.channelId,
    mode: row.mode,
    modeSince: row.modeSince,
    flowState: fromJson(row.flowState, undefined),
    nextTurn: row.nextTurn,
    livechatConversationId: row.livechatConversationId,
    language: row.language,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}

function messageToRow(conversationId: string, turnIndex: number, message: NewMessage): MessageRow {
  return {
    conversationId,
    turnIndex,
    origin: message.origin,
    role: message.role,
    content: message.content,
    timestamp: message.timestamp,
    tokenCount: message.tokenCount,
    runId: message.runId,
    stepId: message.stepId,
    nodeType: message.nodeType,
    toolCalls: message.toolCalls === null ? null : JSON.stringify(message.toolCalls),
    toolCallId: message.toolCallId,
    livechatMessageId: message.livechatMessageId,
    sender: message.sender,
    metadata: message.metadata === null ? null : JSON.stringify(message.metadata),
  };
}

function rowToMessage(row: MessageRow): MessageRecord {
  return { ...row, toolCalls: fromJson(row.toolCalls, null), metadata: fromJson(row.metadata, null) };
}

function runToRow(run: RunRecord, ticket: number | null): RunRow {
  return {
    id: run.id,
    conversationId: run.conversationId,
    channelId: run.channelId,
    tenantId: run.tenantId,
    status: run.status,
    flowName: run.flowName,
    flowVersion: run.flowVersion,
    result: toJson(run.result),
    error: run.error,
    executionOrder: JSON.stringify(run.executionOrder),
    startedAt: run.startedAt,
    completedAt: run.completedAt,
    durationMs: run.durationMs,
    ticket,
  };
}

function rowToRun(row: RunRow): RunRecord {
  const { ticket: _ticket, ...rest } = row;
  return { ...rest, result: fromJson(row.result, null), executionOrder: fromJson(row.executionOrder, []) };
}
