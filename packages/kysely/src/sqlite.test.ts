import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import BetterSqlite3 from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { keepingStatements, rowMaker } from "./sqlite.js";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function file(): string {
  const dir = mkdtempSync(join(tmpdir(), "channelkit-sqlite-"));
  dirs.push(dir);
  return join(dir, "test.db");
}

describe("keepingStatements", () => {
  it("prepares a statement once per SQL text and binds fresh parameters at each run", () => {
    const database = new BetterSqlite3(":memory:");
    const db = keepingStatements(database);
    db.prepare("create table t (id integer primary key, name text)").run([]);
    const insert = db.prepare("insert into t (id, name) values (?, ?)");
    insert.run([1, "a"]);
    expect(db.prepare("insert into t (id, name) values (?, ?)")).toBe(insert);
    db.prepare("insert into t (id, name) values (?, ?)").run([2, "b"]);
    expect(db.prepare("select name from t where id = ?").all([2])).toEqual([{ name: "b" }]);
    expect(db.prepare("select name from t where id = ?").all([1])).toEqual([{ name: "a" }]);
    db.close();
  });

  it("keeps at most `size` statements, dropping the least recently used", () => {
    const db = keepingStatements(new BetterSqlite3(":memory:"), 2);
    const one = db.prepare("select 1");
    const two = db.prepare("select 2");
    expect(db.prepare("select 1")).toBe(one);
    db.prepare("select 3");
    expect(db.prepare("select 1")).toBe(one);
    expect(db.prepare("select 2")).not.toBe(two);
    db.close();
  });

  it("never hands out a statement that is still being iterated", () => {
    const db = keepingStatements(new BetterSqlite3(":memory:"));
    const sql = "select value from json_each('[1,2,3]')";
    const iterating = db.prepare(sql);
    const rows = iterating.iterate([]);
    rows.next();
    const other = db.prepare(sql);
    expect(other).not.toBe(iterating);
    expect(other.all([])).toHaveLength(3);
    rows.return?.();
    db.close();
  });

  it("sees a schema change made by another connection (another process's migration)", () => {
    const path = file();
    const db = keepingStatements(new BetterSqlite3(path));
    db.prepare("create table t (id integer primary key)").run([]);
    db.prepare("insert into t (id) values (?)").run([1]);
    expect(db.prepare("select * from t").all([])).toEqual([{ id: 1 }]);
    const other = new BetterSqlite3(path);
    other.exec("alter table t add column name text default 'x'");
    other.close();
    expect(db.prepare("select * from t").all([])).toEqual([{ id: 1, name: "x" }]);
    db.close();
  });
});

describe("rowMaker", () => {
  it("names the values of a row as better-sqlite3 does, whatever the column names", () => {
    const database = new BetterSqlite3(":memory:");
    const sql = `select 1 as "a", 'two' as "quote""d", null as "back\\slash", 4.5 as "new
line", x'00ff' as "é ü 😀", 6 as "a", 7 as "constructor"`;
    const objects = database.prepare(sql).all();
    const raw = database.prepare(sql).raw(true);
    const maker = rowMaker(raw.columns().map((column) => column.name));
    const rows = raw.all().map((values) => maker.make(values as unknown[]));
    expect(maker.width).toBe(7);
    expect(rows).toEqual(objects);
    expect(Object.keys(rows[0] as object)).toEqual(Object.keys(objects[0] as object));
    database.close();
  });

  it("keeps a column named __proto__ as a value, never as the prototype", () => {
    const row = rowMaker(["id", "__proto__"]).make([1, { polluted: true }]);
    expect(Object.getPrototypeOf(row)).toBe(Object.prototype);
    expect(Object.keys(row)).toEqual(["id", "__proto__"]);
    expect((row as { polluted?: unknown }).polluted).toBeUndefined();
  });
});
