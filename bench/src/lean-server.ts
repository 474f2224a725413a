/**
 * The lean baseline (issue 22): the execute handler someone writes in an afternoon on
 * node:http and the raw driver, beside the bench's baseline (baseline-server.ts), which does
 * every check of the contract. Per request: parse the bearer key, SHA-256 it, look it up by
 * its hash (one indexed query, the key joined to its channel, only the columns it uses),
 * check that the key is not revoked and the channel active, JSON.parse the body, echo, store
 * the conversation, both messages and the run in one transaction, write the JSON answer.
 * No content-type, expiry, mode, type or environment check, no signature.
 *
 * History (`GET /public/v1/api/conversations/:id/messages?limit=50[&token_budget=N]`), the
 * same afternoon's handler: the key hashed and looked up with its channel as above (revoked,
 * inactive or not an api channel refused), the query's limit (1 to 200) and budget checked,
 * the conversation read by its id and refused unless of the key's channel and tenant (the
 * contract's `{ detail }` 404), the `limit` newest messages read by the primary key's index
 * and turned oldest first, the budget fitted from the newest, the contract's JSON written:
 * three prepared statements and one `JSON.stringify`, the same bytes as channelkit's answer.
 *
 * Streamed (`"stream": true`), it sends execute's events and keeps the one rule of the
 * contract a stream cannot do without: the conversation and the user message are stored
 * (one transaction) before `data-run`, whose conversation_id must resume at once; the reply
 * and the run (a second transaction) before `finish`.
 *
 * Same seeded database and tables as the other servers; on Postgres a pool of 10 clients
 * and plain parameterized queries (BEGIN … COMMIT on one client).
 */
