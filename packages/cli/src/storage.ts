import type { MigrateOptions } from "@channelkit/core";
import { type KyselyStorage, openStorage as open, type PostgresOptions } from "@channelkit/kysely";
import { CliError } from "./errors.js";

/** The database a command works on: `--db`, else `CHANNELKIT_DB`, else `./channelkit.db`. */
export function resolveDb(flag: string | undefined, env: NodeJS.ProcessEnv): string {
  return flag ?? env.CHANNELKIT_DB ?? "./channelkit.db";
}

/**
 * Opens and migrates the storage behind a `--db` value: a SQLite path or a `postgres://` URL,
 * with the tables of `plugins`. A URL of another scheme is refused by name, where SQLite would
 * take it for a file's path.
 */
export async function openStorage(db: string, plugins?: MigrateOptions["plugins"], postgresOptions: PostgresOptions = {}): Promise<KyselyStorage> {
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(db)?.[1];
  if (scheme !== undefined && !/^postgres(ql)?$/i.test(scheme)) {
    throw new CliError(
      "database_error",
      `the database (--db or CHANNELKIT_DB) is a ${scheme}:// URL: channelkit knows postgres:// and postgresql:// URLs (Postgres) and file paths (SQLite)`,
    );
  }
  const storage = open(db, postgresOptions);
  try {
    await storage.migrate({ plugins });
  } catch (error) {
    await storage.close().catch(() => undefined);
    throw error;
  }
  return storage;
}
