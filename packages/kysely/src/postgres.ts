import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import type { Database } from "./schema.js";
import { KyselyStorage } from "./storage.js";

/** Options of {@link postgres}. */
export interface PostgresOptions {
  /** Most connections the pool opens (default 10). Size it so instances × max stays under the server's `max_connections`. */
  poolSize?: number;
  /** Longest a statement may run before the server cancels it, in ms (default 5000). */
  statementTimeoutMs?: number;
  /** Longest a request waits for a free connection or a new one, in ms (default 5000). */
  connectionTimeoutMs?: number;
  /** Idle connections are closed after this many ms (default 10000). */
  idleTimeoutMs?: number;
}

/**
 * Storage on PostgreSQL, for production and for several instances sharing one database.
 * Pass a connection URL (`postgres://user@host:5432/db`) or your own `pg.Pool`; a pool you
 * pass is not ended by `close()`. Call `migrate()` before serving (or at deploy time).
 */
export function postgres(urlOrPool: string | pg.Pool, options: PostgresOptions = {}): KyselyStorage {
  const owned = typeof urlOrPool === "string";
  const pool =
    typeof urlOrPool === "string"
      ? new pg.Pool({
          connectionString: urlOrPool,
          max: options.poolSize ?? 10,
          statement_timeout: options.statementTimeoutMs ?? 5000,
          // Also bounds the wait when the server is unreachable and TCP hangs.
          query_timeout: (options.statementTimeoutMs ?? 5000) + 1000,
          connectionTimeoutMillis: options.connectionTimeoutMs ?? 5000,
          idleTimeoutMillis: options.idleTimeoutMs ?? 10_000,
        })
      : urlOrPool;
  // An idle client losing its connection emits on the pool; unhandled, that would crash the process.
  pool.on("error", () => undefined);
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return new KyselyStorage(db, async () => {
    if (owned) await db.destroy();
  });
}