import { createHash, randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import Database from "better-sqlite3";
import pg from "pg";
import { listenToParent, serverConfig, toParent } from "./shared.js";

interface Channel {
  revoked_at: string | null;
  type: string;
  livechat_messages: string;
  id: string;
  tenant_id: string;
  state: string;
  flow_name: string;
  environment: string;
}

/** Rows of one run: [sql, values] in order. */
type Writes = [string, unknown[]][];

const FIND = `SELECT k.revoked_at, c.id, c.tenant_id, c.type, c.state, c.flow_name, c.environment, c.livechat_messages
  FROM api_keys k JOIN channels c ON c.id = k.channel_id WHERE k.hash = $1`;
const FIND_CONVERSATION = "SELECT tenant_id, channel_id, mode, livechat_conversation_id FROM conversations WHERE id = $1";
const RECENT = `SELECT origin, role, content, timestamp, turn_index, token_count, run_id, step_id, node_type, tool_calls, tool_call_id,
  livechat_message_id, sender FROM messages WHERE conversation_id = $1 ORDER BY turn_index DESC LIMIT $2`;

interface Conversation {
  tenant_id: string;
  channel_id: string;
  mode: string;
  livechat_conversation_id: string | null;
}

interface Message {
  origin: string;
  role: string;
  content: string;
  timestamp: string;
  turn_index: number;
  token_count: number;
  run_id: string | null;
  step_id: string | null;
  node_type: string | null;
  tool_calls: string | null;
  tool_call_id: string | null;
  livechat_message_id: string | null;
  sender: string | null;
}
const CONVERSATION = `INSERT INTO conversations (id, tenant_id, channel_id, mode, flow_state, next_turn, created_at, updated_at)
  VALUES ($1, $2, $3, 'bot', '{"turn":1}', 2, $4, $5)`;
const MESSAGE = `INSERT INTO messages (conversation_id, turn_index, origin, role, content, timestamp, token_count, run_id, step_id, node_type)
  VALUES ($1, $2, 'agent', $3, $4, $5, $6, $7, $8, $9)`;
const RUN = `INSERT INTO runs (id, conversation_id, channel_id, tenant_id, status, flow_name, flow_version, result, execution_order,
  started_at, completed_at, duration_ms) VALUES ($1, $2, $3, $4, 'success', $5, '1', $6, $7, $8, $9, $10)`;

interface Db {
  find(hash: string): Channel | undefined | Promise<Channel | undefined>;
  conversation(id: string): Conversation | undefined | Promise<Conversation | undefined>;
  recent(conversationId: string, limit: number): Message[] | Promise<Message[]>;
  write(writes: Writes): void | Promise<void>;
  close(): Promise<void>;
}

function sqliteDb(path: string): Db {
  const db = new Database(path);
  db.pragma("busy_timeout = 5000");
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  const statements = new Map<string, Database.Statement>();
  const prepared = (text: string) => {
    let statement = statements.get(text);
    if (!statement) {
      statement = db.prepare(text.replace(/\$\d+/g, "?"));
      statements.set(text, statement);
    }
    return statement;
  };
  const write = db.transaction((writes: Writes) => {
    for (const [text, values] of writes) prepared(text).run(...values);
  });
  return {
    find: (hash) => prepared(FIND).get(hash) as Channel | undefined,
    conversation: (id) => prepared(FIND_CONVERSATION).get(id) as Conversation | undefined,
    recent: (id, limit) => prepared(RECENT).all(id, limit) as Message[],
    write,
    close: async () => void db.close(),
  };
}

function postgresDb(url: string): Db {
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  pool.on("error", () => undefined);
  return {
    find: async (hash) => (await pool.query<Channel>(FIND, [hash])).rows[0],
    conversation: async (id) => (await pool.query<Conversation>(FIND_CONVERSATION, [id])).rows[0],
    recent: async (id, limit) => (await pool.query<Message>(RECENT, [id, limit])).rows,
    async write(writes) {
      const client = await pool.connect();
      try {
        await client.query("BEGIN");
        for (const [text, values] of writes) await client.query(text, values);
        await client.query("COMMIT");
        client.release();
      } catch (error) {
        await client.query("ROLLBACK").catch(() => undefined);
        client.release(true);
        throw error;
      }
    },
    close: () => pool.end(),
  };
}

const config = serverConfig();
const db = config.store === "sqlite" ? sqliteDb(config.location) : postgresDb(config.location);

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

const fail = (res: ServerResponse, status: number, code: string) => send(res, status, { error: { code, message: code } });
const frame = (event: unknown) => `data: ${JSON.stringify(event)}\n\n`;

async function execute(req: IncomingMessage, res: ServerResponse, raw: string): Promise<void> {
  const key = req.headers.authorization?.startsWith("Bearer ") ? req.headers.authorization.slice(7) : "";
  if (!key) return fail(res, 401, "missing_api_key");
  const channel = await db.find(createHash("sha256").update(key).digest("hex"));
  if (!channel || channel.revoked_at !== null) return fail(res, 401, "invalid_api_key");
  if (channel.state !== "active") return fail(res, 409, `channel_${channel.state}`);
  let body: { payload?: unknown; stream?: unknown };
  try {
    body = JSON.parse(raw);
  } catch {
    return fail(res, 422, "validation_error");
  }
  const payload = body.payload;
  if (typeof payload !== "string" || payload === "") return fail(res, 422, "validation_error");

  const started = new Date();
  const runId = randomUUID();
  const conversationId = randomUUID();
  const reply = `Echo: ${payload}`;
  const result = JSON.stringify({ echo: payload, turn: 1 });
  const conversation: Writes = [
    [CONVERSATION, [conversationId, channel.tenant_id, channel.id, started.toISOString(), started.toISOString()]],
    [MESSAGE, [conversationId, 0, "user", payload, started.toISOString(), Math.ceil(payload.length / 4), runId, null, null]],
  ];
  const outcome = (): [Writes, Date] => {
    const done = new Date();
    const at = done.toISOString();
    const step = randomUUID();
    return [
      [
        [MESSAGE, [conversationId, 1, "assistant", reply, at, Math.ceil(reply.length / 4), runId, step, channel.flow_name]],
        [
          RUN,
          [
            runId,
            conversationId,
            channel.id,
            channel.tenant_id,
            channel.flow_name,
            result,
            `["${channel.flow_name}"]`,
            started.toISOString(),
            at,
            done.getTime() - started.getTime(),
          ],
        ],
      ],
      done,
    ];
  };

  if (body.stream === true) {
    await db.write(conversation);
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache, no-transform",
      connection: "keep-alive",
      "x-accel-buffering": "no",
      "x-vercel-ai-ui-message-stream": "v1",
    });
    res.write(frame({ type: "data-run", data: { run_id: runId, conversation_id: conversationId } }));
    // node:http holds writes until the end of the tick: the first event goes at once.
    if (res.socket?.writableCorked) res.socket.uncork();
    const textId = randomUUID();
    let events = frame({ type: "text-start", id: textId });
    for (const delta of reply.split(/(?<=\s)/)) events += frame({ type: "text-delta", id: textId, delta });
    res.write(events + frame({ type: "text-end", id: textId }));
    await db.write(outcome()[0]);
    res.end(frame({ type: "finish", finishReason: "stop" }));
    return;
  }

  const [writes, done] = outcome();
  await db.write([...conversation, ...writes]);
  send(res, 200, {
    run_id: runId,
    conversation_id: conversationId,
    status: "success",
    output: {
      result: JSON.parse(result),
      error: null,
      messages: [{ role: "assistant", content: reply }],
      metadata: {
        channel_id: channel.id,
        flow_id: channel.flow_name,
        flow_name: channel.flow_name,
        flow_version: "1",
        environment: channel.environment,
        execution_order: [channel.flow_name],
        started_at: started.toISOString(),
        completed_at: done.toISOString(),
        livechat_mode: null,
      },
    },
    usage: { total_nodes: 1, duration_ms: done.getTime() - started.getTime() },
    error: null,
  });
}

