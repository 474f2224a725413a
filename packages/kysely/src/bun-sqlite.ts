import type { KyselyStorage } from "./storage.js";
import { type SyncSqliteDriver, type SyncSqliteOptions, syncSqliteStorage } from "./sync-sqlite.js";

/** The part of a `bun:sqlite` `Database` the storage uses. */
export interface BunSqliteDatabase {
  prepare(sql: string): BunSqliteStatement;
  exec(sql: string): unknown;
  readonly inTransaction: boolean;
  close(): void;
}

/** The part of a `bun:sqlite` `Statement` the storage uses. */
export interface BunSqliteStatement {
  readonly columnNames: string[];
  all(...parameters: unknown[]): unknown[];
  run(...parameters: unknown[]): { changes: number; lastInsertRowid: number | bigint };
}

/** Options of {@link bunSqlite}. */
export type BunSqliteOptions = SyncSqliteOptions;

/**
 * Storage on Bun's built-in SQLite (`bun:sqlite`): a file path (or `":memory:"`), or a
 * `Database` you opened. The same schema, migrations and statements as `sqlite()`, which
 * needs better-sqlite3, a native module Bun cannot load. WAL mode, so several processes may
 * share the file. Call `migrate()` before serving. Bun only.
 *
 * @example
 * import { bunSqlite } from "@channelkit/kysely/bun-sqlite";
 * const storage = bunSqlite("./channelkit.db");
 */
export function bunSqlite(pathOrDatabase: string | BunSqliteDatabase, options: BunSqliteOptions = {}): KyselyStorage {
  const database = typeof pathOrDatabase === "string" ? openBunDatabase(pathOrDatabase) : pathOrDatabase;
  return syncSqliteStorage(bunDriver(database), options);
}

/** Opens `path` with `bun:sqlite`, loaded synchronously through Bun's `import.meta.require`. */
function openBunDatabase(path: string): BunSqliteDatabase {
  const load = (import.meta as { require?: (id: string) => unknown }).require;
  if (typeof load !== "function") throw new Error("channelkit: bunSqlite() runs on Bun only (bun:sqlite); on Node use sqlite()");
  const { Database } = load("bun:sqlite") as { Database: new (path: string, options?: { create?: boolean; strict?: boolean }) => BunSqliteDatabase };
  return new Database(path, { create: true });
}

function bunDriver(database: BunSqliteDatabase): SyncSqliteDriver {
  return {
    prepare(sql) {
      const statement = database.prepare(sql);
      return {
        reader: statement.columnNames.length > 0,
        all: (parameters) => statement.all(...parameters) as Record<string, unknown>[],
        run: (parameters) => statement.run(...parameters),
      };
    },
    exec: (sql) => void database.exec(sql),
    inTransaction: () => database.inTransaction,
    close: () => database.close(),
  };
}
