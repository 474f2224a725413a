import type { SchemaStatus } from "@channelkit/core";
import { type Kysely, type Migration, type MigrationProvider, Migrator } from "kysely";
import { runTurns } from "./migration-0002-run-turns.js";
import { auditEvents } from "./migration-0003-audit-events.js";
import { conversationLanguage } from "./migration-0004-conversation-language.js";
import { channelWidget } from "./migration-0005-channel-widget.js";
import { liveChat } from "./migration-0006-live-chat.js";
import { runTimeout } from "./migration-0007-run-timeout.js";
import { rateLimits } from "./migration-0008-rate-limits.js";
import { runStreams } from "./migration-0009-run-streams.js";
import { idempotencyKeys } from "./migration-0010-idempotency-keys.js";
import { pluginStore } from "./migration-0011-plugin-store.js";
import { channelSettings } from "./migration-0012-channel-settings.js";
import { withMigrationLock } from "./migration-lock.js";

/**
 * One migration set for every dialect: only portable column types, so SQLite and Postgres
 * share it. Add new migrations at the end; never edit one that has shipped.
 */
export const migrations: Record<string, Migration> = {
  "0001_initial": {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable("tenants")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("name", "text", (c) => c.notNull())
        .addColumn("created_at", "text", (c) => c.notNull())
        .execute();

      await db.schema
        .createTable("channels")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("tenant_id", "text", (c) => c.notNull().references("tenants.id"))
        .addColumn("name", "text")
        .addColumn("type", "text", (c) => c.notNull())
        .addColumn("mode", "text", (c) => c.notNull())
        .addColumn("environment", "text", (c) => c.notNull())
        .addColumn("state", "text", (c) => c.notNull())
        .addColumn("flow_name", "text", (c) => c.notNull())
        .addColumn("allowed_origins", "text", (c) => c.notNull())
        .addColumn("default_stream", "integer", (c) => c.notNull())
        .addColumn("require_signature", "integer", (c) => c.notNull())
        .addColumn("signing_secret_encrypted", "text")
        .addColumn("api_key_hint", "text")
        .addColumn("client_id", "text", (c) => c.unique())
        .addColumn("languages", "text", (c) => c.notNull())
        .addColumn("livechat_messages", "text", (c) => c.notNull())
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("updated_at", "text", (c) => c.notNull())
        .execute();
      await db.schema.createIndex("channels_tenant_idx").on("channels").column("tenant_id").execute();

      await db.schema
        .createTable("api_keys")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("channel_id", "text", (c) => c.notNull().references("channels.id"))
        .addColumn("tenant_id", "text", (c) => c.notNull())
        .addColumn("hash", "text", (c) => c.notNull().unique())
        .addColumn("prefix", "text", (c) => c.notNull())
        .addColumn("environment", "text", (c) => c.notNull())
        .addColumn("hint", "text", (c) => c.notNull())
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("expires_at", "text")
        .addColumn("revoked_at", "text")
        .execute();
      await db.schema.createIndex("api_keys_channel_idx").on("api_keys").column("channel_id").execute();

      await db.schema
        .createTable("conversations")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("tenant_id", "text", (c) => c.notNull())
        .addColumn("channel_id", "text", (c) => c.notNull().references("channels.id"))
        .addColumn("mode", "text", (c) => c.notNull())
        .addColumn("flow_state", "text")
        .addColumn("next_turn", "integer", (c) => c.notNull())
        .addColumn("livechat_conversation_id", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("updated_at", "text", (c) => c.notNull())
        .execute();
      await db.schema.createIndex("conversations_channel_idx").on("conversations").column("channel_id").execute();

      await db.schema
        .createTable("messages")
        .addColumn("conversation_id", "text", (c) => c.notNull().references("conversations.id"))
        .addColumn("turn_index", "integer", (c) => c.notNull())
        .addColumn("origin", "text", (c) => c.notNull())
        .addColumn("role", "text", (c) => c.notNull())
        .addColumn("content", "text", (c) => c.notNull())
        .addColumn("timestamp", "text", (c) => c.notNull())
        .addColumn("token_count", "integer", (c) => c.notNull())
        .addColumn("run_id", "text")
        .addColumn("step_id", "text")
        .addColumn("node_type", "text")
        .addColumn("tool_calls", "text")
        .addColumn("tool_call_id", "text")
        .addColumn("livechat_message_id", "text")
        .addColumn("sender", "text")
        .addPrimaryKeyConstraint("messages_pk", ["conversation_id", "turn_index"])
        .execute();

      await db.schema
        .createTable("runs")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("conversation_id", "text", (c) => c.notNull().references("conversations.id"))
        .addColumn("channel_id", "text", (c) => c.notNull())
        .addColumn("tenant_id", "text", (c) => c.notNull())
        .addColumn("status", "text", (c) => c.notNull())
        .addColumn("flow_name", "text", (c) => c.notNull())
        .addColumn("flow_version", "text")
        .addColumn("result", "text")
        .addColumn("error", "text")
        .addColumn("execution_order", "text", (c) => c.notNull())
        .addColumn("started_at", "text", (c) => c.notNull())
        .addColumn("completed_at", "text", (c) => c.notNull())
        .addColumn("duration_ms", "integer", (c) => c.notNull())
        .execute();
      await db.schema.createIndex("runs_conversation_idx").on("runs").column("conversation_id").execute();
    },
    async down(db: Kysely<any>) {
      for (const table of ["runs", "messages", "conversations", "api_keys", "channels", "tenants"]) {
        await db.schema.dropTable(table).ifExists().execute();
      }
    },
  },
  "0002_run_turns": runTurns,
  "0003_audit_events": auditEvents,
  "0004_conversation_language": conversationLanguage,
  "0005_channel_widget": channelWidget,
  "0006_live_chat": liveChat,
  "0007_run_timeout": runTimeout,
  "0008_rate_limits": rateLimits,
  "0009_run_streams": runStreams,
  "0010_idempotency_keys": idempotencyKeys,
  "0011_plugin_store": pluginStore,
  "0012_channel_settings": channelSettings,
};

