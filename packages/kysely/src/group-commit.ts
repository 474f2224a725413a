import { registeredMeter } from "@channelkit/core";
import type { Histogram } from "@opentelemetry/api";
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
  /**
   * Takes the write lock (`BEGIN IMMEDIATE`) unless another connection holds it: false then,
   * at once, without the busy timeout's wait ({@link BusyTimeout}).
   */
  tryBegin(): boolean;
}

interface Pending {
  body: () => TransactionBody<unknown>;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/** The instrumentation scope of the storages' metrics. */
const TELEMETRY_SCOPE = "@channelkit/kysely";

/**
 * `channelkit.storage.group_commit.batch_size` ({write}): the transactions one commit of a group
 * commit stored; null without an SDK's meter provider.
 */
function batchSizeHistogram(): Histogram | null {
  return (
    registeredMeter(TELEMETRY_SCOPE)?.createHistogram("channelkit.storage.group_commit.batch_size", {
      unit: "{write}",
      description: "Transactions stored together by one commit of SQLite's group commit.",
      advice: { explicitBucketBoundaries: [1, 2, 4, 8, 16, 32, 64, 128, 256] },
    }) ?? null
  );
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

/**
 * Whether a driver's error is SQLite's `SQLITE_BUSY`: better-sqlite3 and bun:sqlite say so in
 * `code`, node:sqlite in `errcode` (5), except Deno's for `exec`, whose error has only the
 * message. One test for the group commit and the two switches to WAL.
 */
export function isBusy(error: unknown): boolean {
  const { code, errcode, errno, message } = (error ?? {}) as { code?: unknown; errcode?: unknown; errno?: unknown; message?: unknown };
  return code === "SQLITE_BUSY" || errcode === 5 || errno === 5 || (typeof message === "string" && message.startsWith("database is locked"));
}

/**
 * A connection's busy timeout, which the group commit's `BEGIN IMMEDIATE` needs at 0 (SQLite
 * then answers `SQLITE_BUSY` at once instead of putting the process to sleep in its busy
 * handler: the batch waits from the event loop, see {@link groupCommit}) and a statement that
 * may wait for a lock outside the group commit needs at `busyTimeoutMs`. {@link begin} lowers
 * it when it is not already low and {@link restore} raises it, so a connection whose every
 * other entry point restores it first sets it once between two of its transactions, not twice
 * in each: a process alone on its file, whose runs' transactions follow each other with only
 * reads in between, never sets it again (SQLite compiles a `PRAGMA busy_timeout` again at each
 * run; the two were 8 µs of a claim at rest: docs/benchmarks.md, "The lock's pragmas").
 */
export class BusyTimeout {
  #lowered = false;
  readonly #run: (sql: string) => void;
  readonly #wait: string;

  /** `run` runs one statement without parameters (prepared once or each time: SQLite applies a pragma either way). */
  constructor(run: (sql: string) => void, busyTimeoutMs: number) {
    this.#run = run;
    this.#wait = `PRAGMA busy_timeout = ${busyTimeoutMs}`;
  }

  /** Whether the timeout is 0 now: a statement that may wait for a lock must {@link restore} it first. */
  get lowered(): boolean {
    return this.#lowered;
  }

  /**
   * `tryBegin`: takes the write lock (`BEGIN IMMEDIATE`) with the timeout at 0, or answers
   * false at once when another connection holds it. The timeout stays low.
   */
  begin(): boolean {
    if (!this.#lowered) {
      this.#run("PRAGMA busy_timeout = 0");
      this.#lowered = true;
    }
    try {
      this.#run("BEGIN IMMEDIATE");
      return true;
    } catch (error) {
      if (isBusy(error)) return false;
      throw error;
    }
  }

  /** Sets the timeout back to `busyTimeoutMs`, if it was lowered. */
  restore(): void {
    if (!this.#lowered) return;
    this.#run(this.#wait);
    this.#lowered = false;
  }
}

/**
 * `tryBegin` for a connection whose entry points do not each restore the timeout: it is set
 * back right after the `BEGIN IMMEDIATE` (two statements more a transaction).
 */
export function beginWithoutWaiting(run: (sql: string) => void, busyTimeoutMs: number): () => boolean {
  const timeout = new BusyTimeout(run, busyTimeoutMs);
  return () => {
    try {
      return timeout.begin();
    } finally {
      timeout.restore();
    }
  };
}

/**
 * Runs a transaction body in the next group commit; settles after its commit. `inTurn`: the
 * body waits for the batch of this turn of the event loop even when it would run at once
 * alone (it gathers what the turn asks for, as the rate limits' counts do).
 */
export type GroupCommit = <T>(body: () => TransactionBody<T>, inTurn?: boolean) => Promise<T>;

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
 * `BEGIN IMMEDIATE` takes the write lock before the first body, so that a body never meets
 * another process's lock half-way. While another process holds it, the batch waits without
 * blocking the event loop: SQLite's busy handler would put the whole process to sleep (1 ms,
 * then 2, 5, 10 ms... for a lock held a fraction of a millisecond), where the batch tries
 * again after the I/O of this turn, twice, then after 1, 2, 4 .. 16 ms, and the process
 * serves its other requests meanwhile; the transactions asked for during the wait join the
 * batch (docs/benchmarks.md, "Two instances on one database"). Past the busy timeout
 * (`busyTimeoutMs`), or when the commit fails, every body of the batch is rejected with that
 * error: none of them was stored.
 */
export function groupCommit(connection: GroupCommitConnection, elsewhere: GroupCommit, busyTimeoutMs = 5000): GroupCommit {
  let queue: Pending[] = [];
  /** A transaction was asked for since the last flush, which is scheduled. */
  let asked = false;
  /** How many transactions the last flush ran together: more than one, others are active. */
  let lastBatch = 0;
  /** The batch waiting for another process's write lock, if any: the queue waits behind it. */
  let waiting: Pending[] | null = null;
  /**
   * The histogram of the batches' sizes, taken at the first commit (after the SDK started, as
   * the service's metrics are taken when it is made); null without an SDK: a commit then
   * costs a null check.
   */
  let batchSizes: Histogram | null | undefined;

  function flush(): void {
    asked = false;
    // The batch waiting for the lock takes the queue with it when it tries again.
    if (waiting) return;
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

  function commit(batch: Pending[], waitingSince = 0, attempt = 0): void {
    try {
      if (!connection.tryBegin()) {
        waitForLock(batch, waitingSince || Date.now(), attempt);
        return;
      }
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
    if (batchSizes === undefined) batchSizes = batchSizeHistogram();
    batchSizes?.record(batch.length);
    for (let i = 0; i < batch.length; i++) (batch[i] as Pending).resolve(results[i]);
  }

  function waitForLock(batch: Pending[], since: number, attempt: number): void {
    if (Date.now() - since >= busyTimeoutMs) {
      const error = Object.assign(
        new Error(`database is locked: another process held SQLite's write lock for more than the busy timeout (${busyTimeoutMs} ms)`),
        {
          code: "SQLITE_BUSY",
        },
      );
      for (const pending of batch) pending.reject(error);
      return;
    }
    waiting = batch;
    const retry = () => {
      const more = queue;
      queue = [];
      waiting = null;
      const next = more.length === 0 ? batch : batch.concat(more);
      lastBatch = next.length;
      if (connection.inTransaction()) {
        for (const pending of next) elsewhere(pending.body).then(pending.resolve, pending.reject);
        return;
      }
      commit(next, since, attempt + 1);
    };
    if (attempt < 2) afterIo(retry);
    else setTimeout(retry, Math.min(16, 2 ** (attempt - 2)));
  }

  return <T>(body: () => TransactionBody<T>, inTurn = false) =>
    new Promise<T>((resolve, reject) => {
      const pending: Pending = { body, resolve: resolve as (value: unknown) => void, reject };
      if (!asked) {
        asked = true;
        // The flush also ends the turn: a second transaction of this turn waits for it.
        afterIo(flush);
        // Nothing is queued (the turn's first); alone last time too: commit it now.
        if (!inTurn && lastBatch <= 1 && waiting === null && !connection.inTransaction()) {
          commit([pending]);
          return;
        }
      }
      queue.push(pending);
    });
}
