/**
 * The baseline: the irreducible work of the same routes, written by hand on node:http and
 * the raw driver. It answers the same bytes on the paths the benchmark drives (execute of
 * the `echo` and `slow` flows on new conversations, JSON and SSE, with and without a
 * signature; history; a rejected key; the webhook's newMessage and the widget's chat on
 * existing conversations) and skips what the benchmark never asks for (resuming execute's
 * conversations, the other flows, webhook signatures, the AI SDK form of the widget's chat).
 * What it keeps: hash the key with SHA-256 and look it up by index, check the key, the origin
 * and the channel, read and parse the body, verify the HMAC (opening the sealed secret),
 * store the conversation, both messages and the run in one transaction, write the answer.
 * Runs of one conversation take turns (in this process: it runs as one).
 *
 * A streamed run honours the contract's rule that a conversation exists from its first run's
 * start (decisions.md, "Runs and conversations"): the conversation_id sent in `data-run`
 * resumes it and reads its history at once. So a stream stores the conversation and the user
 * message in one transaction BEFORE it sends `data-run`, then the reply and the run in a
 * second transaction before `finish`, as channelkit does (until issue 22 it stored all of it
 * in one transaction after the last text event: a first event channelkit cannot match).
 * A JSON answer stores everything in one transaction before it answers.
 */
import { createDecipheriv, createHash, createHmac, randomUUID, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { type ConversationRow, type KeyRow, type MessageRow, type NewMessageRow, openBaselineStore, type StoredRun } from "./baseline-store.js";
import { BENCH_SECRET_KEY, listenToParent, serverConfig, toParent } from "./shared.js";

const config = serverConfig();
const store = openBaselineStore(config.store, config.location);
const masterKey = Buffer.from(BENCH_SECRET_KEY, "hex");
const FLOW_ID = randomUUID();

const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache, no-transform",
  connection: "keep-alive",
  "x-accel-buffering": "no",
  "x-vercel-ai-ui-message-stream": "v1",
};
const JSON_TYPE = { "content-type": "application/json; charset=utf-8" };
const HISTORY_PATH = /^\/public\/v1\/api\/conversations\/([^/]+)\/messages$/;
const WEBHOOK_NEW_MESSAGE = /^\/channels\/webhook\/([^/]+)\/newMessage$/;

class Refusal extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
  ) {
    super(code);
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { ...JSON_TYPE, "content-length": Buffer.byteLength(text) });
  res.end(text);
}

async function authenticate(req: IncomingMessage, publicOnly = false): Promise<KeyRow> {
  const header = req.headers.authorization;
  const match = header ? /^Bearer +(\S+)$/i.exec(header) : null;
  if (!match) throw new Refusal(401, "missing_api_key");
  const presented = match[1] as string;
  if (!/^(svc_live_|svc_test_|svc_pub_)[A-Za-z0-9_-]{40,256}$/.test(presented)) throw new Refusal(401, "invalid_api_key");
  if (publicOnly && !presented.startsWith("svc_pub_")) throw new Refusal(403, "public_key_required");
  const hash = createHash("sha256").update(presented).digest("hex");
  const key = await store.findKey(hash);
  if (!key || !timingSafeEqual(Buffer.from(key.hash), Buffer.from(hash))) throw new Refusal(401, "invalid_api_key");
  if (key.revoked_at !== null || (key.expires_at !== null && Date.parse(key.expires_at) <= Date.now())) throw new Refusal(401, "invalid_api_key");
  if ((key.prefix === "svc_pub_") !== (key.mode === "public")) throw new Refusal(401, "invalid_api_key");
  const origin = req.headers.origin;
  if (key.prefix === "svc_pub_" && origin !== undefined && !(JSON.parse(key.allowed_origins) as string[]).includes(origin)) {
    throw new Refusal(403, "origin_not_allowed");
  }
  if (key.type !== "api") throw new Refusal(403, "wrong_channel_type");
  if (key.state !== "active") throw new Refusal(key.state === "archived" ? 410 : 409, `channel_${key.state}`);
  if (key.key_environment !== key.environment) throw new Refusal(403, "environment_mismatch");
  return key;
}

/**
 * Runs of one conversation take turns, in arrival order: each waits for the previous one's
 * release. In this process only (the baseline runs as one); channelkit's turns hold across
 * instances, through the database.
 */
