import type { PluginStore } from "@channelkit/core";
import type { Lock, QueueEntry, StateAdapter } from "chat";
import { currentClaims } from "./claims.js";

/** How long a list's read-modify-write may hold its lease. */
const LIST_LEASE_MS = 5_000;
/** How long an append waits for another instance's append to the same list. */
const LIST_WAIT_MS = 5_000;

/**
 * The Chat SDK's state on channelkit's storage: the plugin store every store implements
 * (SQLite, Postgres, D1, memory), shared by every instance, with the keys of one channel
 * under `scope`. No Redis is needed.
 *
 * The channels run the Chat SDK with the `concurrent` strategy: channelkit's own turns order
 * a thread's runs across instances, so the SDK's thread locks and queues are unused here.
 * Locks are still implemented on the store's leases; queues throw, the strategies that use
 * them dropping or skipping messages, which a channel must not.
 */
export function pluginStoreState(store: PluginStore, scope: string): StateAdapter {
  const key = (name: string) => `${scope}:${name}`;
  const lists = async <T>(name: string): Promise<T[]> => (await store.get<T[]>(key(`list:${name}`))) ?? [];
  return {
    async connect() {},
    async disconnect() {},

    async subscribe(threadId) {
      await store.set(key(`sub:${threadId}`), true);
    },
    async unsubscribe(threadId) {
      await store.delete(key(`sub:${threadId}`));
    },
    async isSubscribed(threadId) {
      return (await store.get(key(`sub:${threadId}`))) === true;
    },

    async get<T = unknown>(name: string) {
      return (await store.get<T>(key(`kv:${name}`))) ?? null;
    },
    async set(name, value, ttlMs) {
      await store.set(key(`kv:${name}`), value, ttlMs === undefined ? undefined : { ttlMs });
    },
    async setIfNotExists(name, value, ttlMs) {
      const claimed = await store.add(key(`kv:${name}`), value, ttlMs === undefined ? undefined : { ttlMs });
      // A delivery that fails gives its claims back (DeliveryClaims), or its retry would be dropped.
      if (claimed) currentClaims()?.claimed(key(`kv:${name}`), name);
      return claimed;
    },
    async delete(name) {
      await store.delete(key(`kv:${name}`));
    },

    async appendToList(name, value, options) {
      const lease = key(`list-lease:${name}`);
      const holder = crypto.randomUUID();
      const deadline = Date.now() + LIST_WAIT_MS;
      while (!(await store.acquireLease(lease, holder, LIST_LEASE_MS))) {
        if (Date.now() > deadline) throw new Error(`channelkit chat: the list ${name} stayed locked for ${LIST_WAIT_MS} ms`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      try {
        const values = [...(await lists<unknown>(name)), value];
        const kept = options?.maxLength === undefined ? values : values.slice(-options.maxLength);
        await store.set(key(`list:${name}`), kept, options?.ttlMs === undefined ? undefined : { ttlMs: options.ttlMs });
      } finally {
        await store.releaseLease(lease, holder);
      }
    },
    getList<T = unknown>(name: string) {
      return lists<T>(name);
    },

    async acquireLock(threadId, ttlMs): Promise<Lock | null> {
      const token = crypto.randomUUID();
      if (!(await store.acquireLease(key(`lock:${threadId}`), token, ttlMs))) return null;
      return { threadId, token, expiresAt: Date.now() + ttlMs };
    },
    async releaseLock(lock) {
      await store.releaseLease(key(`lock:${lock.threadId}`), lock.token);
    },
    extendLock(lock, ttlMs) {
      return store.acquireLease(key(`lock:${lock.threadId}`), lock.token, ttlMs);
    },
    async forceReleaseLock() {
      throw unused("forceReleaseLock");
    },
    async enqueue(_threadId: string, _entry: QueueEntry) {
      throw unused("enqueue");
    },
    async dequeue() {
      throw unused("dequeue");
    },
    async queueDepth() {
      return 0;
    },
  };
}

function unused(method: string): Error {
  return new Error(
    `channelkit chat: the Chat SDK's ${method} is not used by channelkit's channels, which run the "concurrent" strategy and take turns in channelkit`,
  );
}
