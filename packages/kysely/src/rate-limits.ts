import { flexibleRateLimitStore, type FlexibleLimiterOptions, type RateLimitStore } from "@channelkit/core";
import type BetterSqlite3 from "better-sqlite3";
import type pg from "pg";
import flexible from "rate-limiter-flexible";
import { bodyOf, type GroupCommit } from "./group-commit.js";
import { postgresCounts } from "./postgres-counts.js";

/** The table of migration 0008, in rate-limiter-flexible's own layout. */
const TABLE = "rate_limit_counters";
/** How often counts whose window ended an hour ago are deleted. */
const SWEEP_MS = 5 * 60_000;

/** What both SQL limiters share: the migrated table, a memory fallback, refusals counted in memory. */
function common(options: FlexibleLimiterOptions) {
  return {
    ...options,
    tableName: TABLE,
    tableCreated: true,
    // The sweep is the store's own, stopped by close(): the limiters' timers would outlive the database.
    clearExpiredByTimeout: false,
    // While the database cannot be reached, each process counts in its memory rather than fail every request.
    insuranceLimiter: new flexible.RateLimiterMemory(options),
    // Once over the limit, a client's further requests are refused from memory until the window ends.
    inMemoryBlockOnConsumed: options.points + 1,
  };
}

/**
 * A {@link RateLimitStore} in a table of the database, so that every instance sharing it
 * counts together. Expired counts are deleted every five minutes.
 */
function sqlStore(
  make: (options: FlexibleLimiterOptions) => InstanceType<typeof flexible.RateLimiterStoreAbstract>,
  release?: () => Promise<void>,
): RateLimitStore {
  let sweeper: InstanceType<typeof flexible.RateLimiterStoreAbstract> | undefined;
  const timer = setInterval(() => {
    void (sweeper as unknown as { clearExpired(before: number): Promise<unknown> } | undefined)?.clearExpired(Date.now() - 3_600_000)?.catch?.(() => undefined);
  }, SWEEP_MS);
  timer.unref?.();
  return flexibleRateLimitStore(
    (options) => {
      const limiter = make(options);
      sweeper ??= limiter;
      return limiter;
    },
    async () => {
      clearInterval(timer);
      await release?.();
    },
  );
}

/**
 * Rate limits counted in the SQLite file, shared by the processes that open it. With
 * `commit` (the storage's group commit), each count joins the transaction of the runs and
 * counts of the same turn instead of committing on its own, and the limiter's statements
 * are prepared once: rate-limiter-flexible prepares its upsert and commits it for every
 * count, which was a sixth of a webhook message's time (docs/benchmarks.md, "Rate limits").
 */
export function sqliteRateLimits(database: BetterSqlite3.Database, commit?: GroupCommit): RateLimitStore {
  const client = commit ? groupCommitted(database, commit) : database;
  return sqlStore((options) => new flexible.RateLimiterSQLite({ ...common(options), storeClient: client, storeType: "better-sqlite3" }));
}

/**
 * better-sqlite3 as rate-limiter-flexible uses it (`prepare(sql).get/run/all`,
 * `transaction(fn)()`, `open`), its statements kept by SQL text and its transactions run by
 * `commit`. The limiter awaits what its transaction returns, so a promise is fine there.
 */
function groupCommitted(database: BetterSqlite3.Database, commit: GroupCommit): BetterSqlite3.Database {
  const statements = new Map<string, BetterSqlite3.Statement>();
  const client = {
    get open() {
      return database.open;
    },
    prepare(sql: string) {
      let statement = statements.get(sql);
      if (!statement) {
        statement = database.prepare(sql);
        statements.set(sql, statement);
      }
      return statement;
    },
    transaction<T>(work: (...args: unknown[]) => T) {
      return (...args: unknown[]) => commit(() => bodyOf(() => work(...args)));
    },
  };
  return client as unknown as BetterSqlite3.Database;
}

/** `work` the first time, the same promise after. */
function once(work: () => Promise<void>): () => Promise<void> {
  let done: Promise<void> | undefined;
  return () => {
    done ??= work();
    return done;
  };
}

/**
 * Rate limits counted in Postgres, shared by every instance on the database, the counts of
 * one turn of the event loop in one statement ({@link postgresCounts}); `owned`: the pool is
 * ended with the store.
 */
export function postgresRateLimits(pool: pg.Pool, owned = false): RateLimitStore {
  return postgresCounts(pool, owned ? once(() => pool.end()) : undefined);
}
