import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import BetterSqlite3 from "better-sqlite3";
import { afterEach, beforeEach, expect, it } from "vitest";
import { sqlite } from "./sqlite.js";
import type { KyselyStorage } from "./storage.js";

/*
 * The busy timeout of `sqlite()`'s connection (BusyTimeout, group-commit.ts): the group
 * commit's `BEGIN IMMEDIATE` turns it off and leaves it off, and every other way in to the
 * connection that may wait for a lock turns it back on first. Another process holds the write
 * lock for a while; a statement that ran with the timeout still off would fail at once with
 * `SQLITE_BUSY` instead of waiting for it.
 */

const HOLD_MS = 300;
let dir: string;
let file: string;
let storage: KyselyStorage;
let tenants = 0;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), "channelkit-busy-"));
  file = join(dir, "channelkit.db");
  storage = sqlite(file);
  await storage.migrate();
});

afterEach(async () => {
  await storage.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A transaction of the group commit, which turns the busy timeout off. */
async function groupCommitted(): Promise<string> {
  const id = `t${++tenants}`;
  await storage.createTenant({ id, name: "busy", createdAt: new Date().toISOString() });
  return id;
}

/** Another process takes the write lock and keeps it `HOLD_MS`; resolves once it holds it. */
async function lockedElsewhere(): Promise<{ released: Promise<void> }> {
  const script = `
    const Database = require("better-sqlite3");
    const db = new Database(${JSON.stringify(file)});
    db.exec("BEGIN IMMEDIATE");
    process.stdout.write("locked\\n");
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ${HOLD_MS});
    db.exec("COMMIT");
  `;
  const child = spawn(process.execPath, ["-e", script], { cwd: process.cwd(), stdio: ["ignore", "pipe", "inherit"] });
  const released = new Promise<void>((resolve, reject) => {
    child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`the locking process exited with ${code}`))));
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout.on("data", (chunk: Buffer) => chunk.toString().includes("locked") && resolve());
    child.once("exit", () => reject(new Error("the locking process never held the lock")));
  });
  return { released };
}

/** How long `write` took while another process held the lock; it must have waited, not failed. */
async function waitedFor(write: () => Promise<unknown>): Promise<number> {
  await groupCommitted();
  const { released } = await lockedElsewhere();
  const start = performance.now();
  await write();
  const waited = performance.now() - start;
  await released;
  return waited;
}

it("a write outside a transaction waits for another process's lock after a transaction turned the timeout off", async () => {
  // The executor's own statement (an UPDATE takes the write lock even when it matches nothing).
  expect(await waitedFor(() => storage.renewTurn("none", 0, new Date().toISOString()))).toBeGreaterThan(HOLD_MS / 3);
  // Kysely's driver: your own queries through `storage.db`, the migrations, the admin operations.
  expect(
    await waitedFor(() => storage.db.insertInto("tenants").values({ id: "own", name: "own", created_at: new Date().toISOString() }).execute()),
  ).toBeGreaterThan(HOLD_MS / 3);
  // The live feed's publish.
  expect(await waitedFor(() => storage.feed?.publish("topic", "message") as Promise<void>)).toBeGreaterThan(HOLD_MS / 3);
  expect(await storage.findTenant("own")).toMatchObject({ name: "own" });
});

it("a read that meets SQLITE_BUSY with the timeout off runs again with it on", async () => {
  // WAL readers wait for no lock, except while another connection recovers the WAL after a
  // crash, which cannot be staged on demand: the read's first run is made to fail as SQLite
  // would then, on the real connection and statement.
  const id = await groupCommitted();
  const ran: string[] = [];
  const statement = Object.getPrototypeOf(new BetterSqlite3(":memory:").prepare("select 1")) as Record<string, (...args: unknown[]) => unknown>;
  const original = { all: statement.all, run: statement.run } as Record<string, (...args: unknown[]) => unknown>;
  let failed = false;
  for (const method of ["all", "run"]) {
    statement[method] = function (this: { source: string }, ...args: unknown[]) {
      ran.push(this.source);
      if (!failed && this.source.includes('from "tenants"')) {
        failed = true;
        throw Object.assign(new Error("database is locked"), { code: "SQLITE_BUSY" });
      }
      return original[method]?.apply(this, args);
    };
  }
  try {
    expect(await storage.findTenant(id)).toMatchObject({ id });
  } finally {
    Object.assign(statement, original);
  }
  expect(ran.map((sql) => sql.split(" ").slice(0, 2).join(" "))).toEqual(["select *", "PRAGMA busy_timeout", "select *"]);
});

it("a transaction after such a write turns the timeout off again: a lock held in this process is waited for from the event loop", async () => {
  await groupCommitted();
  await storage.renewTurn("none", 0, new Date().toISOString());
  // Released by a timer of this process: a BEGIN that slept in SQLite's busy handler would
  // block the timer, and fail after the busy timeout (5 s).
  const other = new BetterSqlite3(file);
  other.exec("BEGIN IMMEDIATE");
  setTimeout(() => other.exec("COMMIT"), 100);
  const start = performance.now();
  await groupCommitted();
  expect(performance.now() - start).toBeLessThan(2000);
  other.close();
});
