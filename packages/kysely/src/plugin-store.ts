import type { PluginStore, PluginStoreSetOptions } from "@channelkit/core";
import type { Kysely } from "kysely";
import type { Executor } from "./executor.js";
import type { Database } from "./schema.js";

/** At most how often a storage deletes every expired value and lease, on a write, in ms. */
const SWEEP_EVERY_MS = 60_000;

/**
 * The {@link PluginStore}s of a Kysely storage, on `plugin_kv` and `plugin_leases` (migration
 * `0011_plugin_store`), the same statements on every database (SQLite, Postgres, D1): one
 * statement per call. `add` and `acquireLease` are an insert that takes over, in the same
 * statement, a row that may be taken (`ON CONFLICT … DO UPDATE … WHERE`): of instances racing
 * for one key, the database lets exactly one write it, and the others get no row back.
 *
 * Times are ISO 8601 text from this process's clock, compared as text (as the idempotency
 * keys' are). An expired row reads as absent; the one read is deleted when met, and all
 * expired ones at most once a minute per storage, on a write.
 */
export function kyselyPluginStores(db: Kysely<Database>, exec: Executor): (pluginId: string) => PluginStore {
  let sweptAt = Date.now();
  /** Deletes every expired value and lease, at most once a minute. */
  async function sweep(now: number): Promise<void> {
    if (now - sweptAt < SWEEP_EVERY_MS) return;
    sweptAt = now;
    const at = iso(now);
    await exec.rows(db.deleteFrom("plugin_kv").where("expires_at", "<=", at).compile());
    await exec.rows(db.deleteFrom("plugin_leases").where("expires_at", "<=", at).compile());
  }

  return (pluginId) => {
    if (typeof pluginId !== "string" || pluginId === "") {
      throw new TypeError(`channelkit: pluginStore() takes the plugin's id, not ${JSON.stringify(pluginId) ?? String(pluginId)}`);
    }
    const value = (key: string) => db.selectFrom("plugin_kv").where("plugin_id", "=", pluginId).where("key", "=", key);
    const lease = (name: string) => db.deleteFrom("plugin_leases").where("plugin_id", "=", pluginId).where("name", "=", name);
    /** Deletes `key` if it is still expired at `at` (another instance may have set it since it was read). */
    const dropExpired = (key: string, at: string) =>
      exec.rows(db.deleteFrom("plugin_kv").where("plugin_id", "=", pluginId).where("key", "=", key).where("expires_at", "<=", at).compile());

    return {
      async get<Value = unknown>(key: string): Promise<Value | undefined> {
        checkKey(key);
        const [row] = await exec.rows(value(key).select(["value", "expires_at"]).compile());
        if (!row) return undefined;
        const at = iso(Date.now());
        if (row.expires_at !== null && row.expires_at <= at) {
          await dropExpired(key, at);
          return undefined;
        }
        return JSON.parse(row.value) as Value;
      },

      async set(key: string, value: unknown, options?: PluginStoreSetOptions): Promise<void> {
        const now = Date.now();
        const row = newRow(pluginId, key, value, options, now);
        await sweep(now);
        await exec.rows(
          db
            .insertInto("plugin_kv")
            .values(row)
            .onConflict((oc) =>
              oc.columns(["plugin_id", "key"]).doUpdateSet((eb) => ({ value: eb.ref("excluded.value"), expires_at: eb.ref("excluded.expires_at") })),
            )
            .compile(),
        );
      },

      async add(key: string, value: unknown, options?: PluginStoreSetOptions): Promise<boolean> {
        const now = Date.now();
        const row = newRow(pluginId, key, value, options, now);
        await sweep(now);
        const added = await exec.rows(
          db
            .insertInto("plugin_kv")
            .values(row)
            .onConflict((oc) =>
              oc
                .columns(["plugin_id", "key"])
                .doUpdateSet((eb) => ({ value: eb.ref("excluded.value"), expires_at: eb.ref("excluded.expires_at") }))
                // Only over a value that expired: a live one is kept, and this call gets no row.
                .where((eb) => eb.and([eb("plugin_kv.expires_at", "is not", null), eb("plugin_kv.expires_at", "<=", iso(now))])),
            )
            .returning("key")
            .compile(),
        );
        return added.length > 0;
      },

      async delete(key: string): Promise<boolean> {
        checkKey(key);
        const at = iso(Date.now());
        const [row] = await exec.rows(db.deleteFrom("plugin_kv").where("plugin_id", "=", pluginId).where("key", "=", key).returning("expires_at").compile());
        // An expired value was not there: it is deleted all the same.
        return row !== undefined && (row.expires_at === null || row.expires_at > at);
      },

      async acquireLease(name: string, holder: string, ttlMs: number): Promise<boolean> {
        checkLease(name, holder);
        const now = Date.now();
        const until = iso(expiresAt(ttlMs, now, "acquireLease's ttlMs"));
        await sweep(now);
        const taken = await exec.rows(
          db
            .insertInto("plugin_leases")
            .values({ plugin_id: pluginId, name, holder, expires_at: until })
            .onConflict((oc) =>
              oc
                .columns(["plugin_id", "name"])
                .doUpdateSet((eb) => ({ holder: eb.ref("excluded.holder"), expires_at: eb.ref("excluded.expires_at") }))
                // Free to take when it lapsed; renewed when it is already `holder`'s.
                .where((eb) => eb.or([eb("plugin_leases.holder", "=", holder), eb("plugin_leases.expires_at", "<=", iso(now))])),
            )
            .returning("holder")
            .compile(),
        );
        return taken.length > 0;
      },

      async releaseLease(name: string, holder: string): Promise<boolean> {
        checkLease(name, holder);
        const at = iso(Date.now());
        const [row] = await exec.rows(lease(name).where("holder", "=", holder).returning("expires_at").compile());
        // A lapsed lease was no longer held: it is deleted all the same (no one else took it).
        return row !== undefined && row.expires_at > at;
      },
    };
  };
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

// The checks of the memory storage's plugin store (core's memory-plugin-store.ts), which the
// storage contract holds every store to.

/** The row of a value, checked: a TypeError for a key or value no store keeps, or a bad `ttlMs`. */
function newRow(pluginId: string, key: string, value: unknown, options: PluginStoreSetOptions | undefined, now: number) {
  checkKey(key);
  const json = JSON.stringify(value);
  if (json === undefined) throw new TypeError(`channelkit: a plugin store's value is JSON, and JSON has no ${typeof value} (delete the key instead)`);
  return { plugin_id: pluginId, key, value: json, expires_at: options?.ttlMs === undefined ? null : iso(expiresAt(options.ttlMs, now, "ttlMs")) };
}

function expiresAt(ttlMs: number, now: number, name: string): number {
  if (typeof ttlMs !== "number" || !Number.isFinite(ttlMs) || ttlMs <= 0) {
    throw new TypeError(`channelkit: ${name} is a number of milliseconds greater than 0, not ${String(ttlMs)}`);
  }
  // Past year 9999 an ISO 8601 time no longer sorts as text: as good as for ever.
  return Math.min(now + ttlMs, LATEST);
}

/** 9999-12-31T23:59:59.999Z. */
const LATEST = 253_402_300_799_999;

/** Postgres's text cannot hold U+0000: such a key is refused on every store. */
function checkKey(key: string, what = "key"): void {
  if (typeof key !== "string") throw new TypeError(`channelkit: a plugin store's ${what} is a string, not ${typeof key}`);
  if (key.includes("\u0000")) throw new TypeError(`channelkit: a plugin store's ${what} cannot hold U+0000`);
}

function checkLease(name: string, holder: string): void {
  checkKey(name, "lease name");
  checkKey(holder, "lease holder");
}
