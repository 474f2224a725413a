import type { PluginSchema, Storage } from "@channelkit/core";
import type { Kysely } from "kysely";
import { KyselyStorage } from "./storage.js";

/**
 * The Kysely instance of a storage of `@channelkit/kysely` (`sqlite()`, `postgres()`, `d1()`,
 * `nodeSqlite()`, `bunSqlite()`, `kyselyStorage()`), for a plugin's queries on the tables its
 * migrations made (`ChannelPlugin.schema`, applied by `storage.migrate({ plugins })`). It is
 * the storage's own: queries on it share the storage's connection or pool, and the storage
 * closes it. Name your tables with the plugin's id as a prefix (`telegram_threads`).
 *
 * For data that needs no table of its own (what was already handled, a lease between
 * instances), `ctx.storage.pluginStore(id)` works on every store, the memory one included.
 *
 * @throws Error when `storage` is not one of these (the memory storage, or one of your own):
 * it has no tables to query.
 *
 * @example
 * import { pluginDatabase } from "@channelkit/kysely";
 *
 * interface TelegramTables { telegram_threads: { chat_id: string; conversation_id: string } }
 *
 * const threads = await pluginDatabase<TelegramTables>(ctx.storage)
 *   .selectFrom("telegram_threads")
 *   .selectAll()
 *   .where("chat_id", "=", chatId)
 *   .execute();
 */
export function pluginDatabase<Tables = any>(storage: Storage): Kysely<Tables> {
  if (storage instanceof KyselyStorage) return storage.db as unknown as Kysely<Tables>;
  // The same class from another copy of this package (a second install, a bundle).
  const db = (storage as { db?: unknown } | null)?.db;
  if (isKysely(db)) return db as Kysely<Tables>;
  throw new Error(
    "channelkit: pluginDatabase() needs a SQL storage of @channelkit/kysely (sqlite(), postgres(), d1()...); this storage has no tables for a plugin: keep the plugin's data in ctx.storage.pluginStore(id), which every storage has",
  );
}

function isKysely(value: unknown): value is Kysely<any> {
  const db = value as Partial<Kysely<any>> | null | undefined;
  return typeof db === "object" && db !== null && typeof db.selectFrom === "function" && typeof db.schema === "object" && typeof db.transaction === "function";
}

/** One migration of a plugin's tables, on the store's Kysely instance. */
export interface KyselyPluginMigration {
  up(db: Kysely<any>): Promise<void>;
  down?(db: Kysely<any>): Promise<void>;
}

/**
 * A plugin's `schema` (`ChannelPlugin.schema`) with its migrations' `db` typed as Kysely's:
 * core types it `unknown`, having no dependency on Kysely. Applied by
 * `storage.migrate({ plugins })` after channelkit's own migrations, in the order of their
 * names, and recorded as `<plugin id>/<name>`.
 *
 * @example
 * const schema = pluginSchema({
 *   "0001_threads": {
 *     async up(db) {
 *       await db.schema.createTable("telegram_threads").addColumn("chat_id", "text", (c) => c.primaryKey()).execute();
 *     },
 *   },
 * });
 */
export function pluginSchema(migrations: Readonly<Record<string, KyselyPluginMigration>>): PluginSchema {
  return { migrations: migrations as PluginSchema["migrations"] };
}
