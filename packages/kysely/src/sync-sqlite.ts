import type BetterSqlite3 from "better-sqlite3";
import { CompiledQuery, Kysely, type SqliteDatabase, SqliteDialect } from "kysely";
import { type Executor, kyselyExecutor } from "./executor.js";
import { beginWithoutWaiting, type GroupCommit, groupCommit, isBusy } from "./group-commit.js";
import { sqliteRateLimits } from "./rate-limits.js";
import type { Database } from "./schema.js";
import { sqliteFeed } from "./sqlite-feed.js";
import { KyselyStorage } from "./storage.js";

/**
 * A prepared statement of a synchronous SQLite driver (`bun:sqlite`, `node:sqlite`), as the
 * storage runs it: positional parameters, rows as objects.
 */
export interface SyncSqliteStatement {
  /** Whether the statement returns rows (a `SELECT`, or a write with `RETURNING`). */
  readonly reader: boolean;
  all(parameters: readonly unknown[]): Record<string, unknown>[];
  run(parameters: readonly unknown[]): { changes: number | bigint; lastInsertRowid: number | bigint };
}

/** A synchronous SQLite connection, the little of it the storage needs. */
export interface SyncSqliteDriver {
  prepare(sql: string): SyncSqliteStatement;
  /** Runs SQL without parameters (pragmas, `BEGIN`, `COMMIT`). */
  exec(sql: string): void;
  /** Whether a transaction is open on the connection. */
  inTransaction(): boolean;
  close(): void;
}

/** Options of the SQLite storages on a runtime's own driver (`bunSqlite()`, `nodeSqlite()`). */
export interface SyncSqliteOptions {
  /** How long a writer waits for another process's write lock, in ms (default 5000). */
  busyTimeoutMs?: number;
}

/** Most prepared statements kept per database: the request path uses about ten. */
const STATEMENT_CACHE_SIZE = 200;

/**
 * The storage of `sqlite()` on another synchronous SQLite driver: the same migrations, the
 * same statements, the same live feed (a table, polled) and rate limits (a table), in WAL
 * mode with a busy timeout, so that several processes can share the file. Statements run
 * synchronously, so a transaction runs whole with no other request's statement in between.
 */
export function syncSqliteStorage(driver: SyncSqliteDriver, options: SyncSqliteOptions = {}): KyselyStorage {
  const busyTimeoutMs = Math.max(0, Math.floor(options.busyTimeoutMs ?? 5000));
  driver.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`);
  enableWal(driver, busyTimeoutMs);
  driver.exec("PRAGMA synchronous = NORMAL");
  driver.exec("PRAGMA foreign_keys = ON");
  const statements = statementCache(driver);
  let open = true;
  const database: SqliteDatabase = {
    prepare(sql) {
      const statement = statements(sql);
      return {
        reader: statement.reader,
        all: (parameters) => statement.all(parameters),
        run: (parameters) => statement.run(parameters),
        iterate: (parameters) => statement.all(parameters)[Symbol.iterator](),
      };
    },
    close() {
      open = false;
      driver.close();
    },
  };
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database }) });
  const kysely = kyselyExecutor(db);
  function rows(query: CompiledQuery): unknown[] {
    const statement = statements(query.sql);
    if (statement.reader) return statement.all(query.parameters);
    statement.run(query.parameters);
    return [];
  }
  // While Kysely holds the connection in a transaction (a migration, or your own through
  // `storage.db`), statements queue behind it through Kysely's driver, as in `sqlite()`.
  const transaction = groupCommit(
    {
      run: (sql) => void statements(sql).run([]),
      inTransaction: () => driver.inTransaction(),
      rows,
      tryBegin: beginWithoutWaiting((sql) => void rows(CompiledQuery.raw(sql)), busyTimeoutMs),
    },
    kysely.transaction as GroupCommit,
    busyTimeoutMs,
  );
  const executor: Executor = {
    dataModifyingCtes: false,
    rows: (query) => (driver.inTransaction() ? kysely.rows(query) : (rows(query) as never)),
    transaction: (body) => (driver.inTransaction() ? kysely.transaction(body) : transaction(body)),
    close: kysely.close,
  };
  const compatible = betterSqlite3Subset(statements, () => open);
  return new KyselyStorage(db, executor, () => sqliteFeed(compatible), sqliteRateLimits(compatible, transaction));
}

/**
 * The driver's statements kept by SQL text (SQL only, never data), the least recently used
 * dropped beyond {@link STATEMENT_CACHE_SIZE}.
 */
function statementCache(driver: SyncSqliteDriver): (sql: string) => SyncSqliteStatement {
  const kept = new Map<string, SyncSqliteStatement>();
  return (sql) => {
    const found = kept.get(sql);
    if (found) {
      kept.delete(sql);
      kept.set(sql, found);
      return found;
    }
    const statement = driver.prepare(sql);
    kept.set(sql, statement);
    if (kept.size > STATEMENT_CACHE_SIZE) kept.delete(kept.keys().next().value as string);
    return statement;
  };
}

/**
 * Puts the database in WAL mode, retrying while another process opening the same new file
 * holds the lock (SQLite answers `SQLITE_BUSY` at once there; see `sqlite-wal.ts`).
 */
function enableWal(driver: SyncSqliteDriver, timeoutMs: number): void {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0; ; attempt++) {
    try {
      driver.exec("PRAGMA journal_mode = WAL");
      return;
    } catch (error) {
      if (!isBusy(error) || Date.now() >= deadline) throw error;
    }
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, Math.min(32, 2 ** attempt));
  }
}

/**
 * The part of better-sqlite3's API that the live feed and the rate limits' counts use
 * (`prepare(sql).all/get/run(...parameters)`, `open`), on the
 * driver: both then run unchanged on it.
 */
function betterSqlite3Subset(statements: (sql: string) => SyncSqliteStatement, open: () => boolean): BetterSqlite3.Database {
  const subset = {
    get open() {
      return open();
    },
    prepare(sql: string) {
      const statement = statements(sql);
      return {
        all: (...parameters: unknown[]) => statement.all(parameters),
        get: (...parameters: unknown[]) => statement.all(parameters)[0],
        run: (...parameters: unknown[]) => statement.run(parameters),
      };
    },
  };
  return subset as unknown as BetterSqlite3.Database;
}
