/**
 * The baseline's database access, written by hand on the drivers channelkit uses
 * (better-sqlite3, pg) over the same schema: no query builder, statements prepared once
 * (SQLite), plain parameterized queries (pg, like Kysely sends them).
 */
import Database from "better-sqlite3";
import pg from "pg";
import type { StoreKind } from "./shared.js";

/** The key and the channel columns the checks need. */
export interface KeyRow {
  hash: string;
  prefix: string;
  key_environment: string;
  expires_at: string | null;
  revoked_at: string | null;
  id: string;
  tenant_id: string;
  type: string;
  mode: string;
  environment: string;
  state: string;
  flow_name: string;
  default_stream: number;
  require_signature: number;
  signing_secret_encrypted: string | null;
  livechat_messages: string;
  allowed_origins: string;
}

/** A webhook channel's columns its routes check. */
export interface WebhookChannelRow {
  id: string;
  tenant_id: string;
  type: string;
  state: string;
  flow_name: string;
  environment: string;
}

export interface ConversationRow {
  id: string;
  tenant_id: string;
  channel_id: string;
  mode: string;
  livechat_conversation_id: string | null;
  flow_state: string | null;
}

export interface MessageRow {
  turn_index: number;
  origin: string;
  role: string;
  content: string;
  timestamp: string;
  token_count: number;
  run_id: string | null;
  step_id: string | null;
  node_type: string | null;
  tool_calls: string | null;
  tool_call_id: string | null;
  livechat_message_id: string | null;
  sender: string | null;
}

/** A message to insert (every column of `messages`). */
export interface NewMessageRow extends MessageRow {
  conversation_id: string;
}

/** Everything one run writes, in one transaction. */
export interface StoredRun {
  conversation: { id: string; tenant_id: string; channel_id: string; flow_state: string; next_turn: number; at: string };
  messages: NewMessageRow[];
  run: {
    id: string;
    status: string;
    flow_name: string;
    flow_version: string;
    result: string | null;
    error: string | null;
    execution_order: string;
    started_at: string;
    completed_at: string;
    duration_ms: number;
  };
}

/**
 * A run's start on a conversation that may be new: the conversation (when new) and the user
 * message, stored before the stream's first event, so the conversation resumes at once.
 */
export interface OpenedRun {
  /** Set for a new conversation (it then takes turn 0); else the conversation `conversationId` exists. */
  conversation: StoredRun["conversation"] | null;
  conversationId: string;
  /** Its `turn_index` is the next of the conversation's (set here). */
  message: NewMessageRow;
}

/** A run's end on an existing conversation: its messages at its next turns, its flow state and the run, in one transaction. */
export interface ClosedRun {
  conversationId: string;
  flowState: string | null;
  at: string;
  /** Their `turn_index` are the next of the conversation's (set here). */
  messages: NewMessageRow[];
  run: StoredRun["run"] & { conversation_id: string; channel_id: string; tenant_id: string };
}

type MaybePromise<T> = T | Promise<T>;

export interface BaselineStore {
  findKey(hash: string): MaybePromise<KeyRow | undefined>;
  findWebhookChannel(clientId: string): MaybePromise<WebhookChannelRow | undefined>;
  findConversation(id: string): MaybePromise<ConversationRow | undefined>;
  recentMessages(conversationId: string, limit: number): MaybePromise<MessageRow[]>;
  /** A whole run on a new conversation: the conversation, its messages and the run, one transaction. */
  storeRun(input: StoredRun): MaybePromise<void>;
  openRun(input: OpenedRun): MaybePromise<void>;
  closeRun(input: ClosedRun): MaybePromise<void>;
  close(): Promise<void>;
}

const FIND_KEY = `SELECT k.hash, k.prefix, k.environment AS key_environment, k.expires_at, k.revoked_at,
  c.id, c.tenant_id, c.type, c.mode, c.environment, c.state, c.flow_name, c.default_stream,
  c.require_signature, c.signing_secret_encrypted, c.livechat_messages, c.allowed_origins
  FROM api_keys k JOIN channels c ON c.id = k.channel_id WHERE k.hash = $1`;
