import type { RateLimitStore } from "@channelkit/core";
import type pg from "pg";
import { batchedCounts, type CountedKey, type CountsBatch, type StoredCount } from "./counts.js";
import { afterIo, bodyOf, type GroupCommit } from "./group-commit.js";

/** The new window's end when the stored one ended before `now`; the stored count, else, plus these points. */
const ADD_POINTS = `on conflict (key) do update set
  points = case when rate_limit_counters.expire is null or rate_limit_counters.expire > $now then rate_limit_counters.points + excluded.points else excluded.points end,
  expire = case when rate_limit_counters.expire is null or rate_limit_counters.expire > $now then rate_limit_counters.expire else excluded.expire end
returning key, points, expire`;
const SWEEP = "delete from rate_limit_counters where expire < ";

/** At most this many keys per SQLite statement: one prepared statement per size up to it. */
const SQLITE_KEYS_PER_STATEMENT = 32;

/** The part of a better-sqlite3 connection the counts use (a runtime's own driver offers it too). */
export interface CountsConnection {
  prepare(sql: string): { all(...parameters: unknown[]): unknown[]; run(...parameters: unknown[]): unknown };
}

/**
 * Rate limits counted in the SQLite file, shared by the processes that open it: the counts of
 * a turn of the event loop in one statement ({@link batchedCounts}), run in the storage's
 * group commit (`commit`) with the runs of that turn rather than committed on their own.
 */
export function sqliteRateLimits(database: CountsConnection, commit: GroupCommit): RateLimitStore {
  const statements = new Map<number, ReturnType<CountsConnection["prepare"]>>();
  const upsert = (size: number) => {
    let statement = statements.get(size);
    if (!statement) {
      // Bare `?` only (better-sqlite3 binds `?NNN` by name): each key's three values, then `now` twice.
      const values = Array.from({ length: size }, () => "(?, ?, ?)").join(", ");
      statement = database.prepare(`insert into rate_limit_counters (key, points, expire) values ${values} ${ADD_POINTS.replaceAll("$now", "?")}`);
      statements.set(size, statement);
    }
    return statement;
  };
  return batchedCounts({
    // The batch is taken when the group commit runs it: the counts of the turn go in the
    // same transaction as its runs, not one turn of the event loop later (docs/benchmarks.md,
    // "Counts taken in the runs' turn"). Taken once: a body runs again after a rollback.
    add: (take) => {
      let batch: CountsBatch | undefined;
      return commit(
        () =>
          bodyOf(() => {
            batch ??= take();
            const { keys, now } = batch;
            const rows: StoredCount[] = [];
            for (let start = 0; start < keys.length; start += SQLITE_KEYS_PER_STATEMENT) {
              const chunk = keys.slice(start, start + SQLITE_KEYS_PER_STATEMENT);
              rows.push(...(upsert(chunk.length).all(...flat(chunk), now, now) as StoredCount[]));
            }
            return rows;
          }),
        true,
      );
    },
    sweep: (before) => commit(() => bodyOf(() => database.prepare(`${SWEEP}?`).run(before))),
  });
}

/** A batch's keys as the SQLite statement's first parameters: key, points, expire for each. */
function flat(keys: CountedKey[]): unknown[] {
  const values: unknown[] = [];
  for (const { key, points, expire } of keys) values.push(key, points, expire);
  return values;
}

/**
 * Rate limits counted in Postgres, shared by every instance on the database: the counts of a
 * turn of the event loop in one statement ({@link batchedCounts}), one round trip; `owned`:
 * the pool is ended with the store.
 */
export function postgresRateLimits(pool: pg.Pool, owned = false): RateLimitStore {
  const upsert = `insert into rate_limit_counters (key, points, expire)
select key, points, expire from unnest($1::varchar[], $2::int[], $3::bigint[]) as t(key, points, expire)
${ADD_POINTS.replaceAll("$now", "$4")}`;
  const table: Parameters<typeof batchedCounts>[0] = {
    // The counts of a turn of the event loop: taken once its I/O is done.
    add: async (take) => {
      await new Promise<void>((resolve) => afterIo(resolve));
      const { keys, now } = take();
      const { rows } = await pool.query<StoredCount>(upsert, [keys.map((k) => k.key), keys.map((k) => k.points), keys.map((k) => k.expire), now]);
      return rows;
    },
    sweep: (before) => pool.query(`${SWEEP}$1`, [before]),
  };
  if (owned) table.release = once(() => pool.end());
  return batchedCounts(table);
}

/** `work` the first time, the same promise after. */
function once(work: () => Promise<void>): () => Promise<void> {
  let done: Promise<void> | undefined;
  return () => {
    done ??= work();
    return done;
  };
}
