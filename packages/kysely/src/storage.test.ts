import { randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import type { ApiKeyRecord, ChannelRecord, CompleteRunInput, MessageRecord, NewMessage, RunRecord } from "@channelkit/core";
import BetterSqlite3 from "better-sqlite3";
import { build } from "esbuild";
import { CompiledQuery, Kysely, SqliteDialect, sql } from "kysely";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Database } from "./schema.js";
import { sqlite } from "./sqlite.js";
import { KyselyStorage } from "./storage.js";

const files: string[] = [];
const open: KyselyStorage[] = [];

function tempFile(): string {
  const file = join(tmpdir(), `channelkit-storage-${randomUUID()}.db`);
  files.push(file);
  return file;
}

async function migrated(file = tempFile()): Promise<KyselyStorage> {
  const storage = sqlite(file);
  open.push(storage);
  await storage.migrate();
  return storage;
}

afterEach(async () => {
  await Promise.all(open.splice(0).map((storage) => storage.close().catch(() => undefined)));
});

afterAll(async () => {
  await Promise.all(files.flatMap((file) => ["", "-wal", "-shm"].map((suffix) => rm(`${file}${suffix}`, { force: true }))));
});

const NOW = "2025-01-01T00:00:00.000Z";

function channelRecord(tenantId: string, overrides: Partial<ChannelRecord> = {}): ChannelRecord {
  return {
    id: randomUUID(),
    tenantId,
    name: "Test channel",
    type: "api",
    mode: "server",
    environment: "prod",
    state: "active",
    flowName: "echo",
    allowedOrigins: ["https://app.example.com"],
    defaultStream: true,
    requireSignature: false,
    signingSecretEncrypted: null,
    apiKeyHint: "svc_live_****aaaa",
    clientId: null,
    languages: ["en_US", "fr_FR"],
    livechatMessages: { livechat_waiting: "Please wait" },
    createdAt: NOW,
    updatedAt: NOW,
    ...overrides,
  };
}

function keyRecord(channel: ChannelRecord, hash: string, hint = `svc_live_****${hash.slice(-4)}`): ApiKeyRecord {
  return {
    id: randomUUID(),
    channelId: channel.id,
    tenantId: channel.tenantId,
    hash,
    prefix: "svc_live_",
    environment: channel.environment,
    hint,
    createdAt: NOW,
    expiresAt: null,
    revokedAt: null,
  };
}

/** A tenant and a channel with one key. */
async function seed(storage: KyselyStorage, overrides: Partial<ChannelRecord> = {}) {
  const tenant = { id: randomUUID(), name: "Acme", createdAt: NOW };
  await storage.createTenant(tenant);
  const channel = channelRecord(tenant.id, overrides);
  const key = keyRecord(channel, `hash-${randomUUID()}`);
  await storage.createChannel(channel, key);
  return { tenant, channel, key };
}

function newMessage(content: string, role: NewMessage["role"] = "user", runId: string | null = null): NewMessage {
  return {
    origin: "agent",
    role,
    content,
    timestamp: NOW,
    tokenCount: Math.ceil(content.length / 4),
    runId,
    stepId: role === "user" ? null : randomUUID(),
    nodeType: role === "user" ? null : "echo",
    toolCalls: null,
    toolCallId: null,
    livechatMessageId: null,
    sender: null,
  };
}

function runInput(channel: ChannelRecord, conversationId: string, contents: string[], extra: Partial<CompleteRunInput> = {}): CompleteRunInput {
  const run: RunRecord = {
    id: randomUUID(),
    conversationId,
    channelId: channel.id,
    tenantId: channel.tenantId,
    status: "success",
    flowName: "echo",
    flowVersion: "1",
    result: { ok: true },
    error: null,
    executionOrder: ["echo"],
    startedAt: NOW,
    completedAt: "2025-01-01T00:00:01.000Z",
    durationMs: 1000,
  };
  return {
    run,
    conversation: { id: conversationId, tenantId: channel.tenantId, channelId: channel.id },
    messages: contents.map((content, i) => newMessage(content, i === 0 ? "user" : "assistant", run.id)),
    ...extra,
  };
}

