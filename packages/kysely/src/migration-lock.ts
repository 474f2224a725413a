import { type Kysely, type MigrationResultSet, sql, SqliteAdapter } from "kysely";

/**
 * Runs `run` (the Migrator) so that processes migrating one database at the same moment take
 * turns: the first applies the migrations, the others wait and then find nothing to do.
 * Kysely's Migrator alone does not ensure this:
 *
 * - On SQLite its migration lock is a no-op (the adapter assumes one connection in one
 *   process) and, the adapter declaring no transactional DDL, it runs the migrations outside
 *   any transaction: two processes both see `0001_initial` pending and the second fails with
 *   `table "tenants" already exists`. Here the whole run, from the creation of the migration
 *   tables to the last migration, is one `BEGIN IMMEDIATE` transaction: it takes the write
 *   lock at once, so another process waits at its own `BEGIN IMMEDIATE` (up to the busy
 *   timeout) and, once in, reads the schema the first one committed. A migration that fails
 *   leaves nothing behind. (A future migration that needs `PRAGMA foreign_keys = OFF` cannot
 *   run inside it: that pragma is a no-op within a transaction.)
 * - On Postgres its advisory lock covers the migrations but not the creation of its own two
 *   tables, which run before it, concurrently, as `CREATE TABLE IF NOT EXISTS` (which can fail
 *   with a unique violation on `pg_type`; Kysely re-checks and ignores it). Here a session
 *   advisory lock of channelkit's own is taken first, on the connection the Migrator then
 *   runs on, so every step is serialized. It is waited for with `pg_try_advisory_lock`, not
 *   `pg_advisory_lock`, so the wait is not cut short by the pool's statement timeout, and is
 *   bounded by {@link LOCK_WAIT_MS}. The lock ends with the session if the process dies.
 *
 * `run` gets a Kysely bound to that one connection; on SQLite a result set with an error is
 * rolled back.
 */
export async function withMigrationLock(db: Kysely<any>, run: (db: Kysely<any>) => Promise<MigrationResultSet>): Promise<MigrationResultSet> {
  // Inside a caller's transaction: the caller owns the connection and its locking.
  if (db.isTransaction) return run(db);
  const adapter = db.getExecutor().adapter;
  if (adapter instanceof SqliteAdapter) {
    return db.connection().execute(async (connection) => {
      await sql`begin immediate`.execute(connection);
      let result: MigrationResultSet;
      try {
        result = await run(connection);
      } catch (error) {
        await sql`rollback`.execute(connection).catch(() => undefined);
        throw error;
      }
      await (result.error === undefined ? sql`commit` : sql`rollback`).execute(connection);
      return result;
    });
  }
  if (adapter.supportsTransactionalDdl) {
    // Postgres (the only such dialect channelkit supports).
    return db.connection().execute(async (connection) => {
      await acquireAdvisoryLock(connection);
      try {
        return await run(connection);
      } finally {
        await sql`select pg_advisory_unlock(${sql.lit(LOCK_KEY)})`.execute(connection);
      }
    });
  }
  return run(db);
}

/**
 * The key of channelkit's migration advisory lock: the first 8 bytes of SHA-256("channelkit
 * migrations") as a signed bigint. Kysely's Migrator takes its own key after this one.
 */
const LOCK_KEY = -437259654570309338n;

/** Longest a process waits for another's migration, in ms. */
const LOCK_WAIT_MS = 120_000;

/** Interval between two attempts to take the lock, in ms. */
const LOCK_POLL_MS = 50;

async function acquireAdvisoryLock(connection: Kysely<any>): Promise<void> {
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    const { rows } = await sql<{ locked: boolean }>`select pg_try_advisory_lock(${sql.lit(LOCK_KEY)}) as locked`.execute(connection);
    if (rows[0]?.locked) return;
    if (Date.now() >= deadline) {
      throw new Error(`channelkit: another process has held the migration lock for ${LOCK_WAIT_MS / 1000} s; is a migration stuck?`);
    }
    await new Promise((resolve) => setTimeout(resolve, LOCK_POLL_MS));
  }
}
