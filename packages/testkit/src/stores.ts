import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type KyselyStorage, postgres, sqlite } from "@channelkit/kysely";
import { createTestDatabase } from "./postgres.js";
import type { TestStore } from "./target.js";

/** The Kysely store around `storage`: migrated, and able to expire keys (the admin API cannot). */
async function kyselyStore(storage: KyselyStorage, dispose: () => Promise<void>): Promise<TestStore> {
  await storage.migrate();
  return {
    storage,
    async expireApiKeys(channelId) {
      const past = new Date(Date.now() - 60_000).toISOString();
      await storage.db.updateTable("api_keys").set({ expires_at: past }).where("channel_id", "=", channelId).execute();
    },
    dispose,
  };
}

/** A migrated SQLite store in a new temporary directory, removed on dispose. */
export async function sqliteTestStore(): Promise<TestStore> {
  const dir = await mkdtemp(join(tmpdir(), "channelkit-contract-"));
  return kyselyStore(sqlite(join(dir, "contract.db")), () => rm(dir, { recursive: true, force: true }));
}

/**
 * A migrated Postgres store in a new database on the test server `serverUrl` (see
 * {@link createTestDatabase}), dropped on dispose.
 */
export async function postgresTestStore(serverUrl: string): Promise<TestStore> {
  const database = await createTestDatabase(serverUrl);
  return kyselyStore(postgres(database.url), () => database.drop());
}
