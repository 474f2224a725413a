import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { memoryStorage, type Storage } from "@channelkit/core";
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

/**
 * A database that several services open, each on its own connection, as instances behind a
 * load balancer do; `dispose` removes it once they are closed.
 */
export interface SharedTestDatabase {
  open(): KyselyStorage;
  dispose(): Promise<void>;
}

/** A SQLite file in a new temporary directory, for services to share. */
export async function sqliteSharedDatabase(): Promise<SharedTestDatabase> {
  const dir = await mkdtemp(join(tmpdir(), "channelkit-shared-"));
  const location = join(dir, "shared.db");
  return { open: () => sqlite(location), dispose: () => rm(dir, { recursive: true, force: true }) };
}

/** A new database on the Postgres test server `serverUrl`, for services to share. */
export async function postgresSharedDatabase(serverUrl: string): Promise<SharedTestDatabase> {
  const database = await createTestDatabase(serverUrl);
  return { open: () => postgres(database.url), dispose: () => database.drop() };
}

/**
 * A store on `memoryStorage()` of `@channelkit/core`. Keys can be expired: the store
 * remembers the hashes of each channel's keys and reads them back expired.
 */
export async function memoryTestStore(): Promise<TestStore> {
  const inner = memoryStorage();
  await inner.migrate();
  const hashesOf = new Map<string, Set<string>>();
  const expired = new Map<string, string>();
  const remember = (channelId: string, hash: string) => {
    let hashes = hashesOf.get(channelId);
    if (!hashes) {
      hashes = new Set();
      hashesOf.set(channelId, hashes);
    }
    hashes.add(hash);
  };
  const storage: Storage = {
    ...inner,
    async createChannel(channel, key, audit) {
      await inner.createChannel(channel, key, audit);
      remember(key.channelId, key.hash);
    },
    async replaceChannelKey(channelId, key, revokedAt, audit) {
      const replaced = await inner.replaceChannelKey(channelId, key, revokedAt, audit);
      if (replaced) remember(key.channelId, key.hash);
      return replaced;
    },
    async findKeyByHash(hash) {
      const found = await inner.findKeyByHash(hash);
      const expiresAt = expired.get(hash);
      return found && expiresAt !== undefined ? { ...found, key: { ...found.key, expiresAt } } : found;
    },
  };
  return {
    storage,
    async expireApiKeys(channelId) {
      const past = new Date(Date.now() - 60_000).toISOString();
      for (const hash of hashesOf.get(channelId) ?? []) expired.set(hash, past);
    },
    dispose: async () => undefined,
  };
}
