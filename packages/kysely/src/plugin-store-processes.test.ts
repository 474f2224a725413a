/**
 * The plugin store across processes (issue 42): two Node processes, each with its own storage
 * on one database (a SQLite file; a Postgres database), race `add` on the same 200 keys and
 * `acquireLease` on one lease. Each key has exactly one winner, whose value is the one stored;
 * the lease never has two holders at once: while a process holds it, it takes an `occupant`
 * key (which must be free) and increments a counter by read-then-write (which would lose an
 * increment if another held it too), then gives both back.
 *
 * The processes run these very sources, bundled on the fly. They open their storage and
 * answer `ready`; the test then sends each race's command to both at once (the keys, then
 * the lease, each started together), and waits for each one's answer line (the keys it won;
 * its holds and what it saw wrong). No step waits for a time.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { createTestDatabase, describeWithPostgres } from "@channelkit/testkit";
import { build } from "esbuild";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStorage } from "./open.js";

const KEYS = Array.from({ length: 200 }, (_, i) => `delivery-${i}`);
/** How many times each process takes the lease (and gives it back). */
const HOLDS = 40;
const PLUGIN = "race";

/**
 * A process: opens the storage at `LOCATION` and answers `ready`; on `add`, adds every key
 * (all at once) and answers the keys it won; on `lead`, takes the lease `HOLDS` times and
 * answers how it went. Each answer is one JSON line.
 */
const CHILD = `
const { readFileSync } = require("node:fs");
const { createInterface } = require("node:readline");
const load = require("node:module").createRequire(process.env.BASE);
const module_ = { exports: {} };
new Function("module", "exports", "require", readFileSync(process.env.BUNDLE, "utf8"))(module_, module_.exports, load);
const id = process.env.ID;
const keys = JSON.parse(process.env.KEYS);
const holds = Number(process.env.HOLDS);

/** Every key at once: the keys this process added. */
async function addAll(store) {
  const added = await Promise.all(keys.map((key) => store.add(key, id)));
  return keys.filter((_, i) => added[i]);
}

/** Takes the lease \`holds\` times, each time checking it is alone, then gives it back. */
async function lead(store) {
  const problems = [];
  let held = 0;
  let refused = 0;
  while (held < holds) {
    if (!(await store.acquireLease("leader", id, 60000))) {
      refused++;
      continue;
    }
    if (!(await store.add("occupant", id))) problems.push("took the lease while " + JSON.stringify(await store.get("occupant")) + " held it");
    const count = (await store.get("count")) ?? 0;
    if (!(await store.acquireLease("leader", id, 60000))) problems.push("its holder could not renew the lease");
    await store.set("count", count + 1);
    if (!(await store.delete("occupant"))) problems.push("the occupant key was gone before its holder left");
    if (!(await store.releaseLease("leader", id))) problems.push("its holder could not release the lease");
    held++;
  }
  return { held, refused, problems };
}

(async () => {
  const storage = module_.exports.openStorage(process.env.LOCATION);
  const store = storage.pluginStore(process.env.PLUGIN);
  // The statements of the race, run once on as many connections as the race will use, before it starts.
  await Promise.all(Array.from({ length: 10 }, (_, i) => store.add("warm-up-" + id + "-" + i, 0).then(() => store.get("warm-up"))));
  await store.acquireLease("warm-up", id, 1000);
  await store.releaseLease("warm-up", id);
  const lines = createInterface({ input: process.stdin });
  console.log("ready");
  for await (const line of lines) {
    if (line === "add") console.log(JSON.stringify({ won: await addAll(store) }));
    if (line === "lead") {
      console.log(JSON.stringify(await lead(store)));
      break;
    }
  }
  lines.close();
  await storage.close();
})().catch((error) => {
  console.log(JSON.stringify({ error: String((error && error.stack) || error) }));
  process.exitCode = 1;
});
`;

interface Child {
  process: ChildProcess;
  /** The next line it prints; rejects, saying `what` was awaited and what it printed on stderr, if it exits first. */
  next(what: string): Promise<string>;
}

let dir: string;
let bundle: string;
const children: ChildProcess[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "channelkit-plugin-race-"));
  const built = await build({
    entryPoints: [fileURLToPath(new URL("./index.ts", import.meta.url))],
    bundle: true,
    format: "cjs",
    platform: "node",
    target: "node20",
    // The drivers and Kysely as the process's require finds them from here; core bundled in.
    external: ["better-sqlite3", "pg", "kysely", "zod"],
    alias: { "@channelkit/core": fileURLToPath(new URL("../../core/src/index.ts", import.meta.url)) },
    write: false,
    logLevel: "silent",
  });
  bundle = join(dir, "kysely.cjs");
  await writeFile(bundle, built.outputFiles[0]?.text ?? "");
}, 60_000);

afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  await rm(dir, { recursive: true, force: true });
});

function startChild(location: string, id: string): Child {
  const child = spawn(process.execPath, ["-e", CHILD], {
    env: {
      ...process.env,
      BUNDLE: bundle,
      BASE: fileURLToPath(import.meta.url),
      LOCATION: location,
      ID: id,
      PLUGIN,
      KEYS: JSON.stringify(KEYS),
      HOLDS: String(HOLDS),
    },
    stdio: ["pipe", "pipe", "pipe"],
  });
  children.push(child);
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const queued: string[] = [];
  const waiting: { resolve: (line: string) => void; reject: (error: Error) => void; what: string }[] = [];
  let ended = false;
  const endedBefore = (what: string) => new Error(`process ${id} ended (exit code ${child.exitCode}) before ${what}: ${stderr}`);
  lines.on("line", (line) => {
    const waiter = waiting.shift();
    if (waiter) waiter.resolve(line);
    else queued.push(line);
  });
  lines.on("close", () => {
    ended = true;
    for (const waiter of waiting.splice(0)) waiter.reject(endedBefore(waiter.what));
  });
  return {
    process: child,
    next: (what) => {
      const line = queued.shift();
      if (line !== undefined) return Promise.resolve(line);
      if (ended) return Promise.reject(endedBefore(what));
      return new Promise((resolve, reject) => waiting.push({ resolve, reject, what }));
    },
  };
}

/** The race on the database at `location` (migrated here first), with two processes. */
async function race(location: string): Promise<void> {
  const storage = openStorage(location);
  try {
    await storage.migrate();
    const ids = ["first", "second"];
    const racers = ids.map((id) => startChild(location, id));
    for (const racer of racers) expect(await racer.next("its storage was open (ready)")).toBe("ready");
    /** Sends `command` to both processes back to back, so that they start together, and reads each one's answer. */
    const both = async <T>(command: string, what: string): Promise<T[]> => {
      for (const racer of racers) racer.process.stdin?.write(`${command}\n`);
      const answers = await Promise.all(racers.map(async (racer) => JSON.parse(await racer.next(what)) as T & { error?: string }));
      expect(answers.map((answer) => answer.error)).toEqual([undefined, undefined]);
      return answers;
    };
    const store = storage.pluginStore(PLUGIN);

    // Every key won exactly once, and its value is its winner's.
    const added = await both<{ won: string[] }>("add", "the keys it added");
    const winners = new Map<string, string[]>();
    added.forEach((answer, i) => {
      for (const key of answer.won) winners.set(key, [...(winners.get(key) ?? []), ids[i] as string]);
    });
    expect(KEYS.filter((key) => winners.get(key)?.length !== 1)).toEqual([]);
    const stored = await Promise.all(KEYS.map((key) => store.get(key)));
    expect(KEYS.filter((key, i) => stored[i] !== winners.get(key)?.[0])).toEqual([]);

    // One holder at a time: no occupant met, no increment lost; the lease given back at the end.
    const led = await both<{ held: number; refused: number; problems: string[] }>("lead", "its turns with the lease");
    expect(led.flatMap((answer) => answer.problems)).toEqual([]);
    expect(led.map((answer) => answer.held)).toEqual([HOLDS, HOLDS]);
    expect(await store.get("count")).toBe(2 * HOLDS);
    expect(await store.get("occupant")).toBeUndefined();
    expect(await store.acquireLease("leader", "the test", 1000)).toBe(true);
    console.log(
      `plugin store race on ${location.startsWith("postgres") ? "Postgres" : "SQLite"}: ${ids
        .map((id, i) => `${id} won ${added[i]?.won.length} keys and was refused the lease ${led[i]?.refused} times`)
        .join("; ")}`,
    );
  } finally {
    await storage.close();
  }
}

describe("the plugin store across two processes", () => {
  it("on one SQLite file: one winner per key, one lease holder at a time", async () => {
    const file = join(dir, `race-${randomUUID()}.db`);
    await race(file);
  }, 60_000);
});

describeWithPostgres("the plugin store across two processes on Postgres", (serverUrl) => {
  it("on one Postgres database: one winner per key, one lease holder at a time", async () => {
    const database = await createTestDatabase(serverUrl);
    try {
      await race(database.url);
    } finally {
      await database.drop();
    }
  }, 60_000);
});
