import { type CompiledQuery, Kysely, sql, type PostgresCursor, PostgresDialect, type PostgresPoolClient, type PostgresQueryResult } from "kysely";
import { createHash } from "node:crypto";
import type pg from "pg";
import type { Database } from "./schema.js";
import { pgDriver } from "./drivers.js";
import { type Executor, runBody } from "./executor.js";
import { FEED_CHANNEL, postgresFeed } from "./postgres-feed.js";
import { storedParameter, textTypes } from "./text-codec.js";
import { postgresRateLimits } from "./rate-limits.js";
import { KyselyStorage } from "./storage.js";

/**
 * Options of {@link postgres}. The timeouts bound how long a request can wait on the
 * database: while it is unreachable, a request fails (`500 runtime_error`) after one of
 * `connectionTimeoutMs` or `queryTimeoutMs` (their sum at worst, when every connection of the
 * pool was busy), never hangs, and the pool recovers by itself when the database is back.
 * They apply to the pool `postgres()` creates from a URL; a pool you pass keeps its own
 * settings (`query_timeout`, `connectionTimeoutMillis`, `idle_in_transaction_session_timeout`).
 */
export interface PostgresOptions {
  /** Most connections the pool opens (default 10). Size it so instances × max stays under the server's `max_connections`. */
  poolSize?: number;
  /** Longest a statement may run before the server cancels it, in ms (default 5000). Lock waits count. */
  statementTimeoutMs?: number;
  /**
   * Longest the client waits for the answer to one statement, in ms (default
   * `statementTimeoutMs + 1000`). This, not the statement timeout, bounds a request when the
   * server cannot answer at all (network partition, TCP hang); the connection is then
   * discarded. Keep it above `statementTimeoutMs` so the server's own cancellation wins
   * whenever the server can still speak.
   */
  queryTimeoutMs?: number;
  /** Longest a request waits for a free connection or a new one, in ms (default 5000). */
  connectionTimeoutMs?: number;
  /** Idle connections are closed after this many ms (default 10000). */
  idleTimeoutMs?: number;
  /**
   * The server ends a session left idle inside a transaction for this long, in ms
   * (default 10000). An instance that loses its link in the middle of storing a run cannot
   * roll back itself; without this, the server could keep that transaction, and the
   * conversation row it locks, until TCP notices the dead peer (hours by default).
   * channelkit's transactions never idle: they send their statements back to back.
   */
  idleInTransactionTimeoutMs?: number;
  /**
   * Run the request path's statements as named prepared statements, parsed and planned once
   * per connection (default true). Turn off behind a pooler that cannot keep them, such as
   * PgBouncer before 1.21 in transaction mode.
   */
  preparedStatements?: boolean;
}

/**
 * Storage on PostgreSQL, for production and for several instances sharing one database.
 * Pass a connection URL (`postgres://user@host:5432/db`) or your own `pg.Pool`; a pool you
 * pass is not ended by `close()`. Call `migrate()` before serving (or at deploy time).
 */
export function postgres(urlOrPool: string | pg.Pool, options: PostgresOptions = {}): KyselyStorage {
  const owned = typeof urlOrPool === "string";
  const statementTimeoutMs = options.statementTimeoutMs ?? 5000;
  const pool =
    typeof urlOrPool === "string"
      ? new (pgDriver().Pool)({
          connectionString: urlOrPool,
          max: options.poolSize ?? 10,
          statement_timeout: statementTimeoutMs,
          query_timeout: options.queryTimeoutMs ?? statementTimeoutMs + 1000,
          idle_in_transaction_session_timeout: options.idleInTransactionTimeoutMs ?? 10_000,
          connectionTimeoutMillis: options.connectionTimeoutMs ?? 5000,
          idleTimeoutMillis: options.idleTimeoutMs ?? 10_000,
        })
      : urlOrPool;
  // An idle client losing its connection emits on the pool; unhandled, that would crash the process.
  pool.on("error", () => undefined);
  const safe = guarded(pool);
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: safe }) });
  // The feed listens on a connection of its own, configured as the pool's.
  const clientConfig = (pool as unknown as { options: pg.ClientConfig }).options;
  return new KyselyStorage(
    db,
    pgExecutor(safe, options.preparedStatements ?? true, async () => {
      if (owned) await db.destroy();
    }),
    (exec) => postgresFeed(clientConfig, async (payload) => exec.rows(sql`select pg_notify(${FEED_CHANNEL}, ${payload})`.compile(db))),
    postgresRateLimits(owned ? countersPool(clientConfig) : pool, owned),
  );
}

/**
 * The rate limits' own small pool, whose sessions commit asynchronously
 * (`synchronous_commit = off`): every request of one client updates the same counter row, and
 * with each count waiting for its WAL flush (about a millisecond here) while it holds that
 * row, counts were served one at a time, which capped a webhook channel at about 450 requests
 * a second (docs/benchmarks.md, "Rate limits"). A count is visible to every instance at its
 * commit as before; a crash of the server may forget the counts of its last few hundred
 * milliseconds, never a conversation's data, which stays on the storage's own pool.
 */
export function countersPool(config: pg.ClientConfig): pg.Pool {
  const pool = new (pgDriver().Pool)({ ...config, max: 4, application_name: "channelkit rate limits", options: "-c synchronous_commit=off" });
  pool.on("error", () => undefined);
  return pool;
}

