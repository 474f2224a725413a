import type {
  ApiKeyRecord,
  ChannelPatch,
  ChannelRecord,
  CompleteRunInput,
  KeyWithChannel,
  MessageRecord,
  Storage,
  TenantRecord,
} from "@channelkit/core";
import type { CompiledQuery, Kysely, Updateable } from "kysely";
import type { DirectConnection, DirectPool, RunStatement } from "./direct.js";
import {
  channelToRow,
  keyToRow,
  messageToRow,
  rowToChannel,
  rowToConversation,
  rowToKey,
  rowToMessage,
  rowToRun,
  runToRow,
  storedMessage,
  toJson,
} from "./mappers.js";
import { migrateToLatest } from "./migrations.js";
import { PreparedQueries, PreparedQuery } from "./prepared.js";
import { CHANNEL_COLUMNS, CONVERSATION_COLUMNS, type ChannelsTable, type Database, MESSAGE_COLUMNS, RUN_COLUMNS } from "./schema.js";

/** Options of {@link KyselyStorage}, set by the factories (`sqlite()`, `postgres()`). */
export interface KyselyStorageOptions {
  /** Releases the database (default: `db.destroy()`). */
  onClose?: () => Promise<void>;
  /** Where the dialect can run statements synchronously (better-sqlite3): the request path's go there. */
  direct?: DirectConnection;
  /** Where the dialect's pool can run statements itself (pg): the request path's go there. */
  pool?: DirectPool;
}

/**
 * The {@link Storage} of core on any Kysely dialect. Dialect differences stay in the
 * factories (`sqlite()`); every query here is portable SQL, built and compiled by Kysely.
 */
export class KyselyStorage implements Storage {
  readonly db: Kysely<Database>;
  readonly #onClose: () => Promise<void>;
  readonly #direct: DirectConnection | undefined;
  readonly #pool: DirectPool | undefined;
  readonly #queries: ReturnType<typeof requestPathQueries>;

  constructor(db: Kysely<Database>, options: KyselyStorageOptions = {}) {
    this.db = db;
    this.#onClose = options.onClose ?? (() => db.destroy());
    this.#direct = options.direct;
    this.#pool = options.pool;
    this.#queries = requestPathQueries(db);
  }

  /** The rows of a request-path statement: directly when the dialect allows, else through Kysely. */
  #rows<Row>(query: CompiledQuery<Row>): Row[] | Promise<Row[]> {
    const direct = this.#direct;
    if (direct?.available()) return direct.rows(query);
    if (this.#pool) return this.#pool.rows(query);
    return this.db.executeQuery(query).then((result) => result.rows as Row[]);
  }

  migrate(): Promise<void> {
    return migrateToLatest(this.db);
  }

  close(): Promise<void> {
    return this.#onClose();
  }

