import { existsSync, statSync } from "node:fs";
import { rm } from "node:fs/promises";
import { resolve } from "node:path";
import { backupSqlite } from "@channelkit/kysely";
import { parse } from "./args.js";
import { findConfig, loadConfig } from "./config.js";
import { CliError, UsageError } from "./errors.js";
import type { Io } from "./host.js";
import { resolveDb } from "./storage.js";

/**
 * `backup FILE [--force]`: a consistent copy of a SQLite database while instances write to it
 * (`backupSqlite`, `VACUUM INTO`). The database is not migrated first: the copy is what the
 * instances run on. Prints `{"backup":{"file","bytes"}}`.
 */
export async function backupCommand(args: string[], io: Io): Promise<void> {
  const { values, positionals } = parse(args, { force: { type: "boolean" } }, 1, "the backup file's path");
  const cwd = io.cwd ?? process.cwd();
  const file = findConfig(values.config, cwd);
  if (file && (await loadConfig(file)).storage) {
    throw new UsageError(`backup copies a --db SQLite file; ${file.shown} sets its own storage: back it up with its database's tools`);
  }
  const db = resolveDb(values.db, io.env);
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(db)) {
    throw new UsageError("backup copies a SQLite database; back up Postgres with pg_dump -Fc (docs/operations.md#backups-and-restores)");
  }
  const source = resolve(cwd, db);
  if (!existsSync(source)) throw new CliError("database_error", `no SQLite database at ${source}`);
  const target = resolve(cwd, positionals[0] as string);
  if (target === source) throw new UsageError("the backup file is the database itself: name another file");
  if (existsSync(target)) {
    if (!values.force) throw new UsageError(`${target} already exists: name another file, or pass --force to replace it`);
    await rm(target);
  }
  try {
    await backupSqlite(source, target);
  } catch (error) {
    throw new CliError("database_error", `the backup of ${source} failed: ${(error as Error).message}`, { cause: error });
  }
  io.out(JSON.stringify({ backup: { file: target, bytes: statSync(target).size } }));
}
