import { sql } from "kysely";
import { sqlite } from "./sqlite.js";

/**
 * Copies the SQLite database at `location` to `target` (a file that must not exist) while
 * other processes read and write it, with `VACUUM INTO`: one read transaction, so the copy is
 * the database as of one moment, committed WAL pages included; writers go on meanwhile (WAL
 * mode), and another process's write never restarts it as it would the online backup API.
 * The database is opened as it is: nothing is migrated.
 *
 * @example
 * await backupSqlite("./channelkit.db", `./backups/channelkit-${Date.now()}.db`);
 */
export async function backupSqlite(location: string, target: string): Promise<void> {
  const storage = sqlite(location);
  try {
    await sql`VACUUM INTO ${target}`.execute(storage.db);
  } finally {
    await storage.close();
  }
}