/**
 * Statements on the guarded pool rather than through Kysely's executor, whose connection
 * provider and result handling add to every statement's CPU (see docs/benchmarks.md, "Why
 * the code looks like this"). Transactions follow Kysely's protocol: `begin`, the statements,
 * `commit`; on failure `rollback` (which fails at once on a broken connection) and the
 * connection released, discarded when broken.
 */
function pgExecutor(pool: GuardedPool, prepared: boolean, close: () => Promise<void>): Executor {
  const on = (client: GuardedClient) => async (query: CompiledQuery) =>
    (await (prepared ? client.prepared(query.sql, query.parameters) : client.query(query.sql, query.parameters))).rows as unknown[];
  return {
    dataModifyingCtes: true,
    rowVersions: true,
    close,
    async rows<Row>(query: CompiledQuery<Row>) {
      const client = await pool.connect();
      try {
        return (await on(client)(query)) as Row[];
      } finally {
        client.release();
      }
    },
    async transaction(body) {
      const client = await pool.connect();
      try {
        await client.query("begin", []);
        const result = await runBody(body(), on(client));
        await client.query("commit", []);
        return result;
      } catch (error) {
        await client.query("rollback", []).catch(() => undefined);
        throw error;
      } finally {
        client.release();
      }
    },
  };
}

/** SQLSTATE of "cached plan must not change result type". */
const STALE_PREPARED_STATEMENT = "0A000";

const statementNames = new Map<string, string>();

/** A name for a statement's text, the same in every process (`ck_` and 24 hex digits of its SHA-256). */
function statementName(sql: string): string {
  let name = statementNames.get(sql);
  if (name === undefined) {
    name = `ck_${createHash("sha256").update(sql).digest("hex").slice(0, 24)}`;
    // The request path has a few statement texts; a bound keeps a pathological caller from growing this.
    if (statementNames.size < 1000) statementNames.set(sql, name);
  }
  return name;
}

/** Marks a client that already has an error listener. */
const listening = new WeakSet<pg.PoolClient>();

/**
 * The pool as Kysely sees it, made safe against a database that goes away:
 *
 * - A checked-out client has no error listener of the pool's: a connection lost while a
 *   query runs (or between two queries of a transaction) emits 'error' on the client, which
 *   would crash the process. Every client gets a listener; the failed query still rejects.
 * - A connection that failed other than by an error the server reported (reset, timeout of
 *   an answer that never came) is in an unknown state: a timed-out query may still be
 *   pending on it. It is marked broken: later queries on it (Kysely's ROLLBACK) fail at once
 *   instead of queueing behind the lost one, and it is removed from the pool on release
 *   instead of being handed to the next request.
 */
function guarded(pool: pg.Pool): GuardedPool {
  // Every statement's text is read back as it was stored (see text-codec.ts).
  const types = textTypes(pgDriver());
  return {
    async connect() {
      const client = await pool.connect();
      if (!listening.has(client)) {
        listening.add(client);
        client.on("error", () => undefined);
      }
      return new GuardedClient(client, types);
    },
    end: () => pool.end(),
  };
}

/** The pool as Kysely sees it (a `PostgresPool`), handing out {@link GuardedClient}s. */
interface GuardedPool {
  connect(): Promise<GuardedClient>;
  end(): Promise<void>;
}

/** One checkout of a pool client; see {@link guarded}. */
class GuardedClient implements PostgresPoolClient {
  readonly #client: pg.PoolClient;
  readonly #types: pg.CustomTypesConfig;
  #broken: Error | undefined;

  constructor(client: pg.PoolClient, types: pg.CustomTypesConfig) {
    this.#client = client;
    this.#types = types;
  }

  query<R>(sql: string, parameters: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>>;
  query<R>(cursor: PostgresCursor<R>): PostgresCursor<R>;
  query<R>(sql: string | PostgresCursor<R>, parameters?: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>> | PostgresCursor<R> {
    // The dialect is configured without a cursor class, so Kysely never passes a cursor.
    if (typeof sql !== "string") throw new TypeError("channelkit: cursors are not supported");
    return this.#run<R>(sql, parameters ?? []);
  }

  async #run<R>(sql: string, parameters: ReadonlyArray<unknown>, name?: string): Promise<PostgresQueryResult<R>> {
    if (this.#broken) throw new Error("channelkit: the database connection failed and is being discarded", { cause: this.#broken });
    try {
      const values = parameters.map(storedParameter);
      const types = this.#types;
      const result = await this.#client.query(name === undefined ? { text: sql, values, types } : { name, text: sql, values, types });
      return result as unknown as PostgresQueryResult<R>;
    } catch (error) {
      // Only an error the server reported proves that the connection is still in step. A
      // prepared statement whose result changed under it (another process migrated) fails
      // on this connection until it closes, so the connection is discarded too.
      if (!(error instanceof pgDriver().DatabaseError) || error.code === STALE_PREPARED_STATEMENT) {
        this.#broken = error instanceof Error ? error : new Error(String(error));
      }
      throw error;
    }
  }

  /**
   * Runs a statement as a named prepared statement, which each connection parses and plans
   * once: the request path's statements are a few fixed texts, and parsing them anew cost
   * the server more than running them. The name is derived from the text.
   */
  prepared<R>(sql: string, parameters: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>> {
    return this.#run<R>(sql, parameters, statementName(sql));
  }

  release(): void {
    this.#client.release(this.#broken);
  }
}
