import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ChannelService, createChannelService } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { type KyselyStorage, sqlite } from "@channelkit/kysely";
import BetterSqlite3 from "better-sqlite3";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type RunningServer, serve } from "./serve.js";

/*
 * The statements SQLite runs per JSON execute of the echo flow, through `sqlite()`, a real
 * service and a real HTTP server: every statement better-sqlite3 runs (`BEGIN` and `COMMIT`
 * included), counted on its statement class. The Postgres side is round-trips.postgres.test.ts;
 * docs/benchmarks.md ("Round trips on Postgres", "Why the code looks like this") says why
 * each is needed.
 */
const SECRET_KEY = "5f".repeat(32);
const EXECUTE = "/public/v1/api/execute";

let dir: string;
let service: ChannelService;
let server: RunningServer;
let key: string;
let storage: KyselyStorage;
/** The statements run since the last reset, labelled. */
const ran: string[] = [];

beforeAll(async () => {
  const probe = new BetterSqlite3(":memory:");
  const statement = Object.getPrototypeOf(probe.prepare("select 1")) as Record<string, (...args: unknown[]) => unknown>;
  probe.close();
  for (const method of ["run", "all", "get", "iterate"]) {
    const original = statement[method] as (...args: unknown[]) => unknown;
    statement[method] = function (this: { source: string }, ...args: unknown[]) {
      ran.push(label(this.source));
      return original.apply(this, args);
    };
  }
  dir = mkdtempSync(join(tmpdir(), "channelkit-statements-"));
  storage = sqlite(join(dir, "channelkit.db"));
  await storage.migrate();
  service = await createChannelService({ storage, flows: demoFlows, secretKey: SECRET_KEY, logger: { warn() {}, error() {} } });
  server = await serve(service, { port: 0 });
  const { tenant } = await service.admin.createTenant({ name: "statements" });
  key = (await service.admin.createChannel({ tenantId: tenant.id, flow: "echo" })).api_key;
});

afterAll(async () => {
  await server?.close();
  await service?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** One JSON execute, alone on the server; the statements it ran, from the request to its answer read whole. */
async function execute(body: Record<string, unknown>): Promise<{ conversationId: string; statements: string[] }> {
  ran.length = 0;
  const response = await fetch(server.url + EXECUTE, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ stream: false, ...body }),
  });
  const answer = (await response.json()) as { conversation_id: string; status: string };
  expect(response.status, JSON.stringify(answer)).toBe(200);
  expect(answer.status).toBe("success");
  // Nothing of the run is written after its answer: a statement run late would show here.
  await new Promise((resolve) => setTimeout(resolve, 50));
  return { conversationId: answer.conversation_id, statements: ran.splice(0) };
}

/**
 * A transaction's start. The busy timeout is off for `BEGIN IMMEDIATE`, so that another
 * process's write lock is waited for without blocking the event loop (docs/benchmarks.md,
 * "Two instances on one database"), and stays off until a statement that may wait for a lock
 * runs outside a transaction: the admin operations' transactions in `beforeAll` turned it off,
 * and a run's reads leave it so (sqlite.test.ts, "the busy timeout").
 */
const BEGIN = ["begin"];

/**
 * Whether another connection committed since the last request (`PRAGMA data_version`): the key
 * and its channel read once are kept while nothing they were read from changed
 * (docs/benchmarks.md, "The key lookup kept while nothing changed").
 */
const KEY_KEPT = ["pragma data_version"];

it("a new conversation: the key lookup and one transaction for the whole run", async () => {
  // The first request since the channel's creation reads its key.
  const { statements } = await execute({ payload: "hello" });
  expect(statements).toEqual([...KEY_KEPT, "select api_keys", ...BEGIN, "insert conversations", "insert messages", "insert runs", "commit"]);
  // The next ones find it kept.
  expect((await execute({ payload: "hello" })).statements).toEqual([...KEY_KEPT, ...BEGIN, "insert conversations", "insert messages", "insert runs", "commit"]);
});

it("a change to the keys or channels made by this process is read by its very next request", async () => {
  const { channels } = await service.admin.listChannels({});
  const channelId = channels[0]?.id as string;
  const post = () =>
    fetch(server.url + EXECUTE, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ payload: "hello", stream: false }),
    });
  expect((await post()).status).toBe(200);

  // Through the storage's own statements (an admin operation)...
  await service.admin.updateChannel(channelId, { state: "inactive" });
  ran.length = 0;
  const inactive = await post();
  expect(await inactive.json()).toMatchObject({ error: { code: "channel_inactive" } });
  expect(ran).toEqual([...KEY_KEPT, "select api_keys"]);
  await service.admin.updateChannel(channelId, { state: "active" });
  expect((await post()).status).toBe(200);

  // ...and through your own, on `storage.db` (Kysely's driver, on the same connection).
  await storage.db.updateTable("api_keys").set({ revoked_at: new Date().toISOString() }).where("channel_id", "=", channelId).execute();
  ran.length = 0;
  const revoked = await post();
  expect(revoked.status).toBe(401);
  // Then the failed authentication is counted against its rate limit.
  expect(ran.slice(0, 2)).toEqual([...KEY_KEPT, "select api_keys"]);
  await storage.db.updateTable("api_keys").set({ revoked_at: null }).where("channel_id", "=", channelId).execute();
  expect((await post()).status).toBe(200);
});

it("an existing conversation: its ticket and its claim are one statement, which checks the conversation, then the outcome", async () => {
  const { conversationId } = await execute({ payload: "hello" });
  const { statements } = await execute({ payload: "again", conversation_id: conversationId });
  expect(statements).toEqual([
    ...KEY_KEPT,
    // The claim, committed before the flow runs: the ticket, the turn and the lease in one update.
    ...BEGIN,
    "update conversations",
    "insert messages",
    "commit",
    // The outcome, with the run's row (written with it on SQLite: KyselyStorage#runRowAtClaim).
    ...BEGIN,
    "update conversations",
    "insert messages",
    "insert runs",
    "commit",
  ]);
  const response = await fetch(`${server.url}/public/v1/api/conversations/${conversationId}/messages`, { headers: { authorization: `Bearer ${key}` } });
  const { messages } = (await response.json()) as { messages: { role: string; content: string; turn_index: number }[] };
  expect(messages.map((m) => [m.role, m.turn_index])).toEqual([
    ["user", 0],
    ["assistant", 1],
    ["user", 2],
    ["assistant", 3],
  ]);
  expect(messages[2]?.content).toBe("again");
});

/** A statement by what it does: `begin`, `commit`, `select api_keys`, `insert messages`, `update runs`, `pragma data_version`. */
function label(sql: string): string {
  const plain = sql.replace(/"/g, "").toLowerCase().trim();
  const verb = plain.match(/^(\w+)/)?.[1] ?? plain;
  if (verb === "select") return `select ${plain.match(/\bfrom (\w+)/)?.[1]}`;
  if (verb === "insert") return `insert ${plain.match(/^insert into (\w+)/)?.[1]}`;
  if (verb === "update") return `update ${plain.match(/^update (\w+)/)?.[1]}`;
  if (verb === "pragma") return `pragma ${plain.match(/^pragma (\w+)/)?.[1]}`;
  return verb;
}
