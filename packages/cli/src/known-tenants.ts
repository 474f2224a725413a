import { existsSync } from "node:fs";
import { ServiceError } from "@channelkit/core";
import { findConfig } from "./config.js";
import { CliError, logLine } from "./errors.js";
import { type HostFlags, type Io, openHostStorage } from "./host.js";
import { resolveDb } from "./storage.js";

/**
 * Refuses an admin token for a tenant the command's database does not have: such a token is
 * refused by every route, and nothing else would say why. The token may be meant for a server
 * whose database this machine cannot reach: then the check is skipped with a warning, and no
 * database is created (a SQLite file that does not exist is not opened).
 */
export async function checkTenantsExist(flags: HostFlags, io: Io, tenantIds: string[]): Promise<void> {
  const skip = (why: string) => io.err(logLine(`WARNING: the tenants were not checked: ${why}`));
  if (!findConfig(flags.config, io.cwd ?? process.cwd())) {
    const db = resolveDb(flags.db, io.env);
    if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(db) && !existsSync(db)) return skip(`no database at ${db} (--db or CHANNELKIT_DB names the server's)`);
  }
  let storage: Awaited<ReturnType<typeof openHostStorage>>["storage"];
  try {
    ({ storage } = await openHostStorage(flags, io));
  } catch (error) {
    if (error instanceof CliError && error.code !== "database_error") throw error;
    return skip(`the database could not be opened (${error instanceof Error ? error.message : String(error)})`);
  }
  try {
    for (const id of tenantIds) {
      if (!(await storage.findTenant(id))) {
        // The admin operations' own refusal of an unknown tenant, so the command answers as they do.
        throw new ServiceError("validation_error", `No tenant exists with id ${id}: no admin token was signed (npx channelkit tenant list shows the tenants).`);
      }
    }
  } finally {
    await storage.close();
  }
}
