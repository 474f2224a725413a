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
import { type Kysely, sql, type Updateable } from "kysely";
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
  toJson,
} from "./mappers.js";
import { migrateToLatest } from "./migrations.js";
import type { ChannelsTable, Database } from "./schema.js";

/**
 * The {@link Storage} of core on any Kysely dialect. Dialect differences stay in the
 * factories (`sqlite()`); every query here is portable SQL.
 */
export class KyselyStorage implements Storage {
  readonly db: Kysely<Database>;
  readonly #onClose: () => Promise<void>;

  constructor(db: Kysely<Database>, onClose: () => Promise<void> = () => db.destroy()) {
    this.db = db;
    this.#onClose = onClose;
  }

  migrate(): Promise<void> {
    return migrateToLatest(this.db);
  }

  close(): Promise<void> {
    return this.#onClose();
  }

  async findKeyByHash(hash: string): Promise<KeyWithChannel | null> {
    const row = await this.db
      .selectFrom("api_keys")
      .innerJoin("channels", "channels.id", "api_keys.channel_id")
      .selectAll("channels")
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
      .where("api_keys.hash", "=", hash)
      .executeTakeFirst();
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
    const row = await this.db.selectFrom("conversations").selectAll().where("id", "=", id).executeTakeFirst();
    return row ? rowToConversation(row) : null;
  }

  async listRecentMessages(conversationId: string, limit: number): Promise<MessageRecord[]> {
    const rows = await this.db
      .selectFrom("messages")
      .selectAll()
      .where("conversation_id", "=", conversationId)
      .orderBy("turn_index", "desc")
      .limit(limit)
      .execute();
    return rows.reverse().map(rowToMessage);
  }

  async completeRun(input: CompleteRunInput): Promise<MessageRecord[]> {
    const { conversation, messages, run } = input;
    const count = messages.length;
    return this.db.transaction().execute(async (trx) => {
      // Writing first takes the write lock at once (SQLite) or the row lock (Postgres), so
      // concurrent runs on one conversation queue here instead of racing for turn indexes.
      await trx
        .insertInto("conversations")
        .values({
          id: conversation.id,
          tenant_id: conversation.tenantId,
          channel_id: conversation.channelId,
          mode: "bot",
          flow_state: null,
          next_turn: 0,
          livechat_conversation_id: null,
          created_at: run.startedAt,
          updated_at: run.startedAt,
        })
        .onConflict((oc) => oc.column("id").doNothing())
        .execute();
      const allocated = await trx
        .updateTable("conversations")
        .set({
          next_turn: sql<number>`next_turn + ${count}`,
          updated_at: run.completedAt,
          ...("flowState" in input ? { flow_state: toJson(input.flowState) } : {}),
          ...(input.mode ? { mode: input.mode } : {}),
        })
        .where("id", "=", conversation.id)
        .returning("next_turn")
        .executeTakeFirstOrThrow();
      const first = Number(allocated.next_turn) - count;
      const rows = messages.map((message, i) => messageToRow(conversation.id, first + i, message));
      if (rows.length > 0) await trx.insertInto("messages").values(rows).execute();
      await trx.insertInto("runs").values(runToRow(run)).execute();
      return rows.map(rowToMessage);
    });
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
