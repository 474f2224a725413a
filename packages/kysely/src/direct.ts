import type { CompiledQuery } from "kysely";

/**
 * A connection that runs compiled statements synchronously (better-sqlite3). The request
 * path's statements go through it instead of Kysely's executor, whose promises and mutex
 * cost more than an indexed SQLite statement; a run's writes then commit in one synchronous
 * transaction that no other request can interleave with.
 */
export interface DirectConnection {
  /**
   * False while Kysely holds the connection in a transaction of its own (an admin write):
   * statements must then queue behind it through Kysely, or they would run inside it.
   */
  available(): boolean;
  /**
   * The rows of a statement (empty for one that returns none). A statement names its
   * columns rather than selecting `*`, so that what it returns does not change under it.
   */
  rows<Row>(query: CompiledQuery<Row>): Row[];
  /** Runs `work` in one transaction: committed when it returns, rolled back when it throws. */
  transaction<T>(work: () => T): T;
}

/** Runs one compiled statement and resolves to its rows. */
export type RunStatement = <Row>(query: CompiledQuery<Row>) => Promise<Row[]>;

/**
 * A pool that runs compiled statements itself (pg). The request path's statements go
 * through it instead of Kysely's executor, whose connection provider and result handling
 * cost about a third of a statement's CPU (42 against 30 µs a query, measured).
 */
export interface DirectPool {
  /** The rows of a statement, on a connection of the pool. */
  rows: RunStatement;
  /**
   * Runs `work` in one transaction on one connection: committed when it resolves, rolled
   * back when it rejects.
   */
  transaction<T>(work: (rows: RunStatement) => Promise<T>): Promise<T>;
}
