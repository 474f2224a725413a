/**
 * Several processes migrating one new database at the same moment, as instances started
 * together do: on a fresh SQLite file and on a fresh Postgres database, round after round,
 * every process's `migrate()` succeeds and the schema ends up complete, each migration
 * recorded once.
 *
 * The processes are real Node processes running the built @channelkit/kysely. They are
 * started once and kept between rounds; each round they are released together (one line on
 * stdin each) and each opens the storage and migrates, so the race is as tight as two
 * `channelkit serve` started at once, and far more frequent. A last test starts the
 * `channelkit migrate` command itself several times at once.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface, type Interface } from "node:readline";
import { pathToFileURL } from "node:url";
import { migrations, openStorage } from "@channelkit/kysely";
import { createTestDatabase, describeWithPostgres } from "@channelkit/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, ROOT, runCli } from "./test-process.js";

/** Processes per round. */
const PROCESSES = 4;
/** Rounds per store. */
const ROUNDS = 25;

/** Every table the migrations create. */
const TABLES = ["api_keys", "channels", "conversations", "messages", "runs", "tenants"];

/**
 * A worker: for each line (a database location) on stdin, opens the storage there, migrates,
 * closes and answers `ok` or `error <message>` on stdout.
 */
const WORKER = `
import { createInterface } from "node:readline";
const { openStorage } = await import(process.env.CHANNELKIT_KYSELY_URL);
const lines = createInterface({ input: process.stdin });
console.log("ready");
for await (const location of lines) {
  try {
    const storage = openStorage(location);
    try {
      await storage.migrate();
    } finally {
      await storage.close();
    }
    console.log("ok");
  } catch (error) {
    console.log("error " + JSON.stringify(error instanceof Error ? error.message : String(error)));
  }
}
`;

interface Worker {
  child: ChildProcess;
  lines: Interface;
  next(): Promise<string>;
}

function startWorker(): Worker {
  const child = spawn(process.execPath, ["--input-type=module", "-e", WORKER], {
    cwd: ROOT,
    env: { ...process.env, CHANNELKIT_KYSELY_URL: pathToFileURL(join(ROOT, "packages/kysely/dist/index.js")).href },
    stdio: ["pipe", "pipe", "inherit"],
  });
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const queued: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  lines.on("line", (line) => {
    const resolve = waiting.shift();
    if (resolve) resolve(line);
    else queued.push(line);
  });
  child.once("exit", (code) => {
    for (const resolve of waiting.splice(0)) resolve(`error "worker exited with ${code}"`);
  });
  return {
    child,
    lines,
    next: () => {
      const line = queued.shift();
      return line !== undefined ? Promise.resolve(line) : new Promise((resolve) => waiting.push(resolve));
    },
  };
}

/** Asserts the database at `location` has every table and every migration recorded once. */
async function expectMigrated(location: string): Promise<void> {
  const storage = openStorage(location);
  try {
    const tables = (await storage.db.introspection.getTables()).map((table) => table.name);
    for (const table of TABLES) expect(tables).toContain(table);
    const recorded = await (storage.db as any).selectFrom("channelkit_migration").select("name").orderBy("name").execute();
    expect(recorded.map((row: { name: string }) => row.name)).toEqual(Object.keys(migrations).sort());
  } finally {
    await storage.close();
  }
}

/** The concurrent-migration suite on the fresh databases `fresh()` makes. */
function racingMigrations(fresh: () => Promise<{ location: string; drop(): Promise<void> }>) {
  let workers: Worker[] = [];

  beforeAll(async () => {
    await ensureBuilt();
    workers = Array.from({ length: PROCESSES }, startWorker);
    for (const worker of workers) expect(await worker.next()).toBe("ready");
  }, 120_000);

  afterAll(() => {
    for (const worker of workers) worker.child.kill("SIGKILL");
  });

  it(`${PROCESSES} processes migrating one new database at once all succeed, ${ROUNDS} rounds`, async () => {
    const failures: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const { location, drop } = await fresh();
      try {
        // Each worker answers in order; the lines go out back to back, so they start together.
        for (const worker of workers) worker.child.stdin?.write(`${location}\n`);
        const answers = await Promise.all(workers.map((worker) => worker.next()));
        const failed = answers.filter((answer) => answer !== "ok");
        if (failed.length > 0) failures.push(`round ${round}: ${failed.join("; ")}`);
        await expectMigrated(location).catch((error: Error) => failures.push(`round ${round}, schema: ${error.message}`));
      } finally {
        await drop();
      }
    }
    expect(failures, `${failures.length} failures in ${ROUNDS} rounds`).toEqual([]);
  }, 60_000);
}

describe("concurrent migrate() on a new SQLite file", () => {
  racingMigrations(async () => {
    const location = join(tmpdir(), `channelkit-migrate-${randomUUID()}.db`);
    return {
      location,
      drop: async () => {
        await Promise.all(["", "-wal", "-shm"].map((suffix) => rm(`${location}${suffix}`, { force: true })));
      },
    };
  });
});

describeWithPostgres("concurrent migrate() on a new Postgres database", (serverUrl) => {
  racingMigrations(async () => {
    const database = await createTestDatabase(serverUrl);
    return { location: database.url, drop: () => database.drop() };
  });
});

describe("channelkit migrate started several times at once on a new SQLite file", () => {
  const files: string[] = [];

  beforeAll(() => ensureBuilt(), 120_000);

  afterAll(async () => {
    await Promise.all(files.flatMap((file) => ["", "-wal", "-shm"].map((suffix) => rm(`${file}${suffix}`, { force: true }))));
  });

  it("every command succeeds and prints its result once, 5 rounds of 3", async () => {
    for (let round = 0; round < 5; round++) {
      const db = join(tmpdir(), `channelkit-migrate-cli-${randomUUID()}.db`);
      files.push(db);
      const results = await Promise.all([0, 1, 2].map(() => runCli(["migrate", "--db", db])));
      for (const result of results) {
        expect(result.stderr, `round ${round}`).toBe("");
        expect(result.code, `round ${round}`).toBe(0);
        expect(JSON.parse(result.stdout)).toEqual({ migrated: true });
      }
      await expectMigrated(db);
    }
  }, 60_000);
});
