import BetterSqlite3 from "better-sqlite3";
import { Kysely, SqliteDialect } from "kysely";
import type { Database } from "./schema.js";
import { KyselyStorage } from "./storage.js";

/** Options of {@link sqlite}. */
export interface SqliteOptions {
  /** How long a writer waits for another process's write lock, in ms (default 5000). */
  busyTimeoutMs?: number;
}

/**
 * Embedded storage on a SQLite file (or `":memory:"`), in WAL mode so readers never wait for
 * the writer. Several processes may share one file. Call `migrate()` before serving.
 */
export function sqlite(path: string, options: SqliteOptions = {}): KyselyStorage {
  const database = new BetterSqlite3(path);
  database.pragma(`busy_timeout = ${Math.max(0, Math.floor(options.busyTimeoutMs ?? 5000))}`);
  database.pragma("journal_mode = WAL");
  // In WAL mode NORMAL loses no committed transaction on a process crash, only on power loss.
  database.pragma("synchronous = NORMAL");
  database.pragma("foreign_keys = ON");
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database }) });
  return new KyselyStorage(db);
}
