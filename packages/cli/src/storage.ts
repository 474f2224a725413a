import { type KyselyStorage, sqlite } from "@channelkit/kysely";
import { UsageError } from "./usage.js";

/** The database a command works on: `--db`, else `CHANNELKIT_DB`, else `./channelkit.db`. */
export function resolveDb(flag: string | undefined, env: NodeJS.ProcessEnv): string {
  return flag ?? env.CHANNELKIT_DB ?? "./channelkit.db";
}

/** Opens and migrates the storage behind a `--db` value. */
export async function openStorage(db: string): Promise<KyselyStorage> {
  if (/^postgres(ql)?:\/\//.test(db)) {
    throw new UsageError("Postgres URLs are not supported yet by this version; use a SQLite file path.");
  }
  const storage = sqlite(db);
  await storage.migrate();
  return storage;
}
