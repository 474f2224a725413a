import {
  type CompiledQuery,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type DatabaseMetadata,
  type Dialect,
  type Driver,
  Kysely,
  type QueryResult,
  type SchemaMetadata,
  SqliteAdapter,
  SqliteQueryCompiler,
  sql,
  type TableMetadata,
} from "kysely";
import { type Executor, runBody } from "./executor.js";
import type { Database } from "./schema.js";
import { KyselyStorage } from "./storage.js";

// A Worker imports this entry only (the main one loads Node's drivers): a plugin's own queries too.
export { type KyselyPluginMigration, pluginDatabase, pluginSchema } from "./plugin-database.js";

/** The part of a Cloudflare D1 binding (`env.DB`) the storage uses. */
export interface D1Binding {
  prepare(sql: string): D1Statement;
}

/** The part of a D1 prepared statement the storage uses. */
export interface D1Statement {
  bind(...values: unknown[]): D1Statement;
  all<T = Record<string, unknown>>(): Promise<{ results: T[]; meta: { changes?: number; last_row_id?: number } }>;
}

/** Options of {@link d1}. */
export interface D1Options {
  /**
   * Told once, when the storage is made, what D1 cannot do (see {@link d1}); default
   * `console.warn`. Pass `() => {}` once you have read it.
   */
  warn?: (message: string) => void;
}

/** What {@link d1} tells once: D1 runs no transaction of several dependent statements. */
export const D1_LIMITS =
  "channelkit: on Cloudflare Workers with D1, (1) a storage transaction runs statement by statement (D1 has no interactive transactions): each statement is atomic, but a failure in the middle leaves the statements before it; (2) a run whose client disconnects is not stored: the Worker's work ends with its request, and the conversation's next run takes its turn over once its lease lapses (turnLeaseMs); (3) resumable streams, the live-chat subscription and the inbox feed do not work: a request cannot use what another request's work holds; (4) rate limits and the live feed between instances stay within the isolate. See docs/runtimes.md.";

/**
 * Storage on Cloudflare D1, for a Worker: `d1(env.DB)`. The same schema, migrations and
 * statements as `sqlite()` (D1 is SQLite), with these limits, told once through `warn`:
 *
 * - D1 has no interactive transaction (`BEGIN` is refused; `batch()` cannot feed a
 *   statement's result to the next). The storage's transactions, whose statements depend on
 *   each other's rows, run statement by statement: every statement is atomic, and the
 *   storage's writes are compare-and-sets on the conversation's row, so two runs never take
 *   one turn. But a failure between two
 *   statements leaves the first ones written (a run's claim without its user message, say).
 * - A Worker's work ends with its request: a run whose client disconnects is not stored
 *   (the conversation's next run takes its turn over once its lease lapses), and resumable
 *   streams, the live-chat subscription and the inbox feed, which need work that outlives a
 *   request or crosses requests, do not work.
 * - No live feed between isolates (the service's feed is the isolate's own) and rate limits
 *   counted in the isolate's memory.
 *
 * `migrate()` runs the same migrations, statement by statement, recorded in
 * `channelkit_migration`: run it once per deploy (a route of your own, a scheduled event),
 * not from every isolate at once.
 */
export function d1(binding: D1Binding, options: D1Options = {}): KyselyStorage {
  (options.warn ?? ((message) => console.warn(message)))(D1_LIMITS);
  const db = new Kysely<Database>({ dialect: d1Dialect(binding) });
  return new KyselyStorage(db, d1Executor(binding));
}

/** A Kysely dialect for D1: SQLite's compiler and adapter, statements sent to the binding. */
export function d1Dialect(binding: D1Binding): Dialect {
  return {
    createAdapter: () => new SqliteAdapter(),
    createDriver: () => new D1Driver(binding),
    createIntrospector: (db) => new D1Introspector(db),
    createQueryCompiler: () => new SqliteQueryCompiler(),
  };
}

