import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ChannelService, createChannelService } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { sqlite } from "@channelkit/kysely";
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
  const storage = sqlite(join(dir, "channelkit.db"));
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

it("a new conversation: the key lookup and one transaction for the whole run", async () => {
  const { statements } = await execute({ payload: "hello" });
  expect(statements).toEqual(["select api_keys", ...BEGIN, "insert conversations", "insert messages", "insert runs", "commit"]);
});

it("an existing conversation: its ticket and its claim are one statement, which checks the conversation, then the outcome", async () => {
  const { conversationId } = await execute({ payload: "hello" });
  const { statements } = await execute({ payload: "again", conversation_id: conversationId });
  expect(statements).toEqual([
    "select api_keys",
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

/** A statement by what it does: `begin`, `commit`, `select api_keys`, `insert messages`, `update runs`. */
function label(sql: string): string {
  const plain = sql.replace(/"/g, "").toLowerCase().trim();
  const verb = plain.match(/^(\w+)/)?.[1] ?? plain;
  if (verb === "select") return `select ${plain.match(/\bfrom (\w+)/)?.[1]}`;
  if (verb === "insert") return `insert ${plain.match(/^insert into (\w+)/)?.[1]}`;
  if (verb === "update") return `update ${plain.match(/^update (\w+)/)?.[1]}`;
  return verb;
}
