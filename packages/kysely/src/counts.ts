import { memoryRateLimitStore, type RateLimitCount, type RateLimitRule, type RateLimitStore } from "@channelkit/core";

/** Counts whose window ended an hour ago are deleted every five minutes. */
const SWEEP_MS = 5 * 60_000;
const KEEP_MS = 3_600_000;

/** One key's counts of a batch: its name in the table, how many, and when a new window ends. */
export interface CountedKey {
  key: string;
  points: number;
  expire: number;
}

/** A key's count after the batch: `expire` in ms, or null for no window. */
export interface StoredCount {
  key: string;
  points: number | string;
  expire: number | string | null;
}

/** The counts asked for since the last batch, as one batch: each key once, with its points. */
export interface CountsBatch {
  keys: CountedKey[];
  now: number;
}

/** How a database stores counts: in the table of migration 0008, rate-limiter-flexible's layout. */
export interface CountsTable {
  /**
   * Adds each key's points of the batch that `take` hands over, starting a new window
   * (`expire`) for a key whose window ended before `now`, in one statement; answers every
   * key's count after it. Called when a batch starts; the table calls `take` when it runs
   * the statement (the counts asked for until then are in it), once.
   */
  add(take: () => CountsBatch): Promise<StoredCount[]>;
  /** Deletes the counts whose window ended before `before`. */
  sweep(before: number): Promise<unknown>;
  /** Releases what the table holds (a pool of its own), when the store closes. */
  release?(): Promise<void>;
}

interface Ask {
  name: string;
  rule: RateLimitRule;
  key: string;
  /** The key as stored ({@link storedKey}). */
  stored: string;
  resolve(count: RateLimitCount): void;
}

/**
 * Rate limits counted in a table of the database, shared by every instance on it, the
 * counts of concurrent requests batched: every `consume` asked for during one turn of the
 * event loop goes in one statement, where rate-limiter-flexible's limiters sent (and, on
 * SQLite, committed) one per count, and a webhook message or a widget chat counts two
 * (docs/benchmarks.md, "Rate limits"). A key counted n times in a batch adds n, and each
 * count gets its own place in the key's order, as if counted one by one. Keys are sent
 * sorted, so that two instances' batches lock common rows in one order and never deadlock.
 * Stored keys keep rate-limiter-flexible's layout (`ck:<name>:<requests>:<window>:<key>`),
 * so that instances of an earlier version count with these.
 *
 * As rate-limiter-flexible's limiters did: a client over its limit is refused from memory
 * until its window ends, with no statement; while the database cannot be reached, each
 * process counts in its memory rather than fail the request.
 */
export function batchedCounts(table: CountsTable): RateLimitStore {
  let queue: Ask[] = [];
  const blockedUntil = new Map<string, number>();
  const insurance = memoryRateLimitStore();
  const timer = setInterval(() => {
    const now = Date.now();
    table.sweep(now - KEEP_MS).catch(() => undefined);
    for (const [key, until] of blockedUntil) if (until <= now) blockedUntil.delete(key);
  }, SWEEP_MS);
  (timer as { unref?: () => void }).unref?.();

  /** The counts asked for until now, as one batch; the queue starts again. */
  function take(): { asks: Ask[]; byKey: Map<string, Ask[]>; batch: CountsBatch } {
    const asks = queue;
    queue = [];
    const byKey = new Map<string, Ask[]>();
    for (const ask of asks) {
      const key = ask.stored;
      const same = byKey.get(key);
      if (same) same.push(ask);
      else byKey.set(key, [ask]);
    }
    const now = Date.now();
    const keys = [...byKey.keys()].sort().map((key) => {
      const same = byKey.get(key) as Ask[];
      return { key, points: same.length, expire: now + (same[0] as Ask).rule.windowSeconds * 1000 };
    });
    return { asks, byKey, batch: { keys, now } };
  }

  /** Starts a batch: the table takes the counts asked for until its statement runs. */
  function start(): void {
    let taken: ReturnType<typeof take> | undefined;
    table
      .add(() => {
        taken = take();
        return taken.batch;
      })
      .then(
        (rows) => {
          const { byKey } = taken as ReturnType<typeof take>;
          const at = Date.now();
          for (const row of rows) {
            const asks = byKey.get(row.key) as Ask[];
            const total = Number(row.points);
            const expire = row.expire === null ? null : Number(row.expire);
            const resetMs = expire === null ? -1 : Math.max(expire - at, 0);
            for (let i = 0; i < asks.length; i++) {
              const ask = asks[i] as Ask;
              const consumed = total - asks.length + 1 + i;
              const allowed = consumed <= ask.rule.requests;
              if (!allowed && expire !== null) blockedUntil.set(row.key, expire);
              ask.resolve({ allowed, remaining: Math.max(ask.rule.requests - consumed, 0), resetMs });
            }
          }
        },
        () => {
          // A failure before the statement ran leaves the batch in the queue: it is counted here too.
          taken ??= take();
          for (const ask of taken.asks) void insurance.consume(ask.name, ask.rule, ask.key).then(ask.resolve);
        },
      );
  }

  return {
    consume(name, rule, key) {
      const stored = storedKey(name, rule, key);
      const until = blockedUntil.get(stored);
      if (until !== undefined) {
        const left = until - Date.now();
        if (left > 0) return Promise.resolve({ allowed: false, remaining: 0, resetMs: left });
      }
      return new Promise<RateLimitCount>((resolve) => {
        queue.push({ name, rule, key, stored, resolve });
        // The first count since the last batch starts the next one.
        if (queue.length === 1) start();
      });
    },
    async close() {
      clearInterval(timer);
      await table.release?.();
    },
  };
}

/** The key as rate-limiter-flexible stored it: `ck:`, the limit, then the client's key. */
function storedKey(name: string, rule: RateLimitRule, key: string): string {
  return `ck:${name}:${rule.requests}:${rule.windowSeconds}:${key}`;
}
