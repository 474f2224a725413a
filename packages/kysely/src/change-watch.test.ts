import { describe, expect, it } from "vitest";
import { ChangeWatch, WatchedCache, writesWatchedTables } from "./change-watch.js";

/*
 * The cache's own rules, on a watch whose version the test moves (on SQLite it is
 * `PRAGMA data_version`: storage.test.ts and statements.sqlite.test.ts test it there).
 */

/** A watch on a version the test sets, and a lookup that counts its reads. */
function setup() {
  const database = { version: 1 as number | undefined };
  const watch = new ChangeWatch(() => database.version);
  const cache = new WatchedCache<{ id: string; read: number }>(watch);
  const reads: string[] = [];
  const rows = new Map<string, number>();
  const lookup = async (id: string) => {
    reads.push(id);
    if (id.startsWith("unknown")) return null;
    const read = (rows.get(id) ?? 0) + 1;
    rows.set(id, read);
    return { id, read };
  };
  return { database, watch, cache, reads, lookup };
}

describe("WatchedCache", () => {
  it("answers a record read once from memory until the version moves or this connection writes", async () => {
    const { database, watch, cache, reads, lookup } = setup();
    const first = await cache.find("a", lookup);
    expect(await cache.find("a", lookup)).toBe(first);
    expect(reads).toEqual(["a"]);

    database.version = 2;
    expect((await cache.find("a", lookup))?.read).toBe(2);
    watch.changed();
    expect((await cache.find("a", lookup))?.read).toBe(3);
    expect(reads).toEqual(["a", "a", "a"]);
  });

  it("never keeps an unknown id: guessing keys fills nothing", async () => {
    const { cache, reads, lookup } = setup();
    expect(await cache.find("unknown-1", lookup)).toBeNull();
    expect(await cache.find("unknown-1", lookup)).toBeNull();
    expect(reads).toEqual(["unknown-1", "unknown-1"]);
  });

  it("reads every time while the version cannot be told (a transaction holds the connection)", async () => {
    const { database, cache, reads, lookup } = setup();
    database.version = undefined;
    await cache.find("a", lookup);
    await cache.find("a", lookup);
    expect(reads).toEqual(["a", "a"]);
  });

  it("does not keep what a lookup read before a write of this connection it waited across", async () => {
    const { watch, cache, reads, lookup } = setup();
    // The first lookup waits (as one behind a transaction of Kysely's driver does)...
    let release: () => void = () => undefined;
    const waited = new Promise<void>((resolve) => {
      release = resolve;
    });
    const stale = cache.find("a", async (id) => {
      await waited;
      return { id, read: 0 };
    });
    // ...while this connection writes, and another lookup fills the cache under the new stamp.
    watch.changed();
    await cache.find("b", lookup);
    release();
    expect((await stale)?.read).toBe(0);
    // What the first one read is not kept: the next lookup of it reads again.
    expect((await cache.find("a", lookup))?.read).toBe(1);
    expect(reads).toEqual(["b", "a"]);
  });

  it("keeps at most 1,024 records, dropping the one kept first", async () => {
    const { cache, reads, lookup } = setup();
    for (let i = 0; i <= 1024; i++) await cache.find(`key-${i}`, lookup);
    reads.length = 0;
    await cache.find("key-1024", lookup);
    await cache.find("key-1", lookup);
    expect(reads).toEqual([]);
    await cache.find("key-0", lookup);
    expect(reads).toEqual(["key-0"]);
  });
});

describe("ChangeWatch", () => {
  it("stops reading the version while another connection commits before each read, then tries again", () => {
    let version = 0;
    let reads = 0;
    const busy = new ChangeWatch(() => {
      reads++;
      return ++version;
    });
    // Three reads in a row find it moved (another instance under load)...
    expect([busy.stamp(), busy.stamp(), busy.stamp()]).toEqual([1, 2, 3]);
    // ...so the next hundred lookups read the rows without it.
    for (let i = 0; i < 100; i++) expect(busy.stamp()).toBeUndefined();
    expect(reads).toBe(3);
    expect(busy.stamp()).toBe(4);
    expect(reads).toBe(4);
  });

  it("reads it before every lookup while it stays put or moves now and then", () => {
    let version = 0;
    let reads = 0;
    const quiet = new ChangeWatch(() => {
      reads++;
      return version;
    });
    for (let i = 0; i < 300; i++) {
      if (i % 3 === 0) version++;
      expect(quiet.stamp()).toBeTypeOf("number");
    }
    expect(reads).toBe(300);
  });
});

describe("writesWatchedTables", () => {
  it("names the tables a key lookup reads, and the tenants whose deletion cascades into them", () => {
    expect(writesWatchedTables('update "channels" set "state" = ? where "id" = ?')).toBe(true);
    expect(writesWatchedTables('update "api_keys" set "revoked_at" = ?')).toBe(true);
    expect(writesWatchedTables("DELETE FROM tenants WHERE id = ?")).toBe(true);
    expect(writesWatchedTables('insert into "conversations" ("id", "channel_id") values (?, ?)')).toBe(false);
    expect(writesWatchedTables('insert into "messages" ("conversation_id") values (?)')).toBe(false);
  });
});
