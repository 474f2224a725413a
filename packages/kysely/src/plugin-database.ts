import type { Storage } from "@channelkit/core";
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
 * const threads = await pluginDatabase(ctx.storage)
 *   .selectFrom("telegram_threads")
 *   .selectAll()
 *   .where("chat_id", "=", chatId)
 *   .execute();
 */
export function pluginDatabase(storage: Storage): Kysely<any> {
  if (storage instanceof KyselyStorage) return storage.db as Kysely<any>;
  // The same class from another copy of this package (a second install, a bundle).
  const db = (storage as { db?: unknown } | null)?.db;
  if (isKysely(db)) return db;
  throw new Error(
    "channelkit: pluginDatabase() needs a SQL storage of @channelkit/kysely (sqlite(), postgres(), d1()...); this storage has no tables for a plugin: keep the plugin's data in ctx.storage.pluginStore(id), which every storage has",
  );
}

function isKysely(value: unknown): value is Kysely<any> {
  const db = value as Partial<Kysely<any>> | null | undefined;
  return typeof db === "object" && db !== null && typeof db.selectFrom === "function" && typeof db.schema === "object" && typeof db.transaction === "function";
}
