import { type KyselyStorage, openStorage as open } from "@channelkit/kysely";

/** The database a command works on: `--db`, else `CHANNELKIT_DB`, else `./channelkit.db`. */
export function resolveDb(flag: string | undefined, env: NodeJS.ProcessEnv): string {
  return flag ?? env.CHANNELKIT_DB ?? "./channelkit.db";
}

/** Opens and migrates the storage behind a `--db` value: a SQLite path or a `postgres://` URL. */
export async function openStorage(db: string): Promise<KyselyStorage> {
  const storage = open(db);
  try {
    await storage.migrate();
  } catch (error) {
    await storage.close().catch(() => undefined);
    throw error;
  }
  return storage;
}
