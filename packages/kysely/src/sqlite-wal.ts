import type BetterSqlite3 from "better-sqlite3";
import { isBusy } from "./group-commit.js";

/**
 * Puts the database in WAL mode (`PRAGMA journal_mode = WAL`), waiting up to `timeoutMs`
 * while another process holds a lock. The busy timeout does not cover this: processes that
 * open one new file at the same moment all switch it to WAL, each needs a lock another holds,
 * and SQLite answers `SQLITE_BUSY` ("database is locked") at once rather than call the busy
 * handler where waiting could deadlock (see `sqlite3_busy_handler`). The switch is retried,
 * a few milliseconds apart, until it passes (the first process's switch, persistent in the
 * file, makes the others' a no-op) or the time is up. Any other error is thrown at once.
 */
export function enableWal(database: BetterSqlite3.Database, timeoutMs: number): void {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0; ; attempt++) {
    try {
      database.pragma("journal_mode = WAL");
      return;
    } catch (error) {
      if (!isBusy(error) || Date.now() >= deadline) throw error;
    }
    // `sqlite()` is synchronous: sleep without returning to the event loop (1, 2, 4 .. 32 ms).
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, Math.min(32, 2 ** attempt));
  }
}