const HISTORY = /^\/public\/v1\/api\/conversations\/([^/]+)\/messages$/;

/** A query parameter as an integer in [min, max], `fallback` when absent, NaN when not one. */
function integer(query: URLSearchParams, name: string, fallback: number, min: number, max: number): number {
  const raw = query.get(name);
  if (raw === null) return fallback;
  const value = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  return value >= min && value <= max ? value : Number.NaN;
}

async function history(req: IncomingMessage, res: ServerResponse, sessionId: string, query: URLSearchParams): Promise<void> {
  const key = req.headers.authorization?.startsWith("Bearer ") ? req.headers.authorization.slice(7) : "";
  if (!key) return fail(res, 401, "missing_api_key");
  const channel = await db.find(createHash("sha256").update(key).digest("hex"));
  if (!channel || channel.revoked_at !== null) return fail(res, 401, "invalid_api_key");
  if (channel.type !== "api") return fail(res, 403, "wrong_channel_type");
  if (channel.state !== "active") return fail(res, 409, `channel_${channel.state}`);
  const limit = integer(query, "limit", 50, 1, 200);
  const budget = integer(query, "token_budget", 0, 0, Number.MAX_SAFE_INTEGER);
  if (Number.isNaN(limit) || Number.isNaN(budget)) return fail(res, 422, "validation_error");
  const conversation = await db.conversation(sessionId.toLowerCase());
  if (!conversation || conversation.tenant_id !== channel.tenant_id || conversation.channel_id !== channel.id) {
    return send(res, 404, { detail: `No conversation found for session id ${sessionId}` });
  }
  const rows = await db.recent(sessionId.toLowerCase(), limit);
  // Newest first from the index; the budget keeps the newest that fit, shown oldest first.
  let end = rows.length;
  if (budget > 0) {
    let total = 0;
    for (end = 0; end < rows.length && total + Number((rows[end] as Message).token_count) <= budget; end++) total += Number((rows[end] as Message).token_count);
  }
  const messages = [];
  let tokens = 0;
  for (let i = end - 1; i >= 0; i--) {
    const m = rows[i] as Message;
    const byRun = m.origin === "agent";
    const tokenCount = Number(m.token_count);
    tokens += tokenCount;
    messages.push({
      origin: m.origin,
      role: m.role,
      content: m.content,
      timestamp: m.timestamp,
      turn_index: Number(m.turn_index),
      token_count: tokenCount,
      run_id: byRun ? m.run_id : null,
      step_id: byRun ? m.step_id : null,
      node_type: byRun ? m.node_type : null,
      tool_calls: m.tool_calls === null ? null : JSON.parse(m.tool_calls),
      tool_call_id: m.tool_call_id,
      livechat_message_id: m.livechat_message_id,
      sender: m.sender,
    });
  }
  const status = (JSON.parse(channel.livechat_messages) as Record<string, string>)[conversation.mode];
  send(res, 200, {
    session_id: sessionId,
    messages,
    total_messages: messages.length,
    total_tokens: tokens,
    mode: conversation.mode,
    livechat_status_message: status ?? null,
    livechat_conversation_id: conversation.livechat_conversation_id,
  });
}

const server = createServer((req, res) => {
  const url = req.url ?? "/";
  const q = url.indexOf("?");
  const found = req.method === "GET" ? HISTORY.exec(q < 0 ? url : url.slice(0, q)) : null;
  if (found) {
    req.resume();
    history(req, res, decodeURIComponent(found[1] as string), new URLSearchParams(q < 0 ? "" : url.slice(q + 1))).catch((error: unknown) => {
      console.error("lean: unexpected error", error);
      fail(res, 500, "runtime_error");
    });
    return;
  }
  if (req.method !== "POST" || req.url !== "/public/v1/api/execute") {
    req.resume();
    return fail(res, 404, "not_found");
  }
  let raw = "";
  req.setEncoding("utf8");
  req.on("data", (chunk: string) => {
    raw += chunk;
  });
  req.on("end", () => {
    execute(req, res, raw).catch((error: unknown) => {
      console.error("lean: unexpected error", error);
      if (res.headersSent) res.destroy();
      else fail(res, 500, "runtime_error");
    });
  });
});

server.listen(0, "127.0.0.1", () => {
  listenToParent(async () => {
    server.close();
    server.closeAllConnections();
    await db.close();
  });
  toParent({ type: "ready", port: (server.address() as AddressInfo).port });
});
