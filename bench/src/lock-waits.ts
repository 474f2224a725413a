/**
 * Times SQLite's `BEGIN IMMEDIATE` in a bench server (`--instances`): where a transaction waits
 * for another process's write lock. better-sqlite3 is loaded once per process, so wrapping its
 * `prepare` reaches the statements the storage prepares; nothing of the library is changed.
 */
import { createRequire } from "node:module";
import type BetterSqlite3 from "better-sqlite3";
import { lockWaits } from "./shared.js";

/** SQLite's busy handler sleeps at least 1 ms before it tries the lock again. */
const WAIT_MS = 1;

export function countLockWaits(): void {
  const Database = createRequire(import.meta.url)("better-sqlite3") as typeof BetterSqlite3;
  const prepare = Database.prototype.prepare;
  Database.prototype.prepare = function (this: BetterSqlite3.Database, source: string) {
    const statement = prepare.call(this, source);
    if (!/^begin immediate/i.test(source.trim())) return statement;
    const run = statement.run as (this: BetterSqlite3.Statement, ...parameters: unknown[]) => BetterSqlite3.RunResult;
    statement.run = function (this: BetterSqlite3.Statement, ...parameters: unknown[]) {
      const began = performance.now();
      try {
        return run.apply(this, parameters);
      } catch (error) {
        if ((error as { code?: unknown }).code === "SQLITE_BUSY") lockWaits.busy++;
        throw error;
      } finally {
        const waited = performance.now() - began;
        lockWaits.begins++;
        if (waited >= WAIT_MS) {
          lockWaits.waits++;
          lockWaits.waitedMs += waited;
        }
      }
    } as typeof statement.run;
    return statement;
  } as typeof prepare;
}