const turns = new Map<string, Promise<void>>();
async function takeTurn(conversationId: string): Promise<() => void> {
  const previous = turns.get(conversationId);
  let release: () => void = () => undefined;
  const mine = new Promise<void>((resolve) => {
    release = resolve;
  });
  const tail = previous ? previous.then(() => mine) : mine;
  turns.set(conversationId, tail);
  if (previous) await previous;
  return () => {
    release();
    if (turns.get(conversationId) === tail) turns.delete(conversationId);
  };
}

const requireJson = (req: IncomingMessage) => {
  if (req.headers["content-type"]?.split(";")[0]?.trim().toLowerCase() !== "application/json") throw new Refusal(415, "unsupported_media_type");
};

function parseBody(body: Buffer): Record<string, unknown> {
  let input: unknown;
  try {
    input = JSON.parse(body.toString("utf8"));
  } catch {
    throw new Refusal(422, "validation_error");
  }
  if (typeof input !== "object" || input === null || Array.isArray(input)) throw new Refusal(422, "validation_error");
  return input as Record<string, unknown>;
}

/** A user's text: 1 to 10,000 characters. */
function userText(value: unknown): string {
  if (typeof value !== "string" || value.length === 0 || value.length > 10_000) throw new Refusal(422, "validation_error");
  return value;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

function openSecret(sealed: string): string {
  const [, iv, data] = sealed.split(":");
  const bytes = Buffer.from(data as string, "base64url");
  const decipher = createDecipheriv("aes-256-gcm", masterKey, Buffer.from(iv as string, "base64url"));
  decipher.setAuthTag(bytes.subarray(bytes.length - 16));
  return Buffer.concat([decipher.update(bytes.subarray(0, bytes.length - 16)), decipher.final()]).toString("utf8");
}

function verifySignature(header: string | undefined, sealed: string | null, body: Buffer): void {
  if (sealed === null) throw new Refusal(503, "signing_secret_unavailable");
  if (header === undefined) throw new Refusal(401, "signature_required");
  const match = /^t=(\d{1,15}),v1=([0-9a-f]{64})$/.exec(header);
  if (!match) throw new Refusal(401, "invalid_signature");
  const expected = createHmac("sha256", openSecret(sealed)).update(`${match[1]}.`).update(body).digest();
  if (!timingSafeEqual(expected, Buffer.from(match[2] as string, "hex"))) throw new Refusal(401, "invalid_signature");
  if (Math.abs(Date.now() / 1000 - Number(match[1])) > 300) throw new Refusal(401, "signature_expired");
}

const frame = (event: unknown) => `data: ${JSON.stringify(event)}\n\n`;
const tokens = (content: string) => Math.ceil(content.length / 4);

function message(
  conversationId: string,
  turn: number,
  role: string,
  content: string,
  at: string,
  runId: string,
  step: { id: string; type: string } | null,
): NewMessageRow {
  return {
    conversation_id: conversationId,
    turn_index: turn,
    origin: "agent",
    role,
    content,
    timestamp: at,
    token_count: tokens(content),
    run_id: runId,
    step_id: step?.id ?? null,
    node_type: step?.type ?? null,
    tool_calls: null,
    tool_call_id: null,
    livechat_message_id: null,
    sender: null,
  };
}

async function execute(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const channel = await authenticate(req);
  if (req.headers["content-type"]?.split(";")[0]?.trim().toLowerCase() !== "application/json") throw new Refusal(415, "unsupported_media_type");
  const body = await readBody(req);
  if (channel.require_signature === 1) verifySignature(req.headers["x-service-signature"] as string | undefined, channel.signing_secret_encrypted, body);
  let input: { payload?: unknown; stream?: unknown };
  try {
    input = JSON.parse(body.toString("utf8"));
  } catch {
    throw new Refusal(422, "validation_error");
  }
  const payload = input.payload;
  if (typeof payload !== "string" || payload.length === 0 || payload.length > 10_000) throw new Refusal(422, "validation_error");
  const stream = typeof input.stream === "boolean" ? input.stream : channel.default_stream === 1;

  const startedAt = new Date();
  const runId = randomUUID();
  const conversationId = randomUUID();
  const stepId = randomUUID();
  const slow = channel.flow_name === "slow";
  const words = slow ? Array.from({ length: 50 }, (_, i) => (i === 49 ? `word${i + 1}` : `word${i + 1} `)) : `Echo: ${payload}`.split(/(?<=\s)/);
  const reply = words.join("");
  const result = slow ? { words: 50 } : { echo: payload, turn: 1 };

  const record = (status: string, content: string): StoredRun => {
    const completedAt = new Date();
    const at = completedAt.toISOString();
    return {
      conversation: {
        id: conversationId,
        tenant_id: channel.tenant_id,
        channel_id: channel.id,
        flow_state: slow ? "null" : '{"turn":1}',
        next_turn: 2,
        at: startedAt.toISOString(),
      },
      messages: [
        message(conversationId, 0, "user", payload, startedAt.toISOString(), runId, null),
        message(conversationId, 1, "assistant", content, at, runId, { id: stepId, type: channel.flow_name }),
      ],
      run: {
        id: runId,
        status,
        flow_name: channel.flow_name,
        flow_version: "1",
        result: status === "success" ? JSON.stringify(result) : null,
        error: null,
        execution_order: `["${channel.flow_name}"]`,
        started_at: startedAt.toISOString(),
        completed_at: at,
        duration_ms: completedAt.getTime() - startedAt.getTime(),
      },
    };
  };

  if (!stream) {
    const stored = record("success", reply);
    await store.storeRun(stored);
    send(res, 200, {
      run_id: runId,
      conversation_id: conversationId,
      status: "success",
      output: {
        result,
        error: null,
        messages: [{ role: "assistant", content: reply }],
        metadata: {
          channel_id: channel.id,
          flow_id: FLOW_ID,
          flow_name: channel.flow_name,
          flow_version: "1",
          environment: channel.environment,
          execution_order: [channel.flow_name],
          started_at: stored.run.started_at,
          completed_at: stored.run.completed_at,
          livechat_mode: null,
        },
      },
      usage: { total_nodes: 1, duration_ms: stored.run.duration_ms },
      error: null,
    });
    return;
  }

  // Streamed, as the contract has it: the conversation and the user message are stored
  // before `data-run` (its conversation_id resumes it at once), the reply and the run before
  // `finish` (streamRun, for the echo flow).
  if (!slow) return streamRun(req, res, channel, null, payload);
  // The slow flow: one word every 100 ms; a client that leaves cancels the run, stored as such.
  const at = startedAt.toISOString();
  await store.openRun({
    conversation: { id: conversationId, tenant_id: channel.tenant_id, channel_id: channel.id, flow_state: "null", next_turn: 1, at },
    conversationId,
    message: message(conversationId, 0, "user", payload, at, runId, null),
  });
  const close = (status: string, content: string) => {
    const { messages, run } = record(status, content);
    return store.closeRun({
      conversationId,
      flowState: "null",
      at: run.completed_at,
      messages: messages.slice(1),
      run: { ...run, conversation_id: conversationId, channel_id: channel.id, tenant_id: channel.tenant_id },
    });
  };
  res.writeHead(200, SSE_HEADERS);
  res.write(frame({ type: "data-run", data: { run_id: runId, conversation_id: conversationId } }));
  // node:http holds writes until the end of the tick; the first event is sent at once.
  if (res.socket?.writableCorked) res.socket.uncork();
  const textId = randomUUID();
  res.write(frame({ type: "text-start", id: textId }));
  let sent = 0;
  let timer: NodeJS.Timeout | undefined;
  const next = () => {
    if (sent === words.length) {
      res.write(frame({ type: "text-end", id: textId }));
      Promise.resolve(close("success", reply)).then(
        () => res.end(frame({ type: "finish", finishReason: "stop" })),
        () => res.destroy(),
      );
      return;
    }
    res.write(frame({ type: "text-delta", id: textId, delta: words[sent++] }));
    timer = setTimeout(next, 100);
  };
  res.once("close", () => {
    if (sent === words.length || res.writableFinished) return;
    clearTimeout(timer);
    const partial = words.slice(0, sent).join("");
    sent = words.length;
    void Promise.resolve(close("cancelled", partial)).catch(() => undefined);
  });
  timer = setTimeout(next, 100);
}

const HTML_ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (char) => HTML_ESCAPES[char] as string);