  async findKeyByHash(hash: string): Promise<KeyWithChannel | null> {
    const row = (await this.#rows(this.#queries.keyByHash.bind([hash])))[0];
    if (!row) return null;
    const key: ApiKeyRecord = {
      id: row.key_id,
      channelId: row.id,
      tenantId: row.tenant_id,
      hash: row.key_hash,
      prefix: row.key_prefix,
      environment: row.key_environment as ApiKeyRecord["environment"],
      hint: row.key_hint,
      createdAt: row.key_created_at,
      expiresAt: row.key_expires_at,
      revokedAt: row.key_revoked_at,
    };
    return { key, channel: rowToChannel(row) };
  }

  async findConversation(id: string) {
    const row = (await this.#rows(this.#queries.conversation.bind([id])))[0];
    return row ? rowToConversation(row) : null;
  }

  async listRecentMessages(conversationId: string, limit: number): Promise<MessageRecord[]> {
    const rows = await this.#rows(this.#queries.recentMessages.bind([conversationId, limit]));
    return rows.reverse().map(rowToMessage);
  }

  async completeRun(input: CompleteRunInput): Promise<MessageRecord[]> {
    const { conversation, messages, run } = input;
    const count = messages.length;
    const hasFlowState = "flowState" in input;
    const queries = this.#queries;
    // One statement creates the conversation or moves its counter, and writes first: it
    // takes the write lock (SQLite) or the row lock (Postgres) at once, so concurrent runs
    // on one conversation queue here and get consecutive ranges of turn indexes. A run that
    // started the conversation inserts it: nobody else can know its id yet.
    const isNew = conversation.isNew === true;
    const allocator = isNew ? queries.insertConversation : queries.allocateTurns.get(`${hasFlowState}:${input.mode !== undefined}`);
    const allocate = allocator.bind([
      conversation.id,
      conversation.tenantId,
      conversation.channelId,
      input.mode ?? "bot",
      hasFlowState ? toJson(input.flowState) : null,
      count,
      run.startedAt,
      run.completedAt,
    ]);
    const insertRun = queries.insertRun.bind(valuesOf(RUN_COLUMNS, [runToRow(run)]));
    const writes = (allocated: readonly unknown[]) => {
      const first = isNew ? 0 : Number((allocated[0] as { next_turn?: number | string } | undefined)?.next_turn) - count;
      if (!Number.isSafeInteger(first)) throw new Error(`channelkit: conversation ${conversation.id} was not stored`);
      const rows = messages.map((message, i) => messageToRow(conversation.id, first + i, message));
      const statements = rows.length > 0 ? [queries.insertMessages.get(rows.length).bind(valuesOf(MESSAGE_COLUMNS, rows)), insertRun] : [insertRun];
      // What was stored, from what was given rather than parsed back from the rows.
      const stored = messages.map((message, i) => storedMessage(conversation.id, first + i, message));
      return { statements, stored };
    };

    const direct = this.#direct;
    if (direct?.available()) {
      return direct.transaction(() => {
        const { statements, stored } = writes(direct.rows(allocate));
        for (const statement of statements) direct.rows(statement);
        return stored;
      });
    }
    const inTransaction = async (rows: RunStatement) => {
      const { statements, stored } = writes(await rows(allocate));
      for (const statement of statements) await rows(statement);
      return stored;
    };
    if (this.#pool) return this.#pool.transaction(inTransaction);
    return this.db.transaction().execute((trx) => inTransaction(async (query) => (await trx.executeQuery(query)).rows));
  }

  async findRun(id: string) {
    const row = await this.db.selectFrom("runs").selectAll().where("id", "=", id).executeTakeFirst();
    return row ? rowToRun(row) : null;
  }

  async createTenant(tenant: TenantRecord): Promise<void> {
    await this.db.insertInto("tenants").values({ id: tenant.id, name: tenant.name, created_at: tenant.createdAt }).execute();
  }

  async findTenant(id: string): Promise<TenantRecord | null> {
    const row = await this.db.selectFrom("tenants").selectAll().where("id", "=", id).executeTakeFirst();
    return row ? { id: row.id, name: row.name, createdAt: row.created_at } : null;
  }

  async countTenants(): Promise<number> {
    const row = await this.db.selectFrom("tenants").select((eb) => eb.fn.countAll().as("count")).executeTakeFirstOrThrow();
    return Number(row.count);
  }

  async createChannel(channel: ChannelRecord, key: ApiKeyRecord): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await trx.insertInto("channels").values(channelToRow(channel)).execute();
      await trx.insertInto("api_keys").values(keyToRow(key)).execute();
    });
  }

  async findChannel(id: string): Promise<ChannelRecord | null> {
    const row = await this.db.selectFrom("channels").selectAll().where("id", "=", id).executeTakeFirst();
    return row ? rowToChannel(row) : null;
  }

  async updateChannel(id: string, patch: ChannelPatch, updatedAt: string): Promise<ChannelRecord | null> {
    const row = await this.db
      .updateTable("channels")
      .set({ ...patchToRow(patch), updated_at: updatedAt })
      .where("id", "=", id)
      .returningAll()
      .executeTakeFirst();
    return row ? rowToChannel(row) : null;
  }

  async replaceChannelKey(channelId: string, key: ApiKeyRecord, revokedAt: string): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await trx
        .updateTable("api_keys")
        .set({ revoked_at: revokedAt })
        .where("channel_id", "=", channelId)
        .where("revoked_at", "is", null)
        .execute();
      await trx.insertInto("api_keys").values(keyToRow(key)).execute();
      await trx.updateTable("channels").set({ api_key_hint: key.hint, updated_at: revokedAt }).where("id", "=", channelId).execute();
    });
  }
}

