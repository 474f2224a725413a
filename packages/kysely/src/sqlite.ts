import type BetterSqlite3 from "better-sqlite3";
import { type CompiledQuery, Kysely, type SqliteDatabase, SqliteDialect } from "kysely";
import { ChangeWatch, writesWatchedTables } from "./change-watch.js";
import { betterSqlite3 } from "./drivers.js";
import { type Executor, kyselyExecutor } from "./executor.js";
import { BusyTimeout, type GroupCommit, groupCommit, isBusy } from "./group-commit.js";
import type { Database } from "./schema.js";
import { enableWal } from "./sqlite-wal.js";
import { sqliteFeed } from "./sqlite-feed.js";
import { sqliteRateLimits } from "./rate-limits.js";
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
  const database = new (betterSqlite3())(path);
  const busyTimeoutMs = Math.max(0, Math.floor(options.busyTimeoutMs ?? 5000));
  database.pragma(`busy_timeout = ${busyTimeoutMs}`);
  enableWal(database, busyTimeoutMs);
  // In WAL mode NORMAL loses no committed transaction on a process crash, only on power loss.
  database.pragma("synchronous = NORMAL");
  database.pragma("foreign_keys = ON");
  // Lowered by the group commit's BEGIN and restored by every other way in to the connection
  // before it runs a statement that may wait for a lock: Kysely's driver (migrations, admin
  // operations, your own queries through `storage.db`), the live feed, and the executor's
  // statements outside a transaction (see sqliteExecutor).
  const own = keepingStatements(database, 4);
  const timeout = new BusyTimeout((sql) => void own.prepare(sql).run([]), busyTimeoutMs);
  const changes = sqliteChanges(database);
  const kept = keepingStatements(database);
  const restoring: SqliteDatabase = {
    prepare(sql) {
      timeout.restore();
      const statement = kept.prepare(sql);
      // Your own statements through `storage.db` may write anything, a trigger included.
      if (!(statement as unknown as BetterSqlite3.Statement).readonly) changes.changed();
      return statement;
    },
    close: () => kept.close(),
  };
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: restoring }) });
  const executor = sqliteExecutor(database, kyselyExecutor(db), timeout, busyTimeoutMs, changes);
  const feedConnection = {
    get open() {
      return database.open;
    },
    prepare(sql: string) {
      timeout.restore();
      return database.prepare(sql);
    },
  } as BetterSqlite3.Database;
  // The rate limits' statements run inside the group commit's transactions, which hold the lock.
  return new KyselyStorage(db, executor, () => sqliteFeed(feedConnection), sqliteRateLimits(database, executor.groupCommit));
}

/**
 * The {@link ChangeWatch} of a connection: its `data_version`, unread while a transaction
 * holds the connection (Kysely's, whose statements the others queue behind) or while the
 * file cannot be read at once (another connection recovering the WAL, with the busy timeout
 * lowered): the lookup then reads the rows, as it would without a cache.
 */
function sqliteChanges(database: BetterSqlite3.Database): ChangeWatch {
  const dataVersion = database.prepare("PRAGMA data_version").pluck();
  return new ChangeWatch(() => {
    if (database.inTransaction) return undefined;
    try {
      return dataVersion.get();
    } catch {
      return undefined;
    }
  });
}

/**
 * Statements run synchronously on better-sqlite3 rather than through Kysely's driver, whose
 * promises and mutex cost more than an indexed SQLite statement; a transaction then runs
 * whole, with no other request's statement in between. Rows are read as arrays and made
 * objects here: better-sqlite3 builds a row object through V8's API, internalizing every
 * column name on every row, which made the key lookup's one row costly (see
 * docs/benchmarks.md, "Why the code looks like this").
 */
