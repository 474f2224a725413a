import { execFile } from "node:child_process";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import BetterSqlite3 from "better-sqlite3";
import { build } from "esbuild";
import { afterEach, describe, expect, it } from "vitest";
import { sqlite } from "./sqlite.js";
import type { KyselyStorage } from "./storage.js";

const dirs: string[] = [];
const storages: KyselyStorage[] = [];
afterEach(async () => {
  for (const storage of storages.splice(0)) await storage.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function file(): string {
  const dir = mkdtempSync(join(tmpdir(), "channelkit-checkpoint-"));
  dirs.push(dir);
  return join(dir, "test.db");
}

/** The tenants in the database file itself, leaving the WAL out: what a checkpoint has copied there. */
function tenantsInFile(path: string): number {
  // A copy of the file without its WAL: only what was checkpointed.
  const copy = `${path}.copy`;
  copyFileSync(path, copy);
  const database = new BetterSqlite3(copy, { readonly: true });
  try {
    const table = database.prepare("select 1 from sqlite_master where name = 'tenants'").get();
    return table ? (database.prepare("select count(*) as n from tenants").get() as { n: number }).n : 0;
  } finally {
    database.close();
    rmSync(copy, { force: true });
  }
}

/** The storage's sources bundled for a child process, which opens its own sqlite(file) from them. */
async function bundled(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "channelkit-checkpoint-bundle-"));
  dirs.push(dir);
  const bundle = join(dir, "storage.cjs");
  await build({
    entryPoints: [fileURLToPath(new URL("./index.ts", import.meta.url))],
    outfile: bundle,
    bundle: true,
    format: "cjs",
    platform: "node",
    target: "node20",
    external: ["better-sqlite3", "pg", "kysely", "zod"],
    alias: { "@channelkit/core": fileURLToPath(new URL("../../core/src/index.ts", import.meta.url)) },
    logLevel: "silent",
  });
  return bundle;
}

/** A child's environment, resolving the drivers from the repository's node_modules. */
const childEnv = () => ({ ...process.env, NODE_PATH: fileURLToPath(new URL("../../../node_modules", import.meta.url)) });

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

async function writeTenants(storage: KyselyStorage, count: number, prefix = "t"): Promise<void> {
  for (let i = 0; i < count; i++) {
    await storage.createTenant({ id: crypto.randomUUID(), name: `${prefix} ${i}`, createdAt: new Date().toISOString() });
  }
}

describe("sqlite(): the WAL checkpointer thread", () => {
  it("copies committed pages into the database file beside the event loop, well before SQLite's automatic checkpoint would", async () => {
    const path = file();
    const storage = sqlite(path);
    storages.push(storage);
    await storage.migrate();
    const before = tenantsInFile(path);
    // A few hundred small commits: far fewer WAL pages than the 1,000 at which the
    // connection's own (automatic) checkpoint runs.
    await writeTenants(storage, 300);
    const deadline = Date.now() + 5000;
    while (tenantsInFile(path) < before + 300 && Date.now() < deadline) await sleep(20);
    expect(tenantsInFile(path)).toBe(before + 300);
  });

  it("starts no thread for a storage that writes little", async () => {
    const path = file();
    const storage = sqlite(path);
    storages.push(storage);
    await storage.migrate();
    const before = tenantsInFile(path);
    await writeTenants(storage, 20);
    await sleep(100);
    expect(tenantsInFile(path)).toBe(before);
  });

  it("stops with the storage: close() resolves and the file is left whole", async () => {
    const path = file();
    const storage = sqlite(path);
    await storage.migrate();
    await writeTenants(storage, 150);
    await storage.close();
    const database = new BetterSqlite3(path);
    expect(database.pragma("integrity_check", { simple: true })).toBe("ok");
    expect((database.prepare("select count(*) as n from tenants").get() as { n: number }).n).toBeGreaterThanOrEqual(150);
    database.close();
  });

  it("lets a process whose last step is closing the storage finish that step (the thread is unref'd, not the wait for it)", async () => {
    const path = file();
    const storage = sqlite(path);
    await storage.migrate();
    await storage.close();
    const bundle = await bundled();
    const script = `
      const { sqlite } = require(${JSON.stringify(bundle)});
      (async () => {
        const storage = sqlite(process.argv[1]);
        for (let i = 0; i < 150; i++) {
          await storage.createTenant({ id: crypto.randomUUID(), name: "t " + i, createdAt: new Date().toISOString() });
        }
        await storage.close();
        console.log("closed");
      })();
    `;
    const { stdout } = await promisify(execFile)(process.execPath, ["-e", script, path], { env: childEnv() });
    expect(stdout.trim()).toBe("closed");
  }, 60_000);

  it("runs in two processes writing one file at once: every row is stored and the file is whole", async () => {
    const path = file();
    const storage = sqlite(path);
    storages.push(storage);
    await storage.migrate();
    const bundle = await bundled();
    const script = `
      const { sqlite } = require(${JSON.stringify(bundle)});
      (async () => {
        const storage = sqlite(process.argv[1]);
        for (let i = 0; i < 400; i++) {
          await storage.createTenant({ id: crypto.randomUUID(), name: process.argv[2] + " " + i, createdAt: new Date().toISOString() });
        }
        await storage.close();
      })();
    `;
    const run = (name: string) => promisify(execFile)(process.execPath, ["-e", script, path, name], { env: childEnv() });
    await Promise.all([run("first"), run("second")]);
    const database = new BetterSqlite3(path);
    expect(database.pragma("integrity_check", { simple: true })).toBe("ok");
    const names = database.prepare("select name from tenants where name like 'first %' or name like 'second %'").all();
    expect(names).toHaveLength(800);
    database.close();
  }, 60_000);
});