/**
 * The values of `rows`, row after row, each in the order of `columns`: the parameters of a
 * prepared insert. A loop rather than `flatMap`, whose builtin defines each element of its
 * result through the slow path (about 1.7k instructions an element on Node 20).
 */
function valuesOf<Column extends string>(columns: readonly Column[], rows: readonly Record<Column, unknown>[]): unknown[] {
  const values = new Array<unknown>(columns.length * rows.length);
  let i = 0;
  for (const row of rows) for (const column of columns) values[i++] = row[column];
  return values;
}

/** A row of placeholders, one per column, numbered from `offset`. */
function placeholderRow<Column extends string>(columns: readonly Column[], $: (index: number) => never, offset = 0): Record<Column, never> {
  return Object.fromEntries(columns.map((column, i) => [column, $(offset + i)])) as Record<Column, never>;
}

/**
 * The statements of the request path, compiled once per storage (see {@link PreparedQuery}):
 * the key lookup, the conversation, the recent messages, and the writes of a finished run.
 */
function requestPathQueries(db: Kysely<Database>) {
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
    recentMessages: new PreparedQuery(2, ($) =>
      db.selectFrom("messages").select(MESSAGE_COLUMNS).where("conversation_id", "=", $(0)).orderBy("turn_index", "desc").limit($(1))),
    insertConversation: new PreparedQuery(8, ($) =>
      db.insertInto("conversations").values({
        id: $(0), tenant_id: $(1), channel_id: $(2), mode: $(3), flow_state: $(4), next_turn: $(5),
        livechat_conversation_id: null, created_at: $(6), updated_at: $(7),
      }),
    ),
    // Keyed by which of flow state and mode the run sets: a value left out keeps the stored one.
    allocateTurns: new PreparedQueries((key: string) => {
      const [setsFlowState, setsMode] = key.split(":").map((flag) => flag === "true");
      return new PreparedQuery(8, ($) =>
        db
          .insertInto("conversations")
          .values({
            id: $(0), tenant_id: $(1), channel_id: $(2), mode: $(3), flow_state: $(4), next_turn: $(5),
            livechat_conversation_id: null, created_at: $(6), updated_at: $(7),
          })
          .onConflict((oc) =>
            oc.column("id").doUpdateSet((eb) => ({
              next_turn: eb("conversations.next_turn", "+", eb.ref("excluded.next_turn")),
              updated_at: eb.ref("excluded.updated_at"),
              ...(setsFlowState ? { flow_state: eb.ref("excluded.flow_state") } : {}),
              ...(setsMode ? { mode: eb.ref("excluded.mode") } : {}),
            })),
          )
          .returning("next_turn"),
      );
    }),
    insertMessages: new PreparedQueries((count: number) =>
      new PreparedQuery(count * MESSAGE_COLUMNS.length, ($) =>
        db.insertInto("messages").values(Array.from({ length: count }, (_, row) => placeholderRow(MESSAGE_COLUMNS, $, row * MESSAGE_COLUMNS.length))),
      ),
    ),
    insertRun: new PreparedQuery(RUN_COLUMNS.length, ($) => db.insertInto("runs").values(placeholderRow(RUN_COLUMNS, $))),
  };
}

function patchToRow(patch: ChannelPatch): Updateable<ChannelsTable> {
  const row: Updateable<ChannelsTable> = {};
  if (patch.name !== undefined) row.name = patch.name;
  if (patch.environment !== undefined) row.environment = patch.environment;
  if (patch.state !== undefined) row.state = patch.state;
  if (patch.flowName !== undefined) row.flow_name = patch.flowName;
  if (patch.allowedOrigins !== undefined) row.allowed_origins = JSON.stringify(patch.allowedOrigins);
  if (patch.defaultStream !== undefined) row.default_stream = patch.defaultStream ? 1 : 0;
  if (patch.requireSignature !== undefined) row.require_signature = patch.requireSignature ? 1 : 0;
  if (patch.signingSecretEncrypted !== undefined) row.signing_secret_encrypted = patch.signingSecretEncrypted;
  if (patch.languages !== undefined) row.languages = JSON.stringify(patch.languages);
  if (patch.livechatMessages !== undefined) row.livechat_messages = JSON.stringify(patch.livechatMessages);
  return row;
}