/**
 * SQLite's introspection without D1's own tables (`_cf_METADATA`...), which D1 forbids
 * reading: Kysely's, which joins `pragma_table_info` over every table, fails there with
 * `SQLITE_AUTH`. The Migrator uses it to find its tables.
 */
class D1Introspector implements DatabaseIntrospector {
  readonly #db: Kysely<any>;
  constructor(db: Kysely<any>) {
    this.#db = db;
  }
  async getSchemas(): Promise<SchemaMetadata[]> {
    return [];
  }
  async getTables(): Promise<TableMetadata[]> {
    const { rows } = await sql<{ name: string; type: string }>`select name, type from sqlite_master
      where type in ('table', 'view') and name not like 'sqlite_%' and substr(name, 1, 4) <> '_cf_' order by name`.execute(this.#db);
    const tables: TableMetadata[] = [];
    for (const { name, type } of rows) {
      const columns = await sql<{
        name: string;
        type: string;
        notnull: number;
        dflt_value: unknown;
        pk: number;
      }>`select name, type, "notnull", dflt_value, pk from pragma_table_info(${name})`.execute(this.#db);
      tables.push({
        name,
        isView: type === "view",
        columns: columns.rows.map((column) => ({
          name: column.name,
          dataType: column.type,
          isNullable: !column.notnull,
          isAutoIncrementing: false,
          hasDefaultValue: column.dflt_value != null,
        })),
      });
    }
    return tables;
  }
  async getMetadata(): Promise<DatabaseMetadata> {
    return { tables: await this.getTables() };
  }
}

/** `BEGIN`, `COMMIT` and `ROLLBACK` as Kysely and the migration lock send them: no-ops on D1, which refuses them. */
const TRANSACTION_CONTROL = /^\s*(begin(\s+(immediate|deferred|exclusive))?(\s+transaction)?|commit|end|rollback)\s*;?\s*$/i;

async function execute<R>(binding: D1Binding, query: CompiledQuery): Promise<QueryResult<R>> {
  if (TRANSACTION_CONTROL.test(query.sql)) return { rows: [] };
  const parameters = query.parameters.map((value) => (value === undefined ? null : typeof value === "boolean" ? Number(value) : value));
  const { results, meta } = await binding
    .prepare(query.sql)
    .bind(...parameters)
    .all<R>();
  return {
    rows: results ?? [],
    ...(meta?.changes === undefined ? {} : { numAffectedRows: BigInt(meta.changes) }),
    ...(meta?.last_row_id === undefined ? {} : { insertId: BigInt(meta.last_row_id) }),
  };
}

class D1Connection implements DatabaseConnection {
  readonly #binding: D1Binding;
  constructor(binding: D1Binding) {
    this.#binding = binding;
  }
  executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    return execute<R>(this.#binding, query);
  }
  // biome-ignore lint/correctness/useYield: D1 streams nothing; Kysely's interface needs the method.
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error("channelkit: D1 does not stream query results");
  }
}

class D1Driver implements Driver {
  readonly #connection: D1Connection;
  constructor(binding: D1Binding) {
    this.#connection = new D1Connection(binding);
  }
  async init(): Promise<void> {}
  async acquireConnection(): Promise<DatabaseConnection> {
    return this.#connection;
  }
  // D1 has no interactive transactions: Kysely's `db.transaction()` runs its statements one by one.
  async beginTransaction(): Promise<void> {}
  async commitTransaction(): Promise<void> {}
  async rollbackTransaction(): Promise<void> {}
  async releaseConnection(): Promise<void> {}
  async destroy(): Promise<void> {}
}

/**
 * The storage's executor on D1: statements straight to the binding, a transaction's
 * statements in order (see {@link d1}). No lock between this isolate's transactions: a
 * transaction whose request the runtime cancelled would never release it.
 */
function d1Executor(binding: D1Binding): Executor {
  const rows = async (query: CompiledQuery) => (await execute(binding, query)).rows as unknown[];
  return {
    dataModifyingCtes: false,
    rows: rows as Executor["rows"],
    transaction: (body) => runBody(body(), rows),
    close: async () => undefined,
  };
}
