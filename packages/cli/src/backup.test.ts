/**
 * The backups docs/operations.md describes, made and restored on real databases: `channelkit
 * backup` of a SQLite file while a `channelkit serve` writes to it, and `pg_dump -Fc` /
 * `pg_restore` of a Postgres database; a server on the restored copy reads back every message.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { copyFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { createTestDatabase, describeWithPostgres } from "@channelkit/testkit";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, killAll, runCli, runCliJson, type ServeProcess, startServe } from "./test-process.js";
import { run, sqliteDatabase } from "./test-runs.js";

const ENV = { CHANNELKIT_SECRET_KEY: randomBytes(32).toString("hex"), CHANNELKIT_ADMIN_JWT_SECRET: randomBytes(32).toString("hex") };
const sh = promisify(execFile);

interface Message {
  role: string;
  content: string;
}

async function history(server: ServeProcess, key: string, conversationId: string): Promise<Message[]> {
  const response = await fetch(`${server.url}/public/v1/api/conversations/${conversationId}/messages?limit=200`, {
    headers: { authorization: `Bearer ${key}` },
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { messages: Message[] }).messages.map(({ role, content }) => ({ role, content }));
}

/** The restored database's migrations, as the server on it reports them: every one applied. */
async function expectCurrent(server: ServeProcess): Promise<void> {
  const response = await fetch(`${server.url}/readyz`);
  expect(response.status).toBe(200);
  expect(await response.json()).toMatchObject({ status: "ready", migrations: "current", pending: [] });
}

/** A conversation of three turns on `server`: its id and the history it must have. */
async function conversation(server: ServeProcess, key: string): Promise<{ id: string; messages: Message[] }> {
  const first = await run(server, key, { payload: "one" });
  expect(first.status).toBe(200);
  for (const payload of ["two", "three"]) expect((await run(server, key, { payload, conversation_id: first.conversationId })).status).toBe(200);
  const messages = ["one", "two", "three"].flatMap((payload) => [
    { role: "user", content: payload },
    { role: "assistant", content: `Echo: ${payload}` },
  ]);
  return { id: first.conversationId, messages };
}

/** A tenant and an API channel on `db`: the channel's key. */
async function channelKey(db: string): Promise<string> {
  const cli = <T = any>(...args: string[]) => runCliJson<T>([...args, "--db", db], ENV);
  await cli("migrate");
  const tenantId = (await cli<{ tenant: { id: string } }>("tenant", "create", "--name", "Backups")).tenant.id;
  return (await cli<{ api_key: string }>("channel", "create", "--tenant", tenantId, "--flow", "echo")).api_key;
}

