import type { CompiledQuery, Kysely } from "kysely";
import type { ChangeWatch } from "./change-watch.js";

/**
 * The body of a transaction, written once for every executor: it yields each statement and
 * receives that statement's rows. A generator rather than an async function so that the
 * SQLite executor can run it synchronously: better-sqlite3 has one connection, and an
 * `await` inside a transaction would let another request's statements run inside it.
 */
export type TransactionBody<T> = Generator<CompiledQuery, T, unknown[]>;

/** Runs one statement inside a {@link TransactionBody}: `const rows = yield* rowsOf(query)`. */
export function* rowsOf<Row>(query: CompiledQuery<Row>): Generator<CompiledQuery, Row[], unknown[]> {
  return (yield query) as Row[];
}

/**
 * Where a storage's statements run: the one seam between the storage's SQL and a driver.
 * Each store has one implementation (better-sqlite3, pg, or any Kysely dialect); the
 * storage above it does not know which.
 */
export interface Executor {
  /**
   * Whether the database runs data-modifying `WITH` clauses (Postgres): writes that do not
   * depend on each other's results then go in one statement, one round trip instead of a
   * transaction's `BEGIN`, statements and `COMMIT`.
   */
  readonly dataModifyingCtes: boolean;
  /** The rows of one statement (empty for one that returns none). */
  rows<Row>(query: CompiledQuery<Row>): Row[] | Promise<Row[]>;
  /** Runs `body` in one transaction: committed when it returns, rolled back when it throws. */
  transaction<T>(body: () => TransactionBody<T>): T | Promise<T>;
  /**
   * Tells whether the keys, channels and tenants may have changed since a stamp (SQLite):
   * their lookups are then kept between requests. Absent, every lookup reads the database.
   */
  readonly changes?: ChangeWatch;
  /**
   * Whether every write of a row gives it a new `xmin` (Postgres): a key lookup then reads
   * its channel's `xmin` and the channel's columns only when it is not the version already
   * made into a record.
   */
  readonly rowVersions?: boolean;
  /** Releases the connection or pool, when the executor owns it. */
  close(): Promise<void>;
}

/** Drives a transaction body with a synchronous statement runner. */
export function runBodySync<T>(body: TransactionBody<T>, rows: (query: CompiledQuery) => unknown[]): T {
  let step = body.next();
  while (!step.done) step = body.next(rows(step.value));
  return step.value;
}

/** Drives a transaction body with an asynchronous statement runner. */
export async function runBody<T>(body: TransactionBody<T>, rows: (query: CompiledQuery) => Promise<unknown[]>): Promise<T> {
  let step = body.next();
  while (!step.done) step = body.next(await rows(step.value));
  return step.value;
}

/**
 * The executor of any Kysely dialect: statements through Kysely's own driver and
 * transactions. The SQLite and Postgres factories use faster executors of their own.
 */
export function kyselyExecutor(db: Kysely<any>, close: () => Promise<void> = () => db.destroy()): Executor {
  return {
    dataModifyingCtes: false,
    rows: async <Row>(query: CompiledQuery<Row>) => (await db.executeQuery(query)).rows,
    transaction: (body) => db.transaction().execute((trx) => runBody(body(), async (query) => (await trx.executeQuery(query)).rows as unknown[])),
    close,
  };
}