/** Every run's messages got consecutive turns, and all turns together are 0..N-1. */
function expectContiguousRuns(all: MessageRecord[], perRun: number) {
  const turns = all.map((m) => m.turnIndex).sort((a, b) => a - b);
  expect(turns).toEqual(turns.map((_, i) => i));
  const byRun = new Map<string, number[]>();
  for (const m of all) byRun.set(m.runId as string, [...(byRun.get(m.runId as string) ?? []), m.turnIndex]);
  for (const indexes of byRun.values()) {
    indexes.sort((a, b) => a - b);
    expect(indexes).toHaveLength(perRun);
    expect(indexes.at(-1)! - indexes[0]!).toBe(perRun - 1);
  }
}

describe("migrate", () => {
  it("is idempotent, on one connection and from another one, and keeps the data", async () => {
    const file = tempFile();
    const storage = await migrated(file);
    await storage.migrate();
    const { tenant } = await seed(storage);
    const other = await migrated(file);
    await other.migrate();
    expect(await other.findTenant(tenant.id)).toEqual(tenant);
    const { rows } = await sql<{ name: string }>`select name from channelkit_migration`.execute(storage.db);
    expect(rows.map((row) => row.name)).toEqual(["0001_initial"]);
  });
});

describe("tenants and channels", () => {
  it("stores and reads back a tenant and a channel, with JSON and boolean fields", async () => {
    const storage = await migrated();
    expect(await storage.countTenants()).toBe(0);
    const { tenant, channel } = await seed(storage, { clientId: "client-1", requireSignature: true, signingSecretEncrypted: "v1:a:b" });
    expect(await storage.countTenants()).toBe(1);
    expect(await storage.findTenant(tenant.id)).toEqual(tenant);
    expect(await storage.findChannel(channel.id)).toEqual(channel);
    expect(await storage.findChannel(randomUUID())).toBeNull();
    expect(await storage.findTenant(randomUUID())).toBeNull();
  });

  it("creates a channel and its key atomically: a duplicate key hash leaves no channel behind", async () => {
    const storage = await migrated();
    const { tenant, key } = await seed(storage);
    const second = channelRecord(tenant.id);
    await expect(storage.createChannel(second, keyRecord(second, key.hash))).rejects.toThrow();
    expect(await storage.findChannel(second.id)).toBeNull();
  });

  it("updates only the patched fields and returns the new record", async () => {
    const storage = await migrated();
    const { channel } = await seed(storage);
    const updated = await storage.updateChannel(
      channel.id,
      { state: "inactive", allowedOrigins: [], defaultStream: false, requireSignature: true, name: null },
      "2025-02-02T00:00:00.000Z",
    );
    expect(updated).toEqual({
      ...channel,
      state: "inactive",
      allowedOrigins: [],
      defaultStream: false,
      requireSignature: true,
      name: null,
      updatedAt: "2025-02-02T00:00:00.000Z",
    });
    expect(await storage.findChannel(channel.id)).toEqual(updated);
    expect(await storage.updateChannel(randomUUID(), { state: "active" }, NOW)).toBeNull();
  });
});

describe("keys", () => {
  it("findKeyByHash returns the key with its channel, or null", async () => {
    const storage = await migrated();
    const { channel, key } = await seed(storage);
    expect(await storage.findKeyByHash(key.hash)).toEqual({ key, channel });
    expect(await storage.findKeyByHash("unknown")).toBeNull();
  });

  it("replaceChannelKey revokes every active key, stores the new one and updates the channel's hint", async () => {
    const storage = await migrated();
    const { channel, key } = await seed(storage);
    const other = await seed(storage);

    const second = keyRecord(channel, "hash-second", "svc_live_****cond");
    await storage.replaceChannelKey(channel.id, second, "2025-03-03T00:00:00.000Z");
    expect((await storage.findKeyByHash(key.hash))?.key.revokedAt).toBe("2025-03-03T00:00:00.000Z");
    const found = await storage.findKeyByHash(second.hash);
    expect(found?.key).toEqual(second);
    expect(found?.channel.apiKeyHint).toBe("svc_live_****cond");
    expect(found?.channel.updatedAt).toBe("2025-03-03T00:00:00.000Z");

    const third = keyRecord(channel, "hash-third", "svc_live_****hird");
    await storage.replaceChannelKey(channel.id, third, "2025-04-04T00:00:00.000Z");
    // A key already revoked keeps its revocation time.
    expect((await storage.findKeyByHash(key.hash))?.key.revokedAt).toBe("2025-03-03T00:00:00.000Z");
    expect((await storage.findKeyByHash(second.hash))?.key.revokedAt).toBe("2025-04-04T00:00:00.000Z");
    expect((await storage.findKeyByHash(third.hash))?.key.revokedAt).toBeNull();
    expect((await storage.findChannel(channel.id))?.apiKeyHint).toBe("svc_live_****hird");

    // Another channel's key is untouched.
    expect((await storage.findKeyByHash(other.key.hash))?.key.revokedAt).toBeNull();
    expect((await storage.findChannel(other.channel.id))?.apiKeyHint).toBe(other.channel.apiKeyHint);
  });
});