/** The echo flow's turn counter, from a conversation's stored flow state. */
const echoTurn = (conversation: ConversationRow) => ((JSON.parse(conversation.flow_state ?? "null") as { turn?: number } | null)?.turn ?? 0) + 1;

/**
 * A streamed echo run on a conversation of `channel`, the one of `existing` or a new one:
 * the conversation (when new) and the user message stored in one transaction before
 * `data-run` (a conversation exists from its first run's start, and the id sent resumes it at
 * once); the events; then the reply, the flow state and the run in a second transaction
 * before `finish`. Runs of an existing conversation take turns.
 */
async function streamRun(req: IncomingMessage, res: ServerResponse, channel: KeyRow, existing: string | null, payload: string): Promise<void> {
  const release = existing === null ? null : await takeTurn(existing);
  try {
    const startedAt = new Date();
    const runId = randomUUID();
    let conversationId: string = randomUUID();
    let turn = 1;
    if (existing !== null) {
      const conversation = await store.findConversation(existing);
      if (!conversation || conversation.tenant_id !== channel.tenant_id || conversation.channel_id !== channel.id)
        throw new Refusal(404, "conversation_not_found");
      conversationId = conversation.id;
      turn = echoTurn(conversation);
    }
    const at = startedAt.toISOString();
    await store.openRun({
      conversation:
        existing === null ? { id: conversationId, tenant_id: channel.tenant_id, channel_id: channel.id, flow_state: "null", next_turn: 1, at } : null,
      conversationId,
      message: message(conversationId, 0, "user", payload, at, runId, null),
    });
    const origin = req.headers.origin;
    res.writeHead(200, origin === undefined ? SSE_HEADERS : { ...SSE_HEADERS, "access-control-allow-origin": origin, vary: "Origin" });
    res.write(frame({ type: "data-run", data: { run_id: runId, conversation_id: conversationId } }));
    // The first event goes at once, not at the end of the tick (channelkit's adapter does the same).
    if (res.socket?.writableCorked) res.socket.uncork();
    const words = `Echo: ${payload}`.split(/(?<=\s)/);
    const reply = words.join("");
    const textId = randomUUID();
    let events = frame({ type: "text-start", id: textId });
    for (const delta of words) events += frame({ type: "text-delta", id: textId, delta });
    res.write(events + frame({ type: "text-end", id: textId }));
    const completedAt = new Date();
    const done = completedAt.toISOString();
    await store.closeRun({
      conversationId,
      flowState: JSON.stringify({ turn }),
      at: done,
      messages: [message(conversationId, 0, "assistant", reply, done, runId, { id: randomUUID(), type: channel.flow_name })],
      run: {
        id: runId,
        conversation_id: conversationId,
        channel_id: channel.id,
        tenant_id: channel.tenant_id,
        status: "success",
        flow_name: channel.flow_name,
        flow_version: "1",
        result: JSON.stringify({ echo: payload, turn }),
        error: null,
        execution_order: `["${channel.flow_name}"]`,
        started_at: at,
        completed_at: done,
        duration_ms: completedAt.getTime() - startedAt.getTime(),
      },
    });
    res.end(frame({ type: "finish", finishReason: "stop" }));
  } finally {
    release?.();
  }
}

