import { memoryRateLimitStore, type RateLimitCount, type RateLimitRule, type RateLimitStore } from "@channelkit/core";
import type pg from "pg";

/**
 * All the counts asked for in one turn of the event loop, in one statement: a key counted n
 * times adds n. The table and the key layout are rate-limiter-flexible's (migration 0008,
 * `ck:<name>:<requests>:<window>:<key>`), so that instances of an earlier version count
 * with these. Keys are sent sorted: two instances' batches then lock common rows in the same
 * order and never deadlock.
 */
const UPSERT = `insert into rate_limit_counters (key, points, expire)
select key, points, expire from unnest($1::varchar[], $2::int[], $3::bigint[]) as t(key, points, expire)
on conflict (key) do update set
  points = case when rate_limit_counters.expire is null or rate_limit_counters.expire > $4 then rate_limit_counters.points + excluded.points else excluded.points end,
  expire = case when rate_limit_counters.expire is null or rate_limit_counters.expire > $4 then rate_limit_counters.expire else excluded.expire end
returning key, points, expire`;
/** Counts whose window ended an hour ago are deleted every five minutes. */
const SWEEP = "delete from rate_limit_counters where expire < $1";
const SWEEP_MS = 5 * 60_000;

interface Ask {
  name: string;
  rule: RateLimitRule;
  key: string;
  resolve(count: RateLimitCount): void;
}

/** Runs `flush` after the I/O callbacks of this turn of the event loop. */
const afterIo = (flush: () => void) => setImmediate(flush);

/**
 * Rate limits counted in Postgres, shared by every instance on the database, the counts of
 * concurrent requests batched: every `consume` asked for during one turn of the event loop
 * goes in one statement, one round trip for all of them, where rate-limiter-flexible's
 * limiter sent one per count and a webhook message counts two (docs/benchmarks.md, "Rate
 * limits"). Each count gets its own place in its key's order, as if counted one by one.
 *
 * As rate-limiter-flexible's limiter did: a client over its limit is refused from memory
 * until its window ends, with no statement; while the database cannot be reached, each
 * process counts in its memory rather than fail the request.
 */
export function postgresCounts(pool: pg.Pool, release?: () => Promise<void>): RateLimitStore {
  let queue: Ask[] = [];
  const blockedUntil = new Map<string, number>();
  const insurance = memoryRateLimitStore();
  const timer = setInterval(() => {
    pool.query(SWEEP, [Date.now() - 3_600_000]).catch(() => undefined);
    const now = Date.now();
    for (const [key, until] of blockedUntil) if (until <= now) blockedUntil.delete(key);
  }, SWEEP_MS);
  timer.unref?.();

  function flush(): void {
    const batch = queue;
    queue = [];
    const byKey = new Map<string, Ask[]>();
    for (const ask of batch) {
      const key = storedKey(ask);
      const asks = byKey.get(key);
      if (asks) asks.push(ask);
      else byKey.set(key, [ask]);
    }
    const keys = [...byKey.keys()].sort();
    const now = Date.now();
    const points = keys.map((key) => (byKey.get(key) as Ask[]).length);
    const expires = keys.map((key) => now + ((byKey.get(key) as Ask[])[0] as Ask).rule.windowSeconds * 1000);
    pool.query<{ key: string; points: number; expire: string | null }>(UPSERT, [keys, points, expires, now]).then(
      ({ rows }) => {
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
        for (const ask of batch) void insurance.consume(ask.name, ask.rule, ask.key).then(ask.resolve);
      },
    );
  }

  return {
    consume(name, rule, key) {
      const until = blockedUntil.get(storedKey({ name, rule, key }));
      if (until !== undefined) {
        const left = until - Date.now();
        if (left > 0) return Promise.resolve({ allowed: false, remaining: 0, resetMs: left });
      }
      return new Promise<RateLimitCount>((resolve) => {
        if (queue.length === 0) afterIo(flush);
        queue.push({ name, rule, key, resolve });
      });
    },
    async close() {
      clearInterval(timer);
      await release?.();
    },
  };
}

/** The key as rate-limiter-flexible stores it: its prefix (`ck:` and the limit), then the client's key. */
function storedKey({ name, rule, key }: Pick<Ask, "name" | "rule" | "key">): string {
  return `ck:${name}:${rule.requests}:${rule.windowSeconds}:${key}`;
}