const provider: MigrationProvider = { getMigrations: async () => migrations };

/** The table where Kysely's Migrator records the migrations applied. */
const MIGRATION_TABLE = "channelkit_migration";

/**
 * The database's schema against {@link migrations}, read without changing anything: which
 * migrations are pending (all of them when the database was never migrated) and which applied
 * ones this version does not know.
 */
export async function schemaStatusOf(db: Kysely<any>): Promise<SchemaStatus> {
  const known = Object.keys(migrations);
  const applied = new Set(await appliedMigrations(db));
  return {
    known,
    pending: known.filter((name) => !applied.has(name)),
    unknown: [...applied].filter((name) => !(name in migrations)).sort(),
  };
}

/** The names in the migration table; none when the table does not exist (a database never migrated). */
async function appliedMigrations(db: Kysely<any>): Promise<string[]> {
  try {
    const rows = await db.selectFrom(MIGRATION_TABLE).select("name").execute();
    return rows.map((row) => String(row.name));
  } catch (error) {
    // The common case reads one table; only a failure asks whether it exists at all.
    const tables = await db.introspection.getTables();
    if (!tables.some((table) => table.name === MIGRATION_TABLE)) return [];
    throw error;
  }
}

/**
 * Brings the schema up to date; throws with the failing migration's error. Safe when several
 * processes call it on one database at once: they take turns (see {@link withMigrationLock}).
 */
export async function migrateToLatest(db: Kysely<any>): Promise<void> {
  const { error, results } = await withMigrationLock(db, (connection) =>
    new Migrator({
      db: connection,
      provider,
      migrationTableName: MIGRATION_TABLE,
      migrationLockTableName: "channelkit_migration_lock",
    }).migrateToLatest(),
  );
  if (error) {
    const failed = results?.find((result) => result.status === "Error")?.migrationName;
    throw new Error(`channelkit: migration ${failed ?? "(unknown)"} failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}