/** `POST /public/widget/chat`, the `{ payload, conversation_id? }` form the widget sends: always streamed. */
async function widgetChat(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const channel = await authenticate(req, true);
  requireJson(req);
  const input = parseBody(await readBody(req));
  const payload = userText(input.payload);
  const id = input.conversation_id;
  if (id !== undefined && id !== null && typeof id !== "string") throw new Refusal(422, "validation_error");
  await streamRun(req, res, channel, typeof id === "string" && id !== "" ? id.toLowerCase() : null, payload);
}

/**
 * `POST /channels/webhook/{client_id}/newMessage`: the channel by its client id and its
 * checks, the body, the conversation (this channel's), the echo run in its turn: both
 * messages, the flow state and the run in one transaction; the new events out.
 */
async function webhookNewMessage(req: IncomingMessage, res: ServerResponse, clientId: string): Promise<void> {
  const channel = await store.findWebhookChannel(clientId);
  if (!channel || channel.type !== "webhook") throw new Refusal(404, "channel_not_found");
  if (channel.state === "archived") throw new Refusal(410, "channel_archived");
  if (channel.state === "inactive") throw new Refusal(409, "channel_inactive");
  requireJson(req);
  const input = parseBody(await readBody(req));
  if (typeof input.conversationId !== "string" || input.conversationId === "") throw new Refusal(422, "validation_error");
  const userInput = userText(input.userInput);
  const release = await takeTurn(input.conversationId);
  try {
    const conversation = await store.findConversation(input.conversationId);
    if (!conversation || conversation.channel_id !== channel.id || conversation.tenant_id !== channel.tenant_id)
      throw new Refusal(404, "conversation_not_found");
    const startedAt = new Date();
    const runId = randomUUID();
    const turn = echoTurn(conversation);
    const reply = `Echo: ${userInput}`;
    const completedAt = new Date();
    const at = completedAt.toISOString();
    await store.closeRun({
      conversationId: conversation.id,
      flowState: JSON.stringify({ turn }),
      at,
      messages: [
        message(conversation.id, 0, "user", userInput, startedAt.toISOString(), runId, null),
        message(conversation.id, 0, "assistant", reply, at, runId, { id: randomUUID(), type: channel.flow_name }),
      ],
      run: {
        id: runId,
        conversation_id: conversation.id,
        channel_id: channel.id,
        tenant_id: channel.tenant_id,
        status: "success",
        flow_name: channel.flow_name,
        flow_version: "1",
        result: JSON.stringify({ echo: userInput, turn }),
        error: null,
        execution_order: `["${channel.flow_name}"]`,
        started_at: startedAt.toISOString(),
        completed_at: at,
        duration_ms: completedAt.getTime() - startedAt.getTime(),
      },
    });
    send(res, 200, {
      conversation: {
        newEvents: [
          {
            type: "BOT_MESSAGE",
            data: { content: escapeHtml(reply), rawContent: reply, suggestions: [], expectedResponseType: "text", sources: [] },
            timestamp: at,
          },
        ],
      },
    });
  } finally {
    release();
  }
}

