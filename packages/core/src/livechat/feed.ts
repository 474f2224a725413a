import type { LiveFeed } from "../storage/types.js";

/** Largest message a feed carries, in bytes of UTF-8: below Postgres' 8000-byte `NOTIFY` payload, with room for the topic. */
export const MAX_FEED_MESSAGE_BYTES = 4000;

/**
 * A {@link LiveFeed} within one process: what the service uses when its storage offers none
 * (the in-memory storage). Listeners are called on a later microtask, as a feed between
 * processes would call them, so that a publisher never runs its subscribers' code inline.
 */
export function inProcessFeed(): LiveFeed {
  const topics = new Map<string, Set<(message: string) => void>>();
  return {
    async publish(topic, message) {
      checkFeedMessage(message);
      const listeners = topics.get(topic);
      if (!listeners) return;
      for (const listener of [...listeners]) queueMicrotask(() => listener(message));
    },
    async subscribe(topic, listener) {
      let listeners = topics.get(topic);
      if (!listeners) {
        listeners = new Set();
        topics.set(topic, listeners);
      }
      const set = listeners;
      const own = (message: string) => listener(message);
      set.add(own);
      return () => {
        set.delete(own);
        if (set.size === 0 && topics.get(topic) === set) topics.delete(topic);
      };
    },
    async close() {
      topics.clear();
    },
  };
}

/** Refuses a message larger than a feed carries: a feed message is a doorbell, the store holds the content. */
export function checkFeedMessage(message: string): void {
  if (new TextEncoder().encode(message).length > MAX_FEED_MESSAGE_BYTES) {
    throw new Error(`channelkit: a live feed message is at most ${MAX_FEED_MESSAGE_BYTES} bytes (publish ids, read the content from the store)`);
  }
}
