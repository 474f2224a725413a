import type { MigrateOptions, SchemaStatus } from "@channelkit/core";
import { type Kysely, type Migration, type MigrationProvider, type MigrationResult, Migrator } from "kysely";
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
import { runStreamFollowed } from "./migration-0013-run-stream-followed.js";
import { messageMetadata } from "./migration-0014-message-metadata.js";
import { channelRetention } from "./migration-0015-channel-retention.js";
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
  "0013_run_stream_followed": runStreamFollowed,
  "0014_message_metadata": messageMetadata,
  "0015_channel_retention": channelRetention,
};

/** The table where Kysely's Migrator records the migrations applied. */
const MIGRATION_TABLE = "channelkit_migration";

/** The plugins of `storage.migrate({ plugins })` and `schemaStatus({ plugins })`. */
type Plugins = MigrateOptions["plugins"];

/**
 * The migrations of each plugin that has some, in the order given, each plugin's in the order
 * of their names, named as recorded: `<plugin id>/<name>`. Throws a TypeError for two plugins
 * of one id, or an id or a name that cannot be recorded as such.
 */
function pluginMigrations(plugins: Plugins): { id: string; migrations: Record<string, Migration> }[] {
  const sets: { id: string; migrations: Record<string, Migration> }[] = [];
  const ids = new Set<string>();
  for (const plugin of plugins ?? []) {
    if (ids.has(plugin.id)) throw new TypeError(`channelkit: two plugins passed to migrate() have the id "${plugin.id}"`);
    ids.add(plugin.id);
    const names = Object.keys(plugin.schema?.migrations ?? {}).sort();
    if (names.length === 0) continue;
    if (!/^[a-z0-9-]+$/.test(plugin.id)) {
      throw new TypeError(`channelkit: the plugin id "${plugin.id}" is not lower case letters, digits and "-": its migrations cannot be recorded`);
    }
    const set: Record<string, Migration> = {};
    for (const name of names) {
      if (name === "" || name.includes("/"))
        throw new TypeError(`channelkit: the plugin "${plugin.id}" has a migration named "${name}": a name is not empty and has no "/"`);
      set[`${plugin.id}/${name}`] = plugin.schema?.migrations[name] as Migration;
    }
    sets.push({ id: plugin.id, migrations: set });
  }
  return sets;
}

/**
 * The database's schema against {@link migrations} and those of `plugins`, read without
 * changing anything: which migrations are pending (all of them when the database was never
 * migrated), channelkit's then each plugin's (`<plugin id>/<name>`), and which applied ones
 * this version does not know (those of plugins not passed are not counted).
 */
export async function schemaStatusOf(db: Kysely<any>, plugins?: Plugins): Promise<SchemaStatus> {
  const sets = pluginMigrations(plugins);
  const known = [...Object.keys(migrations), ...sets.flatMap((set) => Object.keys(set.migrations))];
  const knownNames = new Set(known);
  const passed = new Set((plugins ?? []).map((plugin) => plugin.id));
  const applied = new Set(await appliedMigrations(db));
  return {
    known,
    pending: known.filter((name) => !applied.has(name)),
    unknown: [...applied].filter((name) => !knownNames.has(name) && (!name.includes("/") || passed.has(pluginOf(name)))).sort(),
  };
}

/** The plugin id of a plugin's migration as recorded (`<plugin id>/<name>`). */
function pluginOf(recorded: string): string {
  return recorded.slice(0, recorded.indexOf("/"));
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

/** A migration applied that a set does not run: Kysely's Migrator refuses a recorded name it does not know. */
const APPLIED: Migration = { async up() {} };

/**
 * Brings the schema up to date: channelkit's migrations, then each plugin's of `plugins` (see
 * {@link pluginMigrations}), recorded in the one migration table; throws with the failing
 * migration's error. Safe when several processes call it on one database at once: they take
 * turns (see {@link withMigrationLock}), the plugins' migrations included.
 *
 * Each set runs through its own Migrator on the locked connection, given the names the others
 * recorded as applied (Kysely refuses a recorded name it does not know), with unordered
 * migrations allowed: a migration channelkit adds later sorts before a plugin's applied ones.
 */
export async function migrateToLatest(db: Kysely<any>, plugins?: Plugins): Promise<void> {
  const sets = [{ id: null, migrations }, ...pluginMigrations(plugins)];
  const { error, results } = await withMigrationLock(db, async (connection) => {
    const done: MigrationResult[] = [];
    // Read once, before a Migrator holds the connection; the lock keeps it true, with what each set applies.
    const applied = new Set(await appliedMigrationsIfAny(connection));
    for (const set of sets) {
      // Every applied migration the set does not hold counts as applied: another set's, and a newer
      // version's (an older instance restarting during a rolling upgrade), which Kysely would
      // otherwise refuse as "missing"; checkSchema warns of the latter.
      const others = [...applied].filter((name) => !Object.hasOwn(set.migrations, name));
      const provider: MigrationProvider = { getMigrations: async () => ({ ...Object.fromEntries(others.map((name) => [name, APPLIED])), ...set.migrations }) };
      const { error, results } = await new Migrator({
        db: connection,
        provider,
        migrationTableName: MIGRATION_TABLE,
        migrationLockTableName: "channelkit_migration_lock",
        allowUnorderedMigrations: true,
      }).migrateToLatest();
      done.push(...(results ?? []));
      if (error !== undefined) return { error, results: done };
      for (const result of results ?? []) if (result.status === "Success") applied.add(result.migrationName);
    }
    return { results: done };
  });
  if (error) {
    const failed = results?.find((result) => result.status === "Error")?.migrationName;
    throw new Error(`channelkit: migration ${failed ?? "(unknown)"} failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}

/**
 * {@link appliedMigrations}, but in a caller's transaction (see withMigrationLock) without a
 * failing statement, which would abort it on Postgres: the table is looked for first.
 */
async function appliedMigrationsIfAny(db: Kysely<any>): Promise<string[]> {
  if (!db.isTransaction) return appliedMigrations(db);
  const tables = await db.introspection.getTables();
  if (!tables.some((table) => table.name === MIGRATION_TABLE)) return [];
  const rows = await db.selectFrom(MIGRATION_TABLE).select("name").execute();
  return rows.map((row) => String(row.name));
}
