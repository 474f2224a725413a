import type { CompiledQuery } from "kysely";
import { runBodySync, type TransactionBody } from "./executor.js";

/** The little of a synchronous SQLite connection that group commit needs. */
export interface GroupCommitConnection {
  /** Runs a statement without parameters and without rows: `BEGIN IMMEDIATE`, `COMMIT`, `SAVEPOINT`... */
  run(sql: string): void;
  /** Whether a transaction is open on the connection. */
  inTransaction(): boolean;
  /** The rows of one statement of a transaction body. */
  rows(query: CompiledQuery): unknown[];
}

interface Pending {
  body: () => TransactionBody<unknown>;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/** Runs `flush` after the I/O callbacks of this turn of the event loop (`setImmediate`), where the runtime has it. */
export const afterIo: (flush: () => void) => void =
  typeof globalThis.setImmediate === "function" ? (flush) => globalThis.setImmediate(flush) : (flush) => setTimeout(flush, 0);

/**
 * A transaction body of work that runs its statements on the connection itself (such as
 * the rate limits' counts): it yields none to the executor.
 */
// biome-ignore lint/correctness/useYield: the work runs its own statements, synchronously, inside the batch's transaction
export function* bodyOf<T>(work: () => T): TransactionBody<T> {
  return work();
}

/** Runs a transaction body in the next group commit; settles after its commit. */
export type GroupCommit = <T>(body: () => TransactionBody<T>) => Promise<T>;

/**
 * Group commit: the transactions asked for during one turn of the event loop run together,
 * synchronously, in one SQLite transaction, and are committed once. A WAL commit (its page
 * writes and the wal-index) was the largest single cost of a run on SQLite
 * (docs/benchmarks.md, "Group commit"); pages shared by the batch's runs (an index's last
 * leaf, the table's last page) are written once per batch instead of once per run.
 *
 * What it keeps: each body runs whole, with no other statement in between, and sees the
 * writes of the bodies before it, as if they had committed one after the other. Nobody
 * learns a body's outcome before its commit (the promise settles after `COMMIT`), and the
 * batch runs in one task, so no lock is held across turns of the event loop and no reader
 * of this process sees uncommitted rows. The cost: a transaction waits for the end of the
 * current turn (the check phase).
 *
 * That wait is only worth it when others are active (as PostgreSQL's `commit_siblings`): the
 * first transaction of a turn commits at once, inside the call, when the last batch held at
 * most one; it is then a batch of one, with every guarantee above. An idle process (one
 * connection: a run's claim, the first event's last step) skips the hop to the check phase
 * (docs/benchmarks.md, "Group commit"). The transactions asked for after it in the same turn
 * (another request's, or the same request's next) wait for the check phase; once a batch
 * holds two or more (about nine at 16 connections), every transaction waits and shares its
 * batch's commit as before. The price: a commit more in a turn of exactly two transactions,
 * and once when the load starts.
 *
 * A body that throws is rejected alone: the batch is rolled back and its other bodies run
 * again, at once, in a new transaction (a body is a function of its input and of what it
 * reads, so running it again after a rollback is running it once). That costs a failure a
 * second run of its batch, and spares every body two statements (`SAVEPOINT`, `RELEASE`),
 * about a twentieth of a run's time. When an error ends the transaction itself (SQLite rolls
 * back on some I/O errors and `SQLITE_FULL`), the same happens.
 *
 * `BEGIN IMMEDIATE` takes the write lock before the first body (waiting up to the busy
 * timeout once for the whole batch), so that a body never meets another process's lock
 * half-way; when it cannot be had, or the commit fails, every body of the batch is rejected
 * with that error: none of them was stored.
 */
export function groupCommit(connection: GroupCommitConnection, elsewhere: GroupCommit): GroupCommit {
  let queue: Pending[] = [];
  /** A transaction was asked for since the last flush, which is scheduled. */
  let asked = false;
  /** How many transactions the last flush ran together: more than one, others are active. */
  let lastBatch = 0;

  function flush(): void {
    asked = false;
    const batch = queue;
    queue = [];
    lastBatch = batch.length;
    if (batch.length === 0) return;
    if (connection.inTransaction()) {
      // Kysely holds the connection in a transaction of its own (a migration, or the host's
      // through `storage.db`): the bodies queue behind it through Kysely's driver.
      for (const pending of batch) elsewhere(pending.body).then(pending.resolve, pending.reject);
      return;
    }
    commit(batch);
  }

  function commit(batch: Pending[]): void {
    try {
      connection.run("BEGIN IMMEDIATE");
    } catch (error) {
      for (const pending of batch) pending.reject(error);
      return;
    }
    const results: unknown[] = new Array(batch.length);
    for (let i = 0; i < batch.length; i++) {
      const pending = batch[i] as Pending;
      try {
        results[i] = runBodySync(pending.body(), connection.rows);
      } catch (error) {
        if (connection.inTransaction()) connection.run("ROLLBACK");
        pending.reject(error);
        if (batch.length > 1) commit(batch.filter((other) => other !== pending));
        return;
      }
    }
    try {
      connection.run("COMMIT");
    } catch (error) {
      if (connection.inTransaction()) connection.run("ROLLBACK");
      for (const pending of batch) pending.reject(error);
      return;
    }
    for (let i = 0; i < batch.length; i++) (batch[i] as Pending).resolve(results[i]);
  }

  return <T>(body: () => TransactionBody<T>) =>
    new Promise<T>((resolve, reject) => {
      const pending: Pending = { body, resolve: resolve as (value: unknown) => void, reject };
      if (!asked) {
        asked = true;
        // The flush also ends the turn: a second transaction of this turn waits for it.
        afterIo(flush);
        // Nothing is queued (the turn's first); alone last time too: commit it now.
        if (lastBatch <= 1 && !connection.inTransaction()) {
          commit([pending]);
          return;
        }
      }
      queue.push(pending);
    });
}
