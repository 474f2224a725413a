/**
 * A plugin's storage: tables of its own through migrations (SQL stores), and a small
 * key-value and lease store that every store implements (SQLite, Postgres, D1, memory),
 * namespaced by the plugin's id.
 */

/**
 * One migration of a plugin's tables. `db` is the store's Kysely instance (`Kysely<any>`):
 * core does not depend on Kysely, so it is typed loosely here; `@channelkit/kysely` exports
 * the types. Name the plugin's tables with its id as a prefix (`telegram_threads`).
 */
export interface PluginMigration {
  up(db: unknown): Promise<void>;
  down?(db: unknown): Promise<void>;
}

/** A plugin's tables: its migrations by name, applied in the order of their names after channelkit's own. */
export interface PluginSchema {
  migrations: Readonly<Record<string, PluginMigration>>;
}

/** Options of {@link PluginStore.set} and {@link PluginStore.add}. */
export interface PluginStoreSetOptions {
  /** How long the value lives, in ms; past it the key reads as absent. For ever when absent. */
  ttlMs?: number;
}

/**
 * A plugin's key-value store, shared by every instance on the database. Values are JSON
 * (what `JSON.stringify` keeps). Namespaced by plugin id: two plugins never see each other's
 * keys.
 */
export interface PluginStore {
  /** The value of `key`, or `undefined` when absent or expired. */
  get<Value = unknown>(key: string): Promise<Value | undefined>;
  /** Sets `key`, replacing any value. */
  set(key: string, value: unknown, options?: PluginStoreSetOptions): Promise<void>;
  /**
   * Sets `key` only when it is absent (or expired): true when this call set it. Across
   * instances exactly one caller wins: the way to act once on a platform's retried delivery.
   */
  add(key: string, value: unknown, options?: PluginStoreSetOptions): Promise<boolean>;
  /** Removes `key`; true when it was there. */
  delete(key: string): Promise<boolean>;
  /**
   * Takes the lease `name` for `holder` for `ttlMs`: true when `holder` now holds it (it was
   * free, lapsed, or already `holder`'s, which renews it). One holder at a time across instances.
   */
  acquireLease(name: string, holder: string, ttlMs: number): Promise<boolean>;
  /** Gives the lease back if `holder` holds it; true when it did. */
  releaseLease(name: string, holder: string): Promise<boolean>;
}
