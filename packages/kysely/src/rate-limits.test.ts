/**
 * The rate limits' stores on the databases: counts shared by every storage opened on one
 * database (as instances share it), and requests still counted, in memory, while the
 * database cannot be reached.
 */
import { randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RateLimitStore } from "@channelkit/core";
import { createTestDatabase, describeWithPostgres } from "@channelkit/testkit";
import { afterAll, describe, expect, it } from "vitest";
import BetterSqlite3 from "better-sqlite3";
import { bodyOf, type GroupCommit, groupCommit } from "./group-commit.js";
import pg from "pg";
import { countersPool, postgres } from "./postgres.js";
import { postgresRateLimits, sqliteRateLimits } from "./rate-limits.js";
import { sqlite } from "./sqlite.js";
import type { KyselyStorage } from "./storage.js";

const RULE = { requests: 5, windowSeconds: 60 };

/** Consumes `count` requests of one key, alternating between the stores, and returns how many were allowed. */
async function allowedOf(stores: RateLimitStore[], count: number, key: string): Promise<number> {
  const answers = await Promise.all(Array.from({ length: count }, (_, i) => (stores[i % stores.length] as RateLimitStore).consume("test", RULE, key)));
  return answers.filter((answer) => answer.allowed).length;
}

function sharedCounts(open: () => Promise<[KyselyStorage, KyselyStorage]>) {
  it("two storages on one database count together: exactly the limit is allowed, across both", async () => {
    const [a, b] = await open();
    try {
      const stores = [a.rateLimits, b.rateLimits] as RateLimitStore[];
      expect(await allowedOf(stores, 12, `k-${randomUUID()}`)).toBe(RULE.requests);
      // Another key has its own count.
      expect(await allowedOf(stores, 2, `k-${randomUUID()}`)).toBe(2);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
}

describe("rate limits on SQLite", () => {
  const files: string[] = [];
  afterAll(() => Promise.all(files.flatMap((file) => ["", "-wal", "-shm"].map((suffix) => rm(file + suffix, { force: true })))));
  sharedCounts(async () => {
    const file = join(tmpdir(), `channelkit-limits-${randomUUID()}.db`);
    files.push(file);
    const a = sqlite(file);
    await a.migrate();
    return [a, sqlite(file)];
  });
});

/** The storage's group commit on `database` alone (no Kysely beside it), telling each commit. */
function groupCommitOn(database: BetterSqlite3.Database, onCommit: () => void): GroupCommit {
  return groupCommit(
    {
      run: (sql) => {
        if (sql === "COMMIT") onCommit();
        database.prepare(sql).run();
      },
      inTransaction: () => database.inTransaction,
      rows: () => [],
      tryBegin: () => {
        database.prepare("BEGIN IMMEDIATE").run();
        return true;
      },
    },
    () => Promise.reject(new Error("not expected")),
  );
}

describe('rate limits on SQLite, in the storage\'s group commit (docs/benchmarks.md, "Rate limits")', () => {
  it("counts the requests of one turn in one statement of the storage's group commit, prepared once", async () => {
    const file = join(tmpdir(), `channelkit-limits-${randomUUID()}.db`);
    const database = new BetterSqlite3(file);
    try {
      const storage = sqlite(file);
      await storage.migrate();
      await storage.close();
      const prepared: string[] = [];
      const prepare = database.prepare.bind(database);
      database.prepare = ((sql: string) => {
        prepared.push(sql);
        return prepare(sql);
      }) as typeof database.prepare;
      const commits: number[] = [];
      const limits = sqliteRateLimits(
        database,
        groupCommitOn(database, () => commits.push(1)),
      );
      const answers = await Promise.all(Array.from({ length: 8 }, () => limits.consume("test", RULE, "one client")));
      expect(answers.filter((answer) => answer.allowed)).toHaveLength(RULE.requests);
      // Eight counts: one statement in one commit, prepared once.
      expect(commits).toHaveLength(1);
      const upserts = prepared.filter((sql) => sql.includes("insert into rate_limit_counters"));
      expect(upserts).toHaveLength(1);
      await limits.close?.();
    } finally {
      database.close();
      await Promise.all(["", "-wal", "-shm"].map((suffix) => rm(file + suffix, { force: true })));
    }
  });
});

describe("rate limits on SQLite, in the runs' turn (docs/benchmarks.md, \"Counts taken in the runs' turn\")", () => {
  it("counts asked for in a turn go in that turn's batch of transactions: one commit with the runs, none a turn later", async () => {
    const database = new BetterSqlite3(":memory:");
    try {
      database.exec("create table rate_limit_counters (key varchar(255) primary key, points integer not null default 0, expire bigint)");
      const commits: number[] = [];
      const transaction = groupCommitOn(database, () => commits.push(1));
      const limits = sqliteRateLimits(database, transaction);
      const run = (name: string) => transaction(() => bodyOf(() => name));
      const count = (key: string) => limits.consume("test", RULE, key);
      // A request's two counts and another request's run, asked in one turn, as a webhook
      // message's are: one batch, one commit (the run alone at once, then the counts a turn
      // later in a transaction of their own, before the change).
      const [first, second, ran] = await Promise.all([count("client"), count("address"), run("claim")]);
      expect([first.allowed, second.allowed, ran]).toEqual([true, true, "claim"]);
      expect(commits).toHaveLength(1);
      // The next turn: the counts and two runs, all in one commit.
      await Promise.all([run("outcome"), count("client"), run("claim 2")]);
      expect(commits).toHaveLength(2);
      await limits.close?.();
    } finally {
      database.close();
    }
  });

  it("counts whose batch failed before its statement ran are counted in memory, none lost", async () => {
    const database = new BetterSqlite3(":memory:");
    try {
      const failing: GroupCommit = () => Promise.reject(new Error("database is locked"));
      const limits = sqliteRateLimits(database, failing);
      const answers = await Promise.all(Array.from({ length: 7 }, () => limits.consume("test", RULE, "one client")));
      expect(answers.map((answer) => answer.allowed)).toEqual([true, true, true, true, true, false, false]);
      await limits.close?.();
    } finally {
      database.close();
    }
  });
});

describeWithPostgres("rate limits on Postgres", (serverUrl) => {
  const drops: (() => Promise<void>)[] = [];
  afterAll(() => Promise.all(drops.map((drop) => drop())));
  sharedCounts(async () => {
    const database = await createTestDatabase(serverUrl);
    drops.push(() => database.drop());
    const a = postgres(database.url);
    await a.migrate();
    return [a, postgres(database.url)];
  });

  it('counts on sessions of their own that commit asynchronously, ended with the storage (docs/benchmarks.md, "Rate limits")', async () => {
    const database = await createTestDatabase(serverUrl);
    drops.push(() => database.drop());
    const counters = countersPool({ connectionString: database.url });
    try {
      expect((await counters.query("show synchronous_commit")).rows[0]).toEqual({ synchronous_commit: "off" });
    } finally {
      await counters.end();
    }
    const storage = postgres(database.url);
    await storage.migrate();
    expect(await allowedOf([storage.rateLimits as RateLimitStore], 8, `k-${randomUUID()}`)).toBe(RULE.requests);
    const named = async () => {
      const admin = new pg.Client({ connectionString: database.url });
      await admin.connect();
      try {
        const { rows } = await admin.query(
          "select count(*)::int as n from pg_stat_activity where application_name = 'channelkit rate limits' and datname = current_database()",
        );
        return rows[0].n as number;
      } finally {
        await admin.end();
      }
    };
    expect(await named()).toBeGreaterThan(0);
    await storage.close();
    await storage.close();
    // The server lets a session go a moment after its client said goodbye.
    for (let waited = 0; (await named()) > 0 && waited < 2000; waited += 50) await new Promise((done) => setTimeout(done, 50));
    expect(await named()).toBe(0);
  });

  it('counts the requests of one turn of the event loop in one statement, each in its place (docs/benchmarks.md, "Rate limits")', async () => {
    const database = await createTestDatabase(serverUrl);
    drops.push(() => database.drop());
    const storage = postgres(database.url);
    await storage.migrate();
    await storage.close();
    const pool = new pg.Pool({ connectionString: database.url, max: 2 });
    const sent: string[] = [];
    const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<unknown>;
    (pool as unknown as { query: typeof query }).query = (...args: unknown[]) => {
      sent.push(String(args[0]));
      return query(...args);
    };
    const limits = postgresRateLimits(pool, true);
    const [a, b] = [`a-${randomUUID()}`, `b-${randomUUID()}`];
    const answers = await Promise.all(Array.from({ length: 16 }, (_, i) => limits.consume("test", RULE, i % 2 === 0 ? a : b)));
    expect(sent.filter((text) => text.includes("rate_limit_counters"))).toHaveLength(1);
    // Two keys, eight counts each: the first five of each allowed, in order, the rest refused.
    expect(answers.filter((_, i) => i % 2 === 0).map((answer) => answer.allowed)).toEqual([true, true, true, true, true, false, false, false]);
    expect(answers.filter((_, i) => i % 2 === 0).map((answer) => answer.remaining)).toEqual([4, 3, 2, 1, 0, 0, 0, 0]);
    // A key over its limit is refused from memory, with no statement, until its window ends.
    expect((await limits.consume("test", RULE, a)).allowed).toBe(false);
    expect(sent.filter((text) => text.includes("rate_limit_counters"))).toHaveLength(1);
    await limits.close?.();
  });

  it("while the database cannot be reached, each process counts in its memory instead of failing the request", async () => {
    // Nothing listens on port 1: every query fails at once.
    const storage = postgres("postgres://postgres@127.0.0.1:1/none", { connectionTimeoutMs: 500 });
    try {
      expect(await allowedOf([storage.rateLimits as RateLimitStore], 8, "k")).toBe(RULE.requests);
    } finally {
      await storage.close();
    }
  });
});
