import type { LiveFeed } from "@channelkit/core";
import { checkFeedMessage } from "@channelkit/core";
import type BetterSqlite3 from "better-sqlite3";

/** How often a process with subscribers looks for what other processes published, in ms. */
const POLL_MS = 100;
/** Rows older than this are deleted: a subscriber that was away reads the store, not the feed. */
const KEEP_MS = 60_000;
/** Deletions run at most this often, from a publish. */
const PRUNE_EVERY_MS = 10_000;

/**
 * The live feed of processes sharing one SQLite file: a publish is a row of `live_feed`
 * (migration `0006_live_chat`), and each process with subscribers reads the new rows every
 * 100 ms, with no timer at all while nobody listens. A process's own publishes reach its own
 * subscribers at once, not at the next poll. Readers never wait for the writer (WAL mode).
 */
export function sqliteFeed(database: BetterSqlite3.Database): LiveFeed {
  const topics = new Map<string, Set<(message: string) => void>>();
  /** Ids this process published since the last poll: delivered already, skipped when read back. */
  const own = new Set<number>();
  let lastId = 0;
  let timer: ReturnType<typeof setInterval> | undefined;
  let lastPrune = 0;
  let closed = false;

  function deliver(topic: string, message: string): void {
    const listeners = topics.get(topic);
    if (!listeners) return;
    for (const listener of [...listeners]) queueMicrotask(() => listener(message));
  }

  function poll(): void {
    if (closed || !database.open) return;
    const rows = database.prepare("SELECT id, topic, message FROM live_feed WHERE id > ? ORDER BY id LIMIT 1000").all(lastId) as {
      id: number;
      topic: string;
      message: string;
    }[];
    for (const row of rows) {
      lastId = row.id;
      if (own.delete(row.id)) continue;
      deliver(row.topic, row.message);
    }
  }

  function start(): void {
    if (timer !== undefined) return;
    // From now on: what was published before the first subscriber is not replayed.
    const row = database.prepare("SELECT max(id) AS id FROM live_feed").get() as { id: number | null };
    lastId = row.id ?? 0;
    own.clear();
    timer = setInterval(() => {
      try {
        poll();
      } catch {
        // A busy or closing database: the next poll reads what this one missed.
      }
    }, POLL_MS);
    (timer as { unref?: () => void }).unref?.();
  }

  function stop(): void {
    clearInterval(timer);
    timer = undefined;
    own.clear();
  }

  return {
    async publish(topic, message) {
      checkFeedMessage(message);
      const now = Date.now();
      const { lastInsertRowid } = database
        .prepare("INSERT INTO live_feed (topic, message, created_at) VALUES (?, ?, ?)")
        .run(topic, message, new Date(now).toISOString());
      if (timer !== undefined) own.add(Number(lastInsertRowid));
      deliver(topic, message);
      if (now - lastPrune > PRUNE_EVERY_MS) {
        lastPrune = now;
        database.prepare("DELETE FROM live_feed WHERE created_at < ?").run(new Date(now - KEEP_MS).toISOString());
      }
    },
    async subscribe(topic, listener) {
      if (closed) throw new Error("channelkit: the live feed is closed");
      start();
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
        if (topics.size === 0) stop();
      };
    },
    async close() {
      closed = true;
      topics.clear();
      stop();
    },
  };
}
