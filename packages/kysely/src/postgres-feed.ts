import type { LiveFeed } from "@channelkit/core";
import { checkFeedMessage } from "@channelkit/core";
import type pg from "pg";
import { pgDriver } from "./drivers.js";
import { FEED_CHANNEL } from "./feed-channel.js";

export { FEED_CHANNEL };
/** Longest wait between two attempts to listen again after the connection was lost, in ms. */
const MAX_RECONNECT_MS = 5000;

/**
 * The live feed of instances sharing a Postgres database, on `LISTEN/NOTIFY`: a publish is a
 * `pg_notify` through the pool; one connection of its own per storage, opened by the first
 * subscribe, listens and hands each notification to this process's subscribers of its
 * topic. When that connection is lost it listens again, with backoff: what was published
 * meanwhile is not delivered (subscribers read the store, which stays the truth).
 */
export function postgresFeed(config: pg.ClientConfig, notify: (payload: string) => Promise<unknown>): LiveFeed {
  const topics = new Map<string, Set<(message: string) => void>>();
  let client: pg.Client | null = null;
  let connecting: Promise<pg.Client> | null = null;
  let retry: ReturnType<typeof setTimeout> | undefined;
  let delay = 100;
  let closed = false;

  function onNotification(notification: pg.Notification): void {
    if (notification.channel !== FEED_CHANNEL || !notification.payload) return;
    const split = notification.payload.indexOf("\n");
    if (split < 0) return;
    const listeners = topics.get(notification.payload.slice(0, split));
    if (!listeners) return;
    const message = notification.payload.slice(split + 1);
    for (const listener of [...listeners]) listener(message);
  }

  async function connect(): Promise<pg.Client> {
    const fresh = new (pgDriver().Client)(config);
    // A lost connection emits 'error'; unhandled, that would crash the process.
    fresh.on("error", () => undefined);
    fresh.on("notification", onNotification);
    fresh.on("end", () => {
      if (client !== fresh) return;
      client = null;
      if (!closed) scheduleReconnect();
    });
    await fresh.connect();
    try {
      await fresh.query(`LISTEN ${FEED_CHANNEL}`);
    } catch (error) {
      await fresh.end().catch(() => undefined);
      throw error;
    }
    if (closed) {
      await fresh.end().catch(() => undefined);
      throw new Error("channelkit: the live feed is closed");
    }
    client = fresh;
    delay = 100;
    return fresh;
  }

  function listening(): Promise<pg.Client> {
    if (client) return Promise.resolve(client);
    connecting ??= connect().finally(() => {
      connecting = null;
    });
    return connecting;
  }

  function scheduleReconnect(): void {
    clearTimeout(retry);
    retry = setTimeout(() => {
      listening().catch(() => {
        delay = Math.min(MAX_RECONNECT_MS, delay * 2);
        if (!closed) scheduleReconnect();
      });
    }, delay);
    (retry as { unref?: () => void }).unref?.();
  }

  return {
    async publish(topic, message) {
      checkFeedMessage(message);
      await notify(`${topic}\n${message}`);
    },
    async subscribe(topic, listener) {
      if (closed) throw new Error("channelkit: the live feed is closed");
      await listening();
      let listeners = topics.get(topic);
      if (!listeners) {
        listeners = new Set();
        topics.set(topic, listeners);
      }
      const set = listeners;
      const wrapped = (message: string) => listener(message);
      set.add(wrapped);
      return () => {
        set.delete(wrapped);
        if (set.size === 0 && topics.get(topic) === set) topics.delete(topic);
      };
    },
    async close() {
      closed = true;
      clearTimeout(retry);
      topics.clear();
      const open = client ?? (await connecting?.catch(() => null)) ?? null;
      client = null;
      await open?.end().catch(() => undefined);
    },
  };
}