const FIND_WEBHOOK_CHANNEL = `SELECT id, tenant_id, type, state, flow_name, environment FROM channels WHERE client_id = $1`;
const FIND_CONVERSATION = `SELECT id, tenant_id, channel_id, mode, livechat_conversation_id, flow_state FROM conversations WHERE id = $1`;
/** The next turns of a conversation: moved by `$1`, the new value returned (the taken turns are the `$1` before it). */
const TAKE_TURNS = `UPDATE conversations SET next_turn = next_turn + $1, updated_at = $2 WHERE id = $3 RETURNING next_turn`;
const TAKE_TURNS_WITH_STATE = `UPDATE conversations SET next_turn = next_turn + $1, updated_at = $2, flow_state = $3 WHERE id = $4 RETURNING next_turn`;
const RECENT_MESSAGES = `SELECT turn_index, origin, role, content, timestamp, token_count, run_id, step_id, node_type,
  tool_calls, tool_call_id, livechat_message_id, sender
  FROM messages WHERE conversation_id = $1 ORDER BY turn_index DESC LIMIT $2`;
const INSERT_CONVERSATION = `INSERT INTO conversations (id, tenant_id, channel_id, mode, flow_state, next_turn,
  livechat_conversation_id, created_at, updated_at) VALUES ($1, $2, $3, 'bot', $4, $5, NULL, $6, $6)`;
const MESSAGE_COLUMNS = `(conversation_id, turn_index, origin, role, content, timestamp, token_count, run_id, step_id,
  node_type, tool_calls, tool_call_id, livechat_message_id, sender)`;
const INSERT_RUN = `INSERT INTO runs (id, conversation_id, channel_id, tenant_id, status, flow_name, flow_version, result,
  error, execution_order, started_at, completed_at, duration_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`;

function messageValues(m: NewMessageRow): unknown[] {
  return [
    m.conversation_id,
    m.turn_index,
    m.origin,
    m.role,
    m.content,
    m.timestamp,
    m.token_count,
    m.run_id,
    m.step_id,
    m.node_type,
    m.tool_calls,
    m.tool_call_id,
    m.livechat_message_id,
    m.sender,
  ];
}

function runValues({ conversation, run }: Pick<StoredRun, "conversation" | "run">): unknown[] {
  return [
    run.id,
    conversation.id,
    conversation.channel_id,
    conversation.tenant_id,
    run.status,
    run.flow_name,
    run.flow_version,
    run.result,
    run.error,
    run.execution_order,
    run.started_at,
    run.completed_at,
    run.duration_ms,
  ];
}

/**
 * A pg-style statement (`$n` placeholders) for better-sqlite3, which binds `?` in order of
 * appearance: the arguments are reordered once per call.
 */
function sqliteStatement<Row>(db: Database.Database, text: string) {
  const order: number[] = [];
  const statement = db.prepare(
    text.replace(/\$(\d+)/g, (_, n: string) => {
      order.push(Number(n) - 1);
      return "?";
    }),
  );
  const bind = (values: unknown[]) => order.map((i) => values[i]);
  return {
    get: (...values: unknown[]) => statement.get(...bind(values)) as Row | undefined,
    all: (...values: unknown[]) => statement.all(...bind(values)) as Row[],
    run: (...values: unknown[]) => void statement.run(...bind(values)),
  };
}

function openSqlite(path: string): BaselineStore {
  const db = new Database(path);
  // The pragmas channelkit's sqlite() sets.
  db.pragma("busy_timeout = 5000");
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.pragma("foreign_keys = ON");
  const findKey = sqliteStatement<KeyRow>(db, FIND_KEY);
  const findWebhookChannel = sqliteStatement<WebhookChannelRow>(db, FIND_WEBHOOK_CHANNEL);
  const takeTurns = sqliteStatement<{ next_turn: number }>(db, TAKE_TURNS);
  const takeTurnsWithState = sqliteStatement<{ next_turn: number }>(db, TAKE_TURNS_WITH_STATE);
  const findConversation = sqliteStatement<ConversationRow>(db, FIND_CONVERSATION);
  const recent = sqliteStatement<MessageRow>(db, RECENT_MESSAGES);
  const insertConversation = sqliteStatement(db, INSERT_CONVERSATION);
  const insertMessage = sqliteStatement(db, `INSERT INTO messages ${MESSAGE_COLUMNS} VALUES (${Array.from({ length: 14 }, (_, i) => `$${i + 1}`).join(", ")})`);
  const insertRun = sqliteStatement(db, INSERT_RUN);
  const store = db.transaction((input: StoredRun) => {
    const c = input.conversation;
    insertConversation.run(c.id, c.tenant_id, c.channel_id, c.flow_state, c.next_turn, c.at);
    for (const message of input.messages) insertMessage.run(...messageValues(message));
    insertRun.run(...runValues(input));
  });
  const open = db.transaction((input: OpenedRun) => {
    const c = input.conversation;
    let turn = 0;
    if (c) insertConversation.run(c.id, c.tenant_id, c.channel_id, c.flow_state, 1, c.at);
    else turn = Number((takeTurns.get(1, input.message.timestamp, input.conversationId) as { next_turn: number }).next_turn) - 1;
    insertMessage.run(...messageValues({ ...input.message, turn_index: turn }));
  });
  const close = db.transaction((input: ClosedRun) => {
    const count = input.messages.length;
    const next = Number((takeTurnsWithState.get(count, input.at, input.flowState, input.conversationId) as { next_turn: number }).next_turn);
    input.messages.forEach((message, i) => void insertMessage.run(...messageValues({ ...message, turn_index: next - count + i })));
    insertRun.run(...runValues({ conversation: closedConversation(input), run: input.run }));
  });
  return {
    findKey: (hash) => findKey.get(hash),
    findWebhookChannel: (clientId) => findWebhookChannel.get(clientId),
    openRun: (input) => open(input),
    closeRun: (input) => close(input),
    findConversation: (id) => findConversation.get(id),
    recentMessages: (id, limit) => recent.all(id, limit),
    storeRun: (input) => store(input),
    close: async () => void db.close(),
  };
}