function historyEntry(m: MessageRow) {
  return {
    origin: m.origin,
    role: m.role,
    content: m.content,
    timestamp: m.timestamp,
    turn_index: Number(m.turn_index),
    token_count: Number(m.token_count),
    run_id: m.run_id,
    step_id: m.step_id,
    node_type: m.node_type,
    tool_calls: m.tool_calls === null ? null : JSON.parse(m.tool_calls),
    tool_call_id: m.tool_call_id,
    livechat_message_id: m.livechat_message_id,
    sender: m.sender,
  };
}

async function history(req: IncomingMessage, res: ServerResponse, sessionId: string, query: URLSearchParams): Promise<void> {
  const channel = await authenticate(req);
  const limit = Number(query.get("limit") ?? 50);
  const budget = Number(query.get("token_budget") ?? 0);
  if (!Number.isInteger(limit) || limit < 1 || limit > 200 || !Number.isInteger(budget) || budget < 0) throw new Refusal(422, "validation_error");
  const conversation = await store.findConversation(sessionId);
  if (!conversation || conversation.tenant_id !== channel.tenant_id || conversation.channel_id !== channel.id) {
    send(res, 404, { detail: `No conversation found for session id ${sessionId}` });
    return;
  }
  const rows = (await store.recentMessages(sessionId, limit)).reverse();
  let start = 0;
  if (budget > 0) {
    let total = 0;
    start = rows.length;
    while (start > 0 && total + Number((rows[start - 1] as MessageRow).token_count) <= budget) total += Number((rows[--start] as MessageRow).token_count);
  }
  const messages = rows.slice(start).map(historyEntry);
  const livechat = JSON.parse(channel.livechat_messages) as Record<string, string>;
  send(res, 200, {
    session_id: sessionId,
    messages,
    total_messages: messages.length,
    total_tokens: messages.reduce((sum, m) => sum + m.token_count, 0),
    mode: conversation.mode,
    livechat_status_message: livechat[conversation.mode] ?? null,
    livechat_conversation_id: conversation.livechat_conversation_id,
  });
}

const server = createServer((req, res) => {
  const url = req.url ?? "/";
  const q = url.indexOf("?");
  const path = q < 0 ? url : url.slice(0, q);
  let work: Promise<void>;
  const webhook = req.method === "POST" ? WEBHOOK_NEW_MESSAGE.exec(path) : null;
  if (path === "/public/v1/api/execute" && req.method === "POST") {
    work = execute(req, res);
  } else if (path === "/public/widget/chat" && req.method === "POST") {
    work = widgetChat(req, res);
  } else if (webhook) {
    work = webhookNewMessage(req, res, decodeURIComponent(webhook[1] as string));
  } else {
    const match = req.method === "GET" ? HISTORY_PATH.exec(path) : null;
    work = match
      ? history(req, res, decodeURIComponent(match[1] as string), new URLSearchParams(q < 0 ? "" : url.slice(q + 1)))
      : Promise.reject(new Refusal(404, "not_found"));
  }
  work.catch((error: unknown) => {
    if (res.headersSent) return void res.destroy();
    if (error instanceof Refusal) {
      // Like channelkit, an unread body is drained so the keep-alive connection stays usable.
      req.resume();
      send(res, error.status, { error: { code: error.code, message: error.code } });
    } else {
      console.error("baseline: unexpected error", error);
      send(res, 500, { error: { code: "runtime_error", message: "runtime_error" } });
    }
  });
});

server.listen(0, "127.0.0.1", () => {
  listenToParent(async () => {
    server.close();
    server.closeAllConnections();
    await store.close();
  });
  toParent({ type: "ready", port: (server.address() as AddressInfo).port });
});