describe("the request path's reads on SQLite", () => {
  it("return what they returned after another process's migration adds columns", async () => {
    const file = tempFile();
    const storage = await migrated(file);
    const { channel, key } = await seed(storage);
    const conversationId = randomUUID();
    await storage.completeRun(runInput(channel, conversationId, ["Hello", "Echo: Hello"]));
    const before = [await storage.findKeyByHash(key.hash), await storage.findConversation(conversationId), await storage.listRecentMessages(conversationId, 10)];

    const other = new BetterSqlite3(file);
    other.exec(`ALTER TABLE channels ADD COLUMN extra TEXT DEFAULT 'x';
      ALTER TABLE conversations ADD COLUMN extra TEXT DEFAULT 'x';
      ALTER TABLE messages ADD COLUMN extra TEXT DEFAULT 'x';`);
    other.close();

    const after = [await storage.findKeyByHash(key.hash), await storage.findConversation(conversationId), await storage.listRecentMessages(conversationId, 10)];
    expect(after).toEqual(before);
    expect(before[0]).toEqual({ key, channel });
  });
});

describe("completeRun", () => {
  it("creates the conversation of a new run and numbers its messages from 0", async () => {
    const storage = await migrated();
    const { channel } = await seed(storage);
    const conversationId = randomUUID();
    const input = runInput(channel, conversationId, ["hi", "Echo: hi"], { flowState: { turn: 1 } });
    const stored = await storage.completeRun(input);
    expect(stored.map((m) => [m.turnIndex, m.role, m.content])).toEqual([
      [0, "user", "hi"],
      [1, "assistant", "Echo: hi"],
    ]);
    expect(stored[1]).toEqual({ ...input.messages[1], conversationId, turnIndex: 1 });

    const conversation = await storage.findConversation(conversationId);
    expect(conversation).toEqual({
      id: conversationId,
      tenantId: channel.tenantId,
      channelId: channel.id,
      mode: "bot",
      flowState: { turn: 1 },
      nextTurn: 2,
      livechatConversationId: null,
      createdAt: input.run.startedAt,
      updatedAt: input.run.completedAt,
    });
    expect(await storage.findRun(input.run.id)).toEqual(input.run);
    expect(await storage.listRecentMessages(conversationId, 10)).toEqual(stored);
  });

  it("keeps the flow state and mode unless given, and sets them when given", async () => {
    const storage = await migrated();
    const { channel } = await seed(storage);
    const id = randomUUID();
    await storage.completeRun(runInput(channel, id, ["a"], { flowState: { n: 1 } }));
    await storage.completeRun(runInput(channel, id, ["b"]));
    expect(await storage.findConversation(id)).toMatchObject({ flowState: { n: 1 }, mode: "bot", nextTurn: 2 });
    await storage.completeRun(runInput(channel, id, ["c"], { mode: "livechat_waiting", flowState: null }));
    expect(await storage.findConversation(id)).toMatchObject({ flowState: null, mode: "livechat_waiting", nextTurn: 3 });
  });

  it("stores a run without messages", async () => {
    const storage = await migrated();
    const { channel } = await seed(storage);
    const id = randomUUID();
    const input = runInput(channel, id, []);
    expect(await storage.completeRun(input)).toEqual([]);
    expect((await storage.findConversation(id))?.nextTurn).toBe(0);
    expect(await storage.findRun(input.run.id)).toEqual(input.run);
  });

  it("is one transaction: a failing run insert allocates no turns and stores no messages", async () => {
    const storage = await migrated();
    const { channel } = await seed(storage);
    const id = randomUUID();
    const first = runInput(channel, id, ["a", "b"]);
    await storage.completeRun(first);
    const duplicate = runInput(channel, id, ["c", "d"]);
    duplicate.run.id = first.run.id;
    await expect(storage.completeRun(duplicate)).rejects.toThrow();
    expect((await storage.findConversation(id))?.nextTurn).toBe(2);
    expect((await storage.listRecentMessages(id, 10)).map((m) => m.content)).toEqual(["a", "b"]);
    const next = await storage.completeRun(runInput(channel, id, ["e"]));
    expect(next.map((m) => m.turnIndex)).toEqual([2]);
  });

  it("on SQLite, waits for a transaction Kysely holds open instead of running inside it", async () => {
    const storage = await migrated();
    const { channel, key } = await seed(storage);
    const id = randomUUID();
    const input = runInput(channel, id, ["a", "b"]);
    let pending: { run: Promise<unknown>; read: Promise<unknown> } | undefined;
    // An admin write holding the connection across awaits; it fails and rolls back.
    await expect(
      storage.db.transaction().execute(async (trx) => {
        await trx.insertInto("tenants").values({ id: "rolled-back", name: "x", created_at: NOW }).execute();
        pending = { run: storage.completeRun(input), read: storage.findKeyByHash(key.hash) };
        await new Promise((resolve) => setTimeout(resolve, 20));
        throw new Error("admin write failed");
      }),
    ).rejects.toThrow("admin write failed");
    // The run was neither refused ("cannot start a transaction within a transaction") nor
    // rolled back with the admin write: it ran after it.
    expect((await pending!.run as MessageRecord[]).map((m) => m.turnIndex)).toEqual([0, 1]);
    expect(await pending!.read).toMatchObject({ key: { id: key.id } });
    expect(await storage.findTenant("rolled-back")).toBeNull();
    expect(await storage.findRun(input.run.id)).toEqual(input.run);
    expect((await storage.listRecentMessages(id, 10)).map((m) => m.content)).toEqual(["a", "b"]);
  });

  it("inserts the conversation of a run that started it: an id that exists fails the whole run", async () => {
    const storage = await migrated();
    const { channel } = await seed(storage);
    const id = randomUUID();
    const first = runInput(channel, id, ["a", "b"], { flowState: { n: 1 } });
    first.conversation.isNew = true;
    expect((await storage.completeRun(first)).map((m) => m.turnIndex)).toEqual([0, 1]);
    expect(await storage.findConversation(id)).toMatchObject({ nextTurn: 2, flowState: { n: 1 }, mode: "bot" });
    const again = runInput(channel, id, ["c"]);
    again.conversation.isNew = true;
    await expect(storage.completeRun(again)).rejects.toThrow();
    expect(await storage.findRun(again.run.id)).toBeNull();
    expect((await storage.listRecentMessages(id, 10)).map((m) => m.content)).toEqual(["a", "b"]);
    expect((await storage.completeRun(runInput(channel, id, ["d"]))).map((m) => m.turnIndex)).toEqual([2]);
  });

  it("gives 20 concurrent runs on one conversation the turns 0..N-1, with no gap or duplicate", async () => {
    const storage = await migrated();
    const { channel } = await seed(storage);
    const id = randomUUID();
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => storage.completeRun(runInput(channel, id, [`u${i}`, `a${i}`, `b${i}`]))));
    const all = results.flat();
    expect(all).toHaveLength(60);
    expectContiguousRuns(all, 3);
    const stored = await storage.listRecentMessages(id, 1000);
    expect(stored.map((m) => m.turnIndex)).toEqual(Array.from({ length: 60 }, (_, i) => i));
    expect((await storage.findConversation(id))?.nextTurn).toBe(60);
    // Each run's user message comes first, right before its own replies.
    for (const result of results) expect(result.map((m) => m.content[0])).toEqual(["u", "a", "b"]);
  });

  it("stays contiguous with two connections writing at once from two threads, as two processes would", async () => {
    const file = tempFile();
    const storage = await migrated(file);
    const { channel } = await seed(storage);
    const id = randomUUID();
    const PER_THREAD = 15;

    // Each thread opens its own sqlite(file) from these very sources, bundled on the fly.
    const bundle = await build({
      entryPoints: [fileURLToPath(new URL("./index.ts", import.meta.url))],
      bundle: true,
      format: "cjs",
      platform: "node",
      target: "node20",
      packages: "external",
      write: false,
      logLevel: "silent",
    });
    const code = bundle.outputFiles[0]?.text ?? "";
    const gate = new Int32Array(new SharedArrayBuffer(4));
    const workerSource = `
      const { parentPort, workerData } = require("node:worker_threads");
      const load = require("node:module").createRequire(workerData.base);
      const module = { exports: {} };
      new Function("module", "exports", "require", workerData.code)(module, module.exports, load);
      const storage = module.exports.sqlite(workerData.file);
      parentPort.postMessage({ ready: true });
      Atomics.wait(new Int32Array(workerData.gate), 0, 0);
      Promise.allSettled(workerData.inputs.map((input) => storage.completeRun(input))).then(async (results) => {
        await storage.close();
        parentPort.postMessage({ results: results.map((r) => r.status === "fulfilled" ? { ok: r.value } : { error: String(r.reason) }) });
      });
    `;
    const threads = [0, 1].map((t) => {
      const inputs = Array.from({ length: PER_THREAD }, (_, i) => runInput(channel, id, [`t${t} u${i}`, `t${t} a${i}`]));
      const worker = new Worker(workerSource, {
        eval: true,
        workerData: { code, base: fileURLToPath(import.meta.url), file, gate: gate.buffer, inputs },
      });
      let ready!: () => void;
      const isReady = new Promise<void>((resolve) => (ready = resolve));
      const done = new Promise<{ ok?: MessageRecord[]; error?: string }[]>((resolve, reject) => {
        worker.on("message", (message: { ready?: boolean; results?: { ok?: MessageRecord[]; error?: string }[] }) => {
          if (message.ready) ready();
          if (message.results) resolve(message.results);
        });
        worker.on("error", reject);
        worker.on("exit", (code) => reject(new Error(`worker exited with ${code}`)));
      });
      return { isReady, done };
    });
    await Promise.all(threads.map((thread) => thread.isReady));
    Atomics.store(gate, 0, 1);
    Atomics.notify(gate, 0);
    const results = (await Promise.all(threads.map((thread) => thread.done))).flat();

    expect(results.filter((r) => r.error)).toEqual([]);
    const all = results.flatMap((r) => r.ok ?? []);
    expect(all).toHaveLength(2 * PER_THREAD * 2);
    expectContiguousRuns(all, 2);
    const stored = await storage.listRecentMessages(id, 1000);
    expect(stored.map((m) => m.turnIndex)).toEqual(Array.from({ length: 60 }, (_, i) => i));
    expect(new Set(stored.map((m) => m.content)).size).toBe(60);
    expect((await storage.findConversation(id))?.nextTurn).toBe(60);
  });
});