describe("channelkit backup of a SQLite database", () => {
  const files: string[] = [];
  const named = (name: string) => {
    const file = join(tmpdir(), `channelkit-backup-${name}-${randomBytes(6).toString("hex")}.db`);
    files.push(file, `${file}-wal`, `${file}-shm`);
    return file;
  };

  beforeAll(() => ensureBuilt(), 120_000);
  afterAll(async () => {
    await killAll();
    await Promise.all(files.map((file) => rm(file, { force: true })));
  });

  it("copies the database while a server writes to it; a server on the copy reads back what was written before", async () => {
    const { db, drop } = await sqliteDatabase("backup-source");
    try {
      const key = await channelKey(db);
      const server = await startServe(["--db", db, "--port", "0"], ENV);
      const before = await conversation(server, key);

      // Writes go on while the backup is made, and after it.
      let writing = true;
      let written = 0;
      const writer = (async () => {
        while (writing) {
          expect((await run(server, key, { payload: "meanwhile" })).status).toBe(200);
          written++;
        }
      })();
      // The backup starts once a write of the loop is done, so that the copy is made among writes.
      while (written === 0) await new Promise((resolve) => setImmediate(resolve));
      const target = named("copy");
      const made = await runCliJson<{ backup: { file: string; bytes: number } }>(["backup", target, "--db", db], ENV);
      writing = false;
      await writer;
      expect(written).toBeGreaterThan(0);
      expect(made.backup.file).toBe(target);
      expect(made.backup.bytes).toBeGreaterThan(0);

      const copy = new Database(target, { readonly: true });
      try {
        expect(copy.pragma("integrity_check", { simple: true })).toBe("ok");
        expect((copy.prepare("select count(*) as n from conversations").get() as { n: number }).n).toBeGreaterThanOrEqual(1);
      } finally {
        copy.close();
      }

      // Restored: the file put in place of a database, a server started on it.
      const restored = named("restored");
      await copyFile(target, restored);
      const onCopy = await startServe(["--db", restored, "--port", "0"], ENV);
      await expectCurrent(onCopy);
      expect(await history(onCopy, key, before.id)).toEqual(before.messages);
      expect((await run(onCopy, key, { payload: "four", conversation_id: before.id })).status).toBe(200);
      expect(await runCliJson(["migrate", "--db", restored], ENV)).toEqual({ migrated: true });
    } finally {
      await killAll();
      await drop();
    }
  }, 120_000);

  it("refuses an existing file without --force, a Postgres URL, a missing database and the database itself", async () => {
    const { db, drop } = await sqliteDatabase("backup-refusals");
    try {
      await channelKey(db);
      const target = named("exists");
      await writeFile(target, "not a database");
      const exists = await runCli(["backup", target, "--db", db], ENV);
      expect(exists.code).toBe(2);
      expect(exists.stderr).toContain("already exists: name another file, or pass --force to replace it");
      expect((await runCliJson(["backup", target, "--force", "--db", db], ENV)).backup.file).toBe(target);

      const postgres = await runCli(["backup", named("pg"), "--db", "postgres://localhost/channelkit"], ENV);
      expect(postgres.code).toBe(2);
      expect(postgres.stderr).toContain("back up Postgres with pg_dump -Fc");

      const missing = await runCli(["backup", named("missing"), "--db", join(tmpdir(), `no-such-${randomBytes(6).toString("hex")}.db`)], ENV);
      expect(missing.code).toBe(1);
      expect(missing.stderr).toContain('"code":"database_error"');
      expect(missing.stderr).toContain("no SQLite database at");

      const itself = await runCli(["backup", db, "--force", "--db", db], ENV);
      expect(itself.code).toBe(2);
      expect(itself.stderr).toContain("the backup file is the database itself");

      const none = await runCli(["backup", "--db", db], ENV);
      expect(none.code).toBe(2);
      expect(none.stderr).toContain("Missing argument: the backup file's path");
    } finally {
      await drop();
    }
  }, 60_000);
});

describeWithPostgres("pg_dump and pg_restore of a channelkit database", (serverUrl) => {
  beforeAll(() => ensureBuilt(), 120_000);
  afterAll(() => killAll());

  it("a database dumped with pg_dump -Fc and restored with pg_restore into a new one serves every conversation", async () => {
    const source = await createTestDatabase(serverUrl);
    const restored = await createTestDatabase(serverUrl);
    const dump = join(tmpdir(), `channelkit-${randomBytes(6).toString("hex")}.dump`);
    try {
      const key = await channelKey(source.url);
      const server = await startServe(["--db", source.url, "--port", "0"], ENV);
      const before = await conversation(server, key);
      await killAll();

      await sh("pg_dump", ["-Fc", "--no-owner", "-f", dump, source.url]);
      await sh("pg_restore", ["--no-owner", "--exit-on-error", "-d", restored.url, dump]);

      const onCopy = await startServe(["--db", restored.url, "--port", "0"], ENV);
      await expectCurrent(onCopy);
      expect(await history(onCopy, key, before.id)).toEqual(before.messages);
      expect((await run(onCopy, key, { payload: "four", conversation_id: before.id })).status).toBe(200);
      expect(await runCliJson(["migrate", "--db", restored.url], ENV)).toEqual({ migrated: true });
    } finally {
      await killAll();
      await rm(dump, { force: true });
      await source.drop();
      await restored.drop();
    }
  }, 120_000);
});