/** The conversation columns a run's row takes, from a closed run. */
function closedConversation(input: ClosedRun): StoredRun["conversation"] {
  const { run } = input;
  return { id: run.conversation_id, tenant_id: run.tenant_id, channel_id: run.channel_id, flow_state: input.flowState ?? "null", next_turn: 0, at: input.at };
}

/** `INSERT INTO messages` of `count` rows in one statement, pg-style. */
function insertMessages(count: number): string {
  const rows = Array.from({ length: count }, (_, row) => `(${Array.from({ length: 14 }, (_, i) => `$${row * 14 + i + 1}`).join(", ")})`);
  return `INSERT INTO messages ${MESSAGE_COLUMNS} VALUES ${rows.join(", ")}`;
}

function openPostgres(url: string): BaselineStore {
  // The pool size and timeouts channelkit's postgres() uses by default.
  const pool = new pg.Pool({ connectionString: url, max: 10, statement_timeout: 5000, connectionTimeoutMillis: 5000 });
  pool.on("error", () => undefined);
  /** Runs `body` in a transaction on one pooled client. */
  const transaction = async (body: (client: pg.PoolClient) => Promise<void>) => {
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      await body(client);
      await client.query("COMMIT");
      client.release();
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined);
      client.release(error instanceof Error ? error : true);
      throw error;
    }
  };
  return {
    async findKey(hash) {
      return (await pool.query<KeyRow>(FIND_KEY, [hash])).rows[0];
    },
    async findWebhookChannel(clientId) {
      return (await pool.query<WebhookChannelRow>(FIND_WEBHOOK_CHANNEL, [clientId])).rows[0];
    },
    openRun: (input) =>
      transaction(async (client) => {
        const c = input.conversation;
        let turn = 0;
        if (c) await client.query(INSERT_CONVERSATION, [c.id, c.tenant_id, c.channel_id, c.flow_state, 1, c.at]);
        else turn = Number((await client.query<{ next_turn: number }>(TAKE_TURNS, [1, input.message.timestamp, input.conversationId])).rows[0]?.next_turn) - 1;
        await client.query(insertMessages(1), messageValues({ ...input.message, turn_index: turn }));
      }),
    closeRun: (input) =>
      transaction(async (client) => {
        const count = input.messages.length;
        const { rows } = await client.query<{ next_turn: number }>(TAKE_TURNS_WITH_STATE, [count, input.at, input.flowState, input.conversationId]);
        const next = Number(rows[0]?.next_turn);
        await client.query(
          insertMessages(count),
          input.messages.flatMap((message, i) => messageValues({ ...message, turn_index: next - count + i })),
        );
        await client.query(INSERT_RUN, runValues({ conversation: closedConversation(input), run: input.run }));
      }),
    async findConversation(id) {
      return (await pool.query<ConversationRow>(FIND_CONVERSATION, [id])).rows[0];
    },
    async recentMessages(id, limit) {
      return (await pool.query<MessageRow>(RECENT_MESSAGES, [id, limit])).rows;
    },
    storeRun: (input) =>
      transaction(async (client) => {
        const c = input.conversation;
        await client.query(INSERT_CONVERSATION, [c.id, c.tenant_id, c.channel_id, c.flow_state, c.next_turn, c.at]);
        await client.query(insertMessages(input.messages.length), input.messages.flatMap(messageValues));
        await client.query(INSERT_RUN, runValues(input));
      }),
    close: () => pool.end(),
  };
}

export function openBaselineStore(store: StoreKind, location: string): BaselineStore {
  return store === "sqlite" ? openSqlite(location) : openPostgres(location);
}
