import type { MigrateOptions } from "./types.js";
import type { PluginStore, PluginStoreSetOptions } from "../plugin/storage.js";

/** A value as stored: its JSON text (so that what is read back is never an alias), and when it expires (ms since the epoch). */
interface Entry {
  json: string;
  expiresAt: number | null;
}

interface Lease {
  holder: string;
  expiresAt: number;
}

/** At most how often the expired entries of every plugin are swept, on a write, in ms. */
const SWEEP_EVERY_MS = 60_000;

/**
 * The {@link PluginStore}s of the in-memory storage: values and leases in maps by plugin id,
 * within one process. An expired entry reads as absent and is removed when met, and all
 * expired ones at most once a minute, on a write. `checkOpen` throws once the storage is
 * closed.
 */
export function memoryPluginStores(checkOpen: () => void): MemoryPluginStores {
  const values = new Map<string, Map<string, Entry>>();
  const leases = new Map<string, Map<string, Lease>>();
  let sweptAt = Date.now();
  const of = <T>(maps: Map<string, Map<string, T>>, pluginId: string): Map<string, T> => {
    let map = maps.get(pluginId);
    if (!map) {
      map = new Map();
      maps.set(pluginId, map);
    }
    return map;
  };
  /** Removes every expired entry and lease, at most once a minute. */
  const sweep = (now: number) => {
    if (now - sweptAt < SWEEP_EVERY_MS) return;
    sweptAt = now;
    for (const map of values.values()) for (const [key, entry] of map) if (expired(entry, now)) map.delete(key);
    for (const map of leases.values()) for (const [name, lease] of map) if (lease.expiresAt <= now) map.delete(name);
  };

  const forgetKeysContaining = (text: string) => {
    checkOpen();
    for (const map of values.values()) for (const key of [...map.keys()]) if (key.includes(text)) map.delete(key);
  };
  const storeOf = (pluginId: string): PluginStore => {
    checkPluginId(pluginId);
    const entries = of(values, pluginId);
    const held = of(leases, pluginId);
    /** The live entry of `key`; an expired one is removed. */
    const live = (key: string, now: number): Entry | undefined => {
      const entry = entries.get(key);
      if (entry && expired(entry, now)) {
        entries.delete(key);
        return undefined;
      }
      return entry;
    };
    const store: PluginStore = {
      async get<Value = unknown>(key: string): Promise<Value | undefined> {
        checkOpen();
        checkKey(key);
        const entry = live(key, Date.now());
        return entry ? (JSON.parse(entry.json) as Value) : undefined;
      },
      async set(key: string, value: unknown, options?: PluginStoreSetOptions): Promise<void> {
        checkOpen();
        const entry = newEntry(key, value, options, Date.now());
        sweep(Date.now());
        entries.set(key, entry);
      },
      async add(key: string, value: unknown, options?: PluginStoreSetOptions): Promise<boolean> {
        checkOpen();
        const now = Date.now();
        const entry = newEntry(key, value, options, now);
        sweep(now);
        if (live(key, now)) return false;
        entries.set(key, entry);
        return true;
      },
      async delete(key: string): Promise<boolean> {
        checkOpen();
        checkKey(key);
        const was = live(key, Date.now()) !== undefined;
        entries.delete(key);
        return was;
      },
      async acquireLease(name: string, holder: string, ttlMs: number): Promise<boolean> {
        checkOpen();
        checkLease(name, holder);
        const until = expiresAt(ttlMs, Date.now(), "acquireLease's ttlMs");
        const now = Date.now();
        sweep(now);
        const lease = held.get(name);
        if (lease && lease.holder !== holder && lease.expiresAt > now) return false;
        held.set(name, { holder, expiresAt: until });
        return true;
      },
      async releaseLease(name: string, holder: string): Promise<boolean> {
        checkOpen();
        checkLease(name, holder);
        const lease = held.get(name);
        if (!lease || lease.holder !== holder) return false;
        held.delete(name);
        return lease.expiresAt > Date.now();
      },
    };
    return store;
  };
  return Object.assign(storeOf, { forgetKeysContaining });
}

/** The plugin stores of the in-memory storage, by plugin id, and what deleting a conversation does to them. */
export type MemoryPluginStores = ((pluginId: string) => PluginStore) & {
  /** Deletes every plugin's values whose key contains `text` (a conversation's id). */
  forgetKeysContaining(text: string): void;
};

/**
 * What `migrate()` and `schemaStatus()` of a store without tables (memory) do with plugins:
 * nothing, unless one has migrations, which such a store cannot run.
 */
export function refuseTables(options: MigrateOptions | undefined): void {
  for (const plugin of options?.plugins ?? []) {
    const names = Object.keys(plugin.schema?.migrations ?? {});
    if (names.length === 0) continue;
    throw new Error(
      `channelkit: the plugin "${plugin.id}" has migrations (${names.join(", ")}), but the memory storage has no tables: use ctx.storage.pluginStore(...) for its data, or a SQL storage (sqlite(), postgres()).`,
    );
  }
}

function expired(entry: Entry, now: number): boolean {
  return entry.expiresAt !== null && entry.expiresAt <= now;
}

/** The entry of a value, checked as every store checks it. */
function newEntry(key: string, value: unknown, options: PluginStoreSetOptions | undefined, now: number): Entry {
  checkKey(key);
  return { json: pluginValueJson(value), expiresAt: options?.ttlMs === undefined ? null : expiresAt(options.ttlMs, now, "ttlMs") };
}

/**
 * The JSON text of a plugin store's value; throws a TypeError for what JSON does not keep
 * (`undefined`, a function, a symbol), or cannot (a cycle, a BigInt). Every store checks
 * values with it.
 */
export function pluginValueJson(value: unknown): string {
  const json = JSON.stringify(value);
  if (json === undefined) throw new TypeError(`channelkit: a plugin store's value is JSON, and JSON has no ${typeof value} (delete the key instead)`);
  return json;
}

/** When a value or lease of `ttlMs` set at `now` expires; throws a TypeError unless `ttlMs` is a positive number. */
export function expiresAt(ttlMs: number, now: number, name: string): number {
  if (typeof ttlMs !== "number" || !Number.isFinite(ttlMs) || ttlMs <= 0) {
    throw new TypeError(`channelkit: ${name} is a number of milliseconds greater than 0, not ${String(ttlMs)}`);
  }
  // Past year 9999 an ISO 8601 time no longer sorts as text: as good as for ever.
  return Math.min(now + ttlMs, LATEST);
}

/** 9999-12-31T23:59:59.999Z. */
const LATEST = 253_402_300_799_999;

/** Throws a TypeError unless `id` may name a plugin's store: a non-empty string. */
export function checkPluginId(id: string): void {
  if (typeof id !== "string" || id === "") throw new TypeError(`channelkit: pluginStore() takes the plugin's id, not ${JSON.stringify(id) ?? String(id)}`);
}

/** Throws a TypeError unless `key` is a string that every database keeps (Postgres's text has no U+0000). */
export function checkKey(key: string, what = "key"): void {
  if (typeof key !== "string") throw new TypeError(`channelkit: a plugin store's ${what} is a string, not ${typeof key}`);
  if (key.includes("\u0000")) throw new TypeError(`channelkit: a plugin store's ${what} cannot hold U+0000`);
}

function checkLease(name: string, holder: string): void {
  checkKey(name, "lease name");
  checkKey(holder, "lease holder");
}
