/**
 * The query plans of the statements channelkit runs on the request path, captured from the
 * storage itself (a Kysely logger records the SQL it sends) and explained on the seeded
 * database. A plan that scans a table or sorts is flagged.
 */
import { kyselyStorage } from "@channelkit/kysely";
import type { Database } from "@channelkit/kysely";
import BetterSqlite3 from "better-sqlite3";
import { type CompiledQuery, Kysely, PostgresDialect, SqliteDialect } from "kysely";
import pg from "pg";
import type { Seed } from "./seed.js";
import type { StoreKind } from "./shared.js";
import { type BeginRunInput, hashApiKey, type RunTicket, type Storage } from "@channelkit/core";

export interface QueryPlan {
  operation: string;
  sql: string;
  plan: string[];
  /** True when the plan reads a whole table or index, or sorts. */
  scans: boolean;
}

function badLine(store: StoreKind, line: string): boolean {
  if (store === "sqlite") return /^\s*(SCAN\b|USE TEMP B-TREE)/.test(line.replace(/^[-|` ]+/, ""));
  return /Seq Scan|\bSort\b/.test(line);
}

export async function explainRequestPath(store: StoreKind, location: string, seed: Seed): Promise<QueryPlan[]> {
  const captured: { operation: string; query: CompiledQuery }[] = [];
  let operation = "";
  const sqlite = store === "sqlite" ? new BetterSqlite3(location) : null;
  const pool = store === "postgres" ? new pg.Pool({ connectionString: location, max: 1 }) : null;
  const dialect = sqlite ? new SqliteDialect({ database: sqlite }) : new PostgresDialect({ pool: pool as pg.Pool });
  const db = new Kysely<Database>({
    dialect,
    log(event) {
      if (event.level === "query") captured.push({ operation, query: event.query });
    },
  });
  const storage = kyselyStorage(db);
  try {
    operation = "authenticate: findKeyByHash";
    await storage.findKeyByHash(await hashApiKey(seed.echoKey));
    operation = "history: findConversation";
    await storage.findConversation(seed.conversation10k);
    operation = "history: listRecentMessages (10,000 messages, limit 50)";
    await storage.listRecentMessages(seed.conversation10k, 50);
    operation = "";
    const found = await storage.findKeyByHash(await hashApiKey(seed.echoKey));
    if (!found) throw new Error("bench: the echo key is missing");
    const at = new Date().toISOString();
    const conversation = { id: crypto.randomUUID(), tenantId: found.channel.tenantId, channelId: found.channel.id, isNew: true };
    const message = (runId: string, role: "user" | "assistant") =>
      ({
        origin: "agent",
        role,
        content: "plan",
        timestamp: at,
        tokenCount: 1,
        runId,
        stepId: null,
        nodeType: null,
        toolCalls: null,
        toolCallId: null,
        livechatMessageId: null,
        sender: null,
        metadata: null,
      }) as const;
    for (const isNew of [true, false]) {
      const runId = crypto.randomUUID();
      const run = {
        id: runId,
        conversationId: conversation.id,
        channelId: found.channel.id,
        tenantId: found.channel.tenantId,
        status: "running" as const,
        flowName: "echo",
        flowVersion: "1",
        result: null,
        error: null,
        executionOrder: ["echo"],
        startedAt: at,
        completedAt: at,
        durationMs: 0,
      };
      const which = isNew ? "new conversation" : "existing conversation";
      operation = `execute (${which}): beginRun`;
      const begun = await ticketOf(storage, { conversation: { ...conversation, isNew }, run, userMessage: message(runId, "user"), now: at, leaseUntil: at });
      operation = `execute (${which}): completeRun`;
      await storage.completeRun({
        run: { ...run, status: "success" },
        conversation: { ...conversation, isNew },
        ticket: begun.ticket,
        claimed: true,
        messages: [message(runId, "assistant")],
        claimUntil: at,
      });
    }
    operation = "waiting run: claimTurn";
    await storage.claimTurn({
      conversation: { ...conversation, isNew: false },
      ticket: 99,
      now: at,
      leaseUntil: at,
      claimUntil: at,
      userMessage: message(crypto.randomUUID(), "user"),
      run: {
        id: crypto.randomUUID(),
        conversationId: conversation.id,
        channelId: found.channel.id,
        tenantId: found.channel.tenantId,
        status: "running",
        flowName: "echo",
        flowVersion: "1",
        result: null,
        error: null,
        executionOrder: [],
        startedAt: at,
        completedAt: at,
        durationMs: 0,
      },
    });

    const plans: QueryPlan[] = [];
    for (const { operation: op, query } of captured) {
      if (op === "" || !/^\s*(select|insert|update|delete)/i.test(query.sql)) continue;
      let plan: string[];
      if (sqlite) {
        const rows = sqlite.prepare(`EXPLAIN QUERY PLAN ${query.sql}`).all(...(query.parameters as unknown[])) as { detail: string }[];
        plan = rows.map((row) => row.detail);
      } else {
        const result = await (pool as pg.Pool).query<{ "QUERY PLAN": string }>(`EXPLAIN ${query.sql}`, query.parameters as unknown[]);
        plan = result.rows.map((row) => row["QUERY PLAN"]);
      }
      plans.push({ operation: op, sql: query.sql, plan, scans: plan.some((line) => badLine(store, line)) });
    }
    return plans;
  } finally {
    await db.destroy();
  }
}

/** The ticket of a run that must get one (`beginRun` answers null only for a conversation that is not the run's). */
async function ticketOf(storage: Pick<Storage, "beginRun">, input: BeginRunInput): Promise<RunTicket> {
  const ticket = await storage.beginRun(input);
  if (ticket === null) throw new Error(`beginRun: conversation ${input.conversation.id} is not the run's`);
  return ticket;
}
