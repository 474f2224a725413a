import { createRequire } from "node:module";
import type BetterSqlite3 from "better-sqlite3";
import type pg from "pg";

// The database drivers are optional peer dependencies, loaded when `sqlite()` or `postgres()`
// is first called: a Postgres user never needs better-sqlite3 (a native module) built, nor a
// SQLite user pg. `require` keeps that synchronous, as the two functions are.
let load: NodeJS.Require | undefined;

/**
 * `require` from this module. In a CommonJS bundle of it (a host's esbuild bundle, a test's
 * worker thread) `import.meta.url` is empty and the bundle's own `require` is used.
 */
function requireHere(): NodeJS.Require {
  load ??= typeof import.meta.url === "string" ? createRequire(import.meta.url) : require;
  return load;
}

let sqliteDriver: typeof BetterSqlite3 | undefined;
let postgresDriver: typeof pg | undefined;

/** better-sqlite3, which `sqlite()` needs. */
export function betterSqlite3(): typeof BetterSqlite3 {
  sqliteDriver ??= loadDriver<typeof BetterSqlite3>("better-sqlite3", "sqlite()");
  return sqliteDriver;
}

/** pg, which `postgres()` needs. */
export function pgDriver(): typeof pg {
  postgresDriver ??= loadDriver<typeof pg>("pg", "postgres()");
  return postgresDriver;
}

/**
 * The package `name`, or an error saying which package to install when it is not: `user` is
 * what needs it, e.g. `sqlite()`. Any other failure to load it (a native build for another
 * Node version) is thrown as it is.
 */
export function loadDriver<T>(name: string, user: string): T {
  try {
    return requireHere()(name) as T;
  } catch (error) {
    const missing = (error as { code?: unknown }).code === "MODULE_NOT_FOUND" && String((error as Error).message).startsWith(`Cannot find module '${name}'`);
    if (!missing) throw error;
    throw new Error(`channelkit: ${user} needs the ${name} package: npm install ${name}`, { cause: error });
  }
}
