import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import BetterSqlite3 from "better-sqlite3";
import { CompiledQuery } from "kysely";
import { afterEach, describe, expect, it } from "vitest";
import { rowsOf, type TransactionBody } from "./executor.js";
import { beginWithoutWaiting, type GroupCommitConnection, groupCommit, isBusy } from "./group-commit.js";

const dirs: string[] = [];
const open: BetterSqlite3.Database[] = [];
afterEach(() => {
  for (const database of open.splice(0)) database.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A WAL database file and a connection to it, as `sqlite()` opens one. */
function connect(path?: string, busyTimeoutMs = 5000): { path: string; database: BetterSqlite3.Database } {
  let file = path;
  if (!file) {
    const dir = mkdtempSync(join(tmpdir(), "channelkit-group-"));
    dirs.push(dir);
    file = join(dir, "test.db");
  }
  const database = new BetterSqlite3(file);
  open.push(database);
  database.pragma(`busy_timeout = ${busyTimeoutMs}`);
  database.pragma("journal_mode = WAL");
  database.exec("create table if not exists t (id integer primary key, name text not null)");
  return { path: file, database };
}

/** The connection as the SQLite executor gives it, counting the statements it runs (the lock's pragmas aside). */
function connection(database: BetterSqlite3.Database, log: string[], busyTimeoutMs = 5000): GroupCommitConnection {
  const rows = (query: CompiledQuery) => {
    const statement = database.prepare(query.sql);
    if (statement.reader) return statement.all(...query.parameters);
    statement.run(...query.parameters);
    return [];
  };
  const begin = beginWithoutWaiting((sql) => void rows(CompiledQuery.raw(sql)), busyTimeoutMs);
  return {
    run(sql) {
      log.push(sql);
      database.prepare(sql).run();
    },
    inTransaction: () => database.inTransaction,
    rows,
    tryBegin() {
      log.push("BEGIN IMMEDIATE");
      return begin();
    },
  };
}

const insert = (id: number, name: string) => CompiledQuery.raw("insert into t (id, name) values (?, ?)", [id, name]);
const names = (database: BetterSqlite3.Database) => (database.prepare("select name from t order by id").all() as { name: string }[]).map((row) => row.name);

function* inserting(id: number, name: string): TransactionBody<number> {
  yield* rowsOf(insert(id, name));
  const [row] = yield* rowsOf(CompiledQuery.raw("select count(*) as n from t", []) as CompiledQuery<{ n: number }>);
  return (row as { n: number }).n;
}

const noElsewhere = () => Promise.reject(new Error("not expected"));

/**
 * Makes the group commit see others active, as under load: a turn of three transactions
 * (rows 1 to 3), the first committed at once and the two others in one batch.
 */
async function busy(transaction: ReturnType<typeof groupCommit>): Promise<void> {
  await Promise.all([1, 2, 3].map((id) => transaction(() => inserting(id, `run ${id}`))));
}

describe("groupCommit", () => {
  it("commits the transactions asked for in one turn of the event loop once, each seeing the ones before it, when others are active", async () => {
    const { database } = connect();
    const log: string[] = [];
    const transaction = groupCommit(connection(database, log), noElsewhere);
    await busy(transaction);
    log.length = 0;
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => transaction(() => inserting(10 + i, `run ${10 + i}`))));
    expect(results).toEqual([4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
    expect(log.filter((sql) => sql === "COMMIT")).toHaveLength(1);
    expect(log[0]).toBe("BEGIN IMMEDIATE");
    // No savepoint per body (docs/benchmarks.md, "Group commit"): a failure runs the batch again instead.
    expect(log.some((sql) => sql.startsWith("SAVEPOINT"))).toBe(false);
    expect(names(database)).toHaveLength(13);
  });

  it("commits a lone transaction at once, inside the call, when the process is idle", async () => {
    const { path, database } = connect();
    const other = connect(path).database;
    const log: string[] = [];
    const transaction = groupCommit(connection(database, log), noElsewhere);
    const order: string[] = [];
    // Queued before the transaction is asked for: the check phase, where a batch would run.
    const checkPhase = new Promise<void>((done) =>
      setImmediate(() => {
        order.push("check phase");
        done();
      }),
    );
    const stored = transaction(() => inserting(1, "a")).then((count) => {
      order.push("settled");
      return count;
    });
    // Committed before the call returned (docs/benchmarks.md, "Group commit"): another
    // process sees the row, and the promise settles before the check phase.
    expect(log).toEqual(["BEGIN IMMEDIATE", "COMMIT"]);
    expect(names(other)).toEqual(["a"]);
    expect(database.inTransaction).toBe(false);
    expect(await stored).toBe(1);
    await checkPhase;
    expect(order).toEqual(["settled", "check phase"]);
  });

  it("lets the turn's first transaction commit at once and batches the ones after it, then batches every one while others are active", async () => {
    const { database } = connect();
    const log: string[] = [];
    const transaction = groupCommit(connection(database, log), noElsewhere);
    const first = await Promise.all(Array.from({ length: 5 }, (_, i) => transaction(() => inserting(i, `run ${i}`))));
    expect(first).toEqual([1, 2, 3, 4, 5]);
    // The first alone, at once; the four after it in one batch at the check phase.
    expect(log.filter((sql) => sql === "COMMIT")).toHaveLength(2);
    log.length = 0;
    // The last batch held four: a lone transaction now waits for the check phase.
    let settled = false;
    const waiting = transaction(() => inserting(10, "waits")).then(() => {
      settled = true;
    });
    expect(log).toEqual([]);
    await Promise.resolve();
    expect(settled).toBe(false);
    await waiting;
    expect(log.filter((sql) => sql === "COMMIT")).toHaveLength(1);
    log.length = 0;
    // Its batch held one: the next one commits at once again.
    const next = transaction(() => inserting(11, "at once"));
    expect(log.filter((sql) => sql === "COMMIT")).toHaveLength(1);
    expect(await next).toBe(7);
  });

  it("rolls back a body that throws alone: the others of its batch are stored", async () => {
    const { database } = connect();
    const transaction = groupCommit(connection(database, []), noElsewhere);
    const failing = function* (): TransactionBody<never> {
      yield* rowsOf(insert(2, "half-written"));
      throw new Error("the flow's outcome could not be stored");
    };
    const settled = await Promise.allSettled([transaction(() => inserting(1, "a")), transaction(failing), transaction(() => inserting(3, "c"))]);
    expect(settled.map((result) => result.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    // The others ran again without it: the third saw two rows, not three.
    expect(settled.map((result) => (result.status === "fulfilled" ? result.value : "failed"))).toEqual([1, "failed", 2]);
    expect(names(database)).toEqual(["a", "c"]);
    // A body alone in its batch is rolled back too.
    await expect(transaction(failing)).rejects.toThrow("could not be stored");
    expect(names(database)).toEqual(["a", "c"]);
    expect(database.inTransaction).toBe(false);
  });

  it("runs the others again when a body's error ends the transaction itself (SQLite rolls back on some I/O errors)", async () => {
    const { database } = connect();
    const transaction = groupCommit(connection(database, []), noElsewhere);
    const ending = function* (): TransactionBody<never> {
      yield* rowsOf(insert(2, "lost"));
      yield* rowsOf(CompiledQuery.raw("ROLLBACK", []));
      throw Object.assign(new Error("database or disk is full"), { code: "SQLITE_FULL" });
    };
    const settled = await Promise.allSettled([transaction(() => inserting(1, "a")), transaction(ending), transaction(() => inserting(3, "c"))]);
    expect(settled.map((result) => result.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect(names(database)).toEqual(["a", "c"]);
  });

  it("settles nothing before the commit, and another connection (another process) sees a body's rows once its promise settles", async () => {
    const { path, database } = connect();
    const other = connect(path).database;
    const transaction = groupCommit(connection(database, []), noElsewhere);
    await busy(transaction);
    let settled = false;
    const stored = transaction(() => inserting(4, "a")).then((count) => {
      settled = true;
      expect(names(other)).toContain("a");
      return count;
    });
    // Asked for while others are active, not yet run: the batch runs after this turn's I/O.
    expect(names(other)).not.toContain("a");
    await Promise.resolve();
    expect(settled).toBe(false);
    expect(await stored).toBe(4);
  });

  it("rejects the whole batch when another process holds the write lock past the busy timeout, and commits the next batch", async () => {
    const { path, database } = connect(undefined, 20);
    const other = connect(path).database;
    const transaction = groupCommit(connection(database, [], 20), noElsewhere, 20);
    other.exec("BEGIN IMMEDIATE");
    other.prepare("insert into t (id, name) values (100, 'other process')").run();
    const settled = await Promise.allSettled([transaction(() => inserting(1, "a")), transaction(() => inserting(2, "b"))]);
    expect(settled.map((result) => result.status)).toEqual(["rejected", "rejected"]);
    expect(String((settled[0] as PromiseRejectedResult).reason)).toMatch(/locked|busy/i);
    other.exec("COMMIT");
    await transaction(() => inserting(1, "a"));
    expect(names(database)).toEqual(["a", "other process"]);
  });

  it("waits for another process's write lock without blocking the event loop, the transactions asked for meanwhile joining the batch in order", async () => {
    const { path, database } = connect();
    const other = connect(path).database;
    const log: string[] = [];
    const transaction = groupCommit(connection(database, log), noElsewhere);
    other.exec("BEGIN IMMEDIATE");
    other.prepare("insert into t (id, name) values (100, 'other process')").run();
    const began = Date.now();
    // Released by a timer of this process: blocked in SQLite's busy handler, it would never fire.
    const released = new Promise<number>((done) =>
      setTimeout(() => {
        other.exec("COMMIT");
        done(Date.now() - began);
      }, 30),
    );
    const first = transaction(() => inserting(1, "first"));
    await new Promise((done) => setTimeout(done, 5));
    const second = transaction(() => inserting(2, "second"));
    expect(await Promise.all([first, second])).toEqual([2, 3]);
    expect(await released).toBeLessThan(1000);
    expect(names(database)).toEqual(["first", "second", "other process"]);
    // One commit for both, once the lock was had.
    expect(log.filter((sql) => sql === "COMMIT")).toHaveLength(1);
    expect(log.filter((sql) => sql === "BEGIN IMMEDIATE").length).toBeGreaterThan(1);
  });

  it("rejects every body of a batch whose commit fails: none of them was stored", async () => {
    const { database } = connect();
    const base = connection(database, []);
    let failCommit = true;
    const faulty: GroupCommitConnection = {
      ...base,
      run(sql) {
        if (sql === "COMMIT" && failCommit) {
          failCommit = false;
          throw Object.assign(new Error("disk I/O error"), { code: "SQLITE_IOERR" });
        }
        base.run(sql);
      },
    };
    const transaction = groupCommit(faulty, noElsewhere);
    // Alone and at once, as when idle: rejected, not thrown by the call.
    await expect(transaction(() => inserting(1, "alone"))).rejects.toThrow("disk I/O error");
    expect(names(database)).toEqual([]);
    await busy(transaction);
    failCommit = true;
    const settled = await Promise.allSettled([transaction(() => inserting(4, "a")), transaction(() => inserting(5, "b"))]);
    expect(settled.map((result) => result.status)).toEqual(["rejected", "rejected"]);
    expect(names(database)).toEqual(["run 1", "run 2", "run 3"]);
    expect(database.inTransaction).toBe(false);
    await transaction(() => inserting(6, "c"));
    expect(names(database)).toEqual(["run 1", "run 2", "run 3", "c"]);
  });

  it("hands the batch to the other executor while a transaction of Kysely's holds the connection", async () => {
    const { database } = connect();
    const elsewhere: string[] = [];
    const transaction = groupCommit(connection(database, []), async <T>(body: () => TransactionBody<T>) => {
      elsewhere.push("queued");
      // Stands for Kysely's driver: it runs the body once the host's transaction is over.
      await new Promise((done) => setTimeout(done, 5));
      const generator = body();
      let step = generator.next();
      while (!step.done) step = generator.next(connection(database, []).rows(step.value));
      return step.value;
    });
    database.exec("BEGIN");
    const stored = transaction(() => inserting(1, "a"));
    // Right after the flush, which was queued first for the same check phase: a timer could
    // fire before it on a loaded machine, and the flush would then find no transaction.
    setImmediate(() => database.exec("COMMIT"));
    expect(await stored).toBe(1);
    expect(elsewhere).toEqual(["queued"]);
  });
});

describe("isBusy", () => {
  it("knows SQLITE_BUSY as each driver throws it, and nothing else", () => {
    // As thrown by `BEGIN IMMEDIATE` under another connection's lock, busy timeout 0.
    expect(isBusy(Object.assign(new Error("database is locked"), { code: "SQLITE_BUSY" }))).toBe(true); // better-sqlite3
    expect(isBusy(Object.assign(new Error("database is locked"), { code: "SQLITE_BUSY", errno: 5 }))).toBe(true); // bun:sqlite
    expect(isBusy(Object.assign(new Error("database is locked"), { code: "ERR_SQLITE_ERROR", errcode: 5 }))).toBe(true); // node:sqlite, a statement
    expect(isBusy(Object.assign(new Error("database is locked"), { code: "ERR_SQLITE_ERROR" }))).toBe(true); // Deno's node:sqlite, exec
    expect(isBusy(Object.assign(new Error("UNIQUE constraint failed: t.id"), { code: "SQLITE_CONSTRAINT_PRIMARYKEY" }))).toBe(false);
    expect(isBusy(Object.assign(new Error("disk I/O error"), { code: "ERR_SQLITE_ERROR", errcode: 10 }))).toBe(false);
    expect(isBusy(null)).toBe(false);
  });
});