function sqliteExecutor(
  database: BetterSqlite3.Database,
  kysely: Executor,
  timeout: BusyTimeout,
  busyTimeoutMs: number,
  changes: ChangeWatch,
): Executor & { groupCommit: GroupCommit } {
  /** The statements that write a table `changes` watches, told once, when prepared. */
  const watched = new WeakSet<BetterSqlite3.Statement>();
  const statements = keepingStatements(database, STATEMENT_CACHE_SIZE, (statement) => {
    if (!statement.readonly && writesWatchedTables(statement.source)) watched.add(statement);
    return statement.reader ? statement.raw(true) : statement;
  });
  const rowMakers = new WeakMap<BetterSqlite3.Statement, RowMaker>();
  function rows<Row>(query: CompiledQuery<Row>): Row[] {
    const statement = statements.prepare(query.sql) as unknown as BetterSqlite3.Statement<unknown[], unknown[]>;
    if (watched.has(statement)) changes.changed();
    if (!timeout.lowered || database.inTransaction) return results(statement, query);
    // Outside a transaction with the timeout lowered (BusyTimeout): a write may wait for the
    // write lock, so the timeout is restored first. A read waits for no lock in WAL mode,
    // except while another connection recovers the WAL: it is then run again, restored.
    if (!statement.readonly) {
      timeout.restore();
      return results(statement, query);
    }
    try {
      return results(statement, query);
    } catch (error) {
      if (!isBusy(error)) throw error;
      timeout.restore();
      return results(statement, query);
    }
  }
  function results<Row>(statement: BetterSqlite3.Statement<unknown[], unknown[]>, query: CompiledQuery<Row>): Row[] {
    if (!statement.reader) {
      statement.run(query.parameters as unknown[]);
      return [];
    }
    const rows = statement.all(query.parameters as unknown[]);
    let maker = rowMakers.get(statement);
    for (let i = 0; i < rows.length; i++) {
      const values = rows[i] as unknown[];
      // The columns are read once per statement; a count that differs means they changed.
      if (maker?.width !== values.length) {
        maker = rowMaker(statement.columns().map((column) => column.name));
        rowMakers.set(statement, maker);
      }
      rows[i] = maker.make(values) as never;
    }
    return rows as Row[];
  }
  const transaction = groupCommit(
    {
      run: (sql) => void statements.prepare(sql).run([]),
      inTransaction: () => database.inTransaction,
      rows,
      tryBegin: () => timeout.begin(),
    },
    kysely.transaction as GroupCommit,
    busyTimeoutMs,
  );
  // While Kysely holds the connection in a transaction (a migration, or your own through
  // `storage.db`), a statement run directly would run inside it: such statements queue
  // behind it through Kysely's driver instead.
  return {
    dataModifyingCtes: false,
    rows: (query) => (database.inTransaction ? kysely.rows(query) : rows(query)),
    transaction: (body) => (database.inTransaction ? kysely.transaction(body) : transaction(body)),
    groupCommit: (body, inTurn) => (database.inTransaction ? (kysely.transaction(body) as Promise<never>) : transaction(body, inTurn)),
    changes,
    close: kysely.close,
  };
}

/** Makes the rows of a statement that returns {@link RowMaker.width} columns. */
interface RowMaker {
  width: number;
  make(values: readonly unknown[]): Record<string, unknown>;
}

/**
 * Makes a statement's rows, named by its columns, as better-sqlite3 would have (a later
 * column of the same name wins). The maker is an object literal compiled once per statement,
 * so that every row has one hidden class: properties added one by one would turn a row of
 * more than a dozen columns into a slow dictionary. Where code generation is disallowed
 * (`--disallow-code-generation-from-strings`), or a column is named `__proto__` (which a
 * literal would take as the prototype), rows are built property by property.
 */
export function rowMaker(names: readonly string[]): RowMaker {
  const width = names.length;
  if (!names.includes("__proto__")) {
    try {
      const fields = names.map((name, i) => `${JSON.stringify(name)}: values[${i}]`).join(", ");
      return { width, make: new Function("values", `return { ${fields} };`) as RowMaker["make"] };
    } catch {
      // Code generation is disallowed: built one by one below.
    }
  }
  return {
    width,
    make(values) {
      const row: Record<string, unknown> = {};
      for (let i = 0; i < width; i++)
        Object.defineProperty(row, names[i] as string, { value: values[i], writable: true, enumerable: true, configurable: true });
      return row;
    },
  };
}

/** Most prepared statements kept per database: the request path uses about ten. */
const STATEMENT_CACHE_SIZE = 200;

/**
 * The database as Kysely's SQLite driver sees it, with its prepared statements kept: the
 * driver prepares every query anew (see docs/benchmarks.md, "Why the code looks like this").
 * A statement is keyed by its SQL text and its parameters are bound at each run, so what is
 * kept is compiled SQL, never data. The least recently used statements beyond
 * {@link STATEMENT_CACHE_SIZE} are dropped; a statement still being iterated (a streamed
 * query) is not handed out twice. `made` prepares each new statement further (raw mode).
 */
export function keepingStatements(
  database: BetterSqlite3.Database,
  size = STATEMENT_CACHE_SIZE,
  made: (statement: BetterSqlite3.Statement) => BetterSqlite3.Statement = (statement) => statement,
): SqliteDatabase {
  const statements = new Map<string, BetterSqlite3.Statement>();
  return {
    prepare(sql) {
      const kept = statements.get(sql);
      if (kept && !kept.busy) {
        // Map order is insertion order: re-inserting marks it the most recently used.
        statements.delete(sql);
        statements.set(sql, kept);
        return kept;
      }
      const statement = made(database.prepare(sql));
      if (kept) return statement;
      statements.set(sql, statement);
      if (statements.size > size) statements.delete(statements.keys().next().value as string);
      return statement;
    },
    close() {
      statements.clear();
      database.close();
    },
  };
}