describe("listRecentMessages", () => {
  it("returns the most recent N messages of the conversation, oldest first", async () => {
    const storage = await migrated();
    const { channel } = await seed(storage);
    const id = randomUUID();
    const other = randomUUID();
    for (let i = 0; i < 5; i++) await storage.completeRun(runInput(channel, id, [`u${i}`, `a${i}`]));
    await storage.completeRun(runInput(channel, other, ["elsewhere"]));

    const recent = await storage.listRecentMessages(id, 3);
    expect(recent.map((m) => [m.turnIndex, m.content])).toEqual([
      [7, "a3"],
      [8, "u4"],
      [9, "a4"],
    ]);
    expect((await storage.listRecentMessages(id, 100)).map((m) => m.turnIndex)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect((await storage.listRecentMessages(other, 100)).map((m) => m.content)).toEqual(["elsewhere"]);
    expect(await storage.listRecentMessages(randomUUID(), 10)).toEqual([]);
  });

  it("reads back tool calls and live-chat fields", async () => {
    const storage = await migrated();
    const { channel } = await seed(storage);
    const id = randomUUID();
    const input = runInput(channel, id, ["q"]);
    input.messages.push(
      { ...newMessage("", "assistant"), toolCalls: [{ id: "call_1", name: "search", arguments: { q: "x" } }] },
      { ...newMessage("result", "tool"), toolCallId: "call_1" },
      { ...newMessage("human here", "assistant"), origin: "livechat", runId: null, stepId: null, nodeType: null, livechatMessageId: "lc-1", sender: "agent" },
    );
    await storage.completeRun(input);
    const stored = await storage.listRecentMessages(id, 10);
    expect(stored.map(({ conversationId, turnIndex, ...rest }) => rest)).toEqual(input.messages);
  });
});

describe("query plans", () => {
  /** A storage on its own connection that records every query it runs. */
  async function recording() {
    const file = tempFile();
    const seeded = await migrated(file);
    const fixtures = await seed(seeded);
    for (let i = 0; i < 3; i++) await seed(seeded);
    const conversationId = randomUUID();
    for (let i = 0; i < 5; i++) await seeded.completeRun(runInput(fixtures.channel, conversationId, ["u", "a"]));
    await seeded.completeRun(runInput(fixtures.channel, randomUUID(), ["other"]));

    const queries: CompiledQuery[] = [];
    const db = new Kysely<Database>({
      dialect: new SqliteDialect({ database: new BetterSqlite3(file) }),
      log: (event) => {
        if (event.level === "query") queries.push(event.query);
      },
    });
    const storage = new KyselyStorage(db);
    open.push(storage);

    /** The plan of the single query `action` runs on the storage. */
    async function planOf(action: () => Promise<unknown>): Promise<string[]> {
      queries.length = 0;
      await action();
      expect(queries).toHaveLength(1);
      const query = queries[0] as CompiledQuery;
      const { rows } = await storage.db.executeQuery<{ detail: string }>(
        CompiledQuery.raw(`EXPLAIN QUERY PLAN ${query.sql}`, [...query.parameters]),
      );
      return rows.map((row) => row.detail);
    }
    return { storage, fixtures, conversationId, planOf };
  }

  function expectIndexedOnly(plan: string[], tables: string[]) {
    expect(plan.filter((detail) => /^SCAN\b/.test(detail))).toEqual([]);
    for (const table of tables) expect(plan.some((detail) => new RegExp(`^SEARCH ${table} USING (COVERING |PRIMARY KEY|INDEX)`).test(detail)), `${table}: ${plan.join(" | ")}`).toBe(true);
  }

  it("findKeyByHash searches api_keys by its hash index and channels by primary key", async () => {
    const { storage, fixtures, planOf } = await recording();
    const plan = await planOf(async () => expect((await storage.findKeyByHash(fixtures.key.hash))?.channel.id).toBe(fixtures.channel.id));
    expectIndexedOnly(plan, ["api_keys", "channels"]);
    expect(plan.join(" ")).toMatch(/api_keys USING INDEX \S+ \(hash=\?\)/);
  });

  it("listRecentMessages walks the (conversation_id, turn_index) key, with no sort step", async () => {
    const { storage, conversationId, planOf } = await recording();
    const plan = await planOf(async () => expect(await storage.listRecentMessages(conversationId, 3)).toHaveLength(3));
    expectIndexedOnly(plan, ["messages"]);
    expect(plan.join(" ")).toContain("conversation_id=?");
    expect(plan.join(" ")).not.toMatch(/TEMP B-TREE/);
  });

  it("findConversation looks the conversation up by primary key", async () => {
    const { storage, conversationId, planOf } = await recording();
    const plan = await planOf(async () => expect((await storage.findConversation(conversationId))?.nextTurn).toBe(10));
    expectIndexedOnly(plan, ["conversations"]);
    expect(plan.join(" ")).toContain("(id=?)");
  });
});
