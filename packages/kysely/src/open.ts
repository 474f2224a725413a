import { postgres, type PostgresOptions } from "./postgres.js";
import { type SqliteOptions, sqlite } from "./sqlite.js";
import type { KyselyStorage } from "./storage.js";

/**
 * Storage for a connection string: a `postgres://` or `postgresql://` URL opens Postgres,
 * anything else is a SQLite file path (or `:memory:`).
 */
export function openStorage(location: string, options: SqliteOptions & PostgresOptions = {}): KyselyStorage {
  return /^postgres(ql)?:\/\//i.test(location) ? postgres(location, options) : sqlite(location, options);
}
