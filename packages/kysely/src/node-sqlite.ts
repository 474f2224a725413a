import { createRequire } from "node:module";
import type { KyselyStorage } from "./storage.js";
import { type SyncSqliteDriver, type SyncSqliteOptions, syncSqliteStorage } from "./sync-sqlite.js";
import { readRow, storedParameter } from "./text-codec.js";

/** The part of a `node:sqlite` `DatabaseSync` the storage uses. */
export interface NodeSqliteDatabase {
  prepare(sql: string): NodeSqliteStatement;
  exec(sql: string): void;
  readonly isTransaction?: boolean;
  close(): void;
}

/** The part of a `node:sqlite` `StatementSync` the storage uses. */
export interface NodeSqliteStatement {
  columns(): unknown[];
  all(...parameters: unknown[]): unknown[];
  run(...parameters: unknown[]): { changes: number | bigint; lastInsertRowid: number | bigint };
}

/** Options of {@link nodeSqlite}. */
export type NodeSqliteOptions = SyncSqliteOptions;

/**
 * Storage on the `node:sqlite` module, as Deno 2 provides it (and Node 22.13 or newer): a
 * file path (or `":memory:"`), or a `DatabaseSync` you opened. The same schema, migrations
 * and statements as `sqlite()` (better-sqlite3, a native module Deno cannot load). WAL mode,
 * so several processes may share the file. Call `migrate()` before serving.
 *
 * @example
 * import { nodeSqlite } from "@channelkit/kysely/node-sqlite";
 * const storage = nodeSqlite("./channelkit.db");
 */
export function nodeSqlite(pathOrDatabase: string | NodeSqliteDatabase, options: NodeSqliteOptions = {}): KyselyStorage {
  const database = typeof pathOrDatabase === "string" ? openNodeDatabase(pathOrDatabase) : pathOrDatabase;
  return syncSqliteStorage(nodeDriver(database), options);
}

function openNodeDatabase(path: string): NodeSqliteDatabase {
  let module: { DatabaseSync: new (path: string) => NodeSqliteDatabase };
  try {
    module = createRequire(import.meta.url)("node:sqlite");
  } catch (error) {
    throw new Error("channelkit: nodeSqlite() needs the node:sqlite module (Deno 2, Node 22.13 or newer); on older Node use sqlite()", { cause: error });
  }
  return new module.DatabaseSync(path);
}

function nodeDriver(database: NodeSqliteDatabase): SyncSqliteDriver {
  // Where text with U+0000 could not be read back, text is escaped as on PostgreSQL (text-codec.ts).
  const escapes = !readsWholeText(database);
  return {
    prepare(sql) {
      const statement = database.prepare(sql);
      if (escapes) {
        return {
          reader: statement.columns().length > 0,
          all: (parameters) => (statement.all(...parameters.map(storedParameter)) as Record<string, unknown>[]).map(readRow),
          run: (parameters) => statement.run(...parameters.map(storedParameter)),
        };
      }
      return {
        reader: statement.columns().length > 0,
        all: (parameters) => statement.all(...parameters) as Record<string, unknown>[],
        run: (parameters) => statement.run(...parameters),
      };
    },
    exec: (sql) => database.exec(sql),
    inTransaction: () => database.isTransaction === true,
    close: () => database.close(),
  };
}

/**
 * Whether the module reads a text value past a U+0000 in it: Deno's `node:sqlite` (2.x)
 * stores the whole text but answers it only up to the first U+0000; Node's and Bun's answer
 * it whole.
 */
function readsWholeText(database: NodeSqliteDatabase): boolean {
  const [row] = database.prepare("SELECT char(97, 0, 98) AS text").all() as { text: string }[];
  return row?.text.length === 3;
}
