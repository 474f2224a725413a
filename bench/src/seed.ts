/**
 * The benchmark's data set, created through channelkit's own admin API and storage, then
 * read by both servers: the channels the scenarios use, enough other keys and messages that
 * the indexes matter, and the two history conversations (100 and 10,000 messages).
 */
import { createChannelService, generateApiKey, hashApiKey } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { openStorage } from "@channelkit/kysely";
import { sql } from "kysely";
import { BENCH_SECRET_KEY, type StoreKind } from "./shared.js";

export interface Seed {
  /** Key of a prod server channel bound to `echo`. */
  echoKey: string;
  /** Key of a channel like the echo one, with resumable streams (docs/streaming.md). */
  resumableEchoKey: string;
  /** Key of a channel that requires signatures, and its signing secret. */
  signedKey: string;
  signingSecret: string;
  /** Key of a channel bound to `slow` (50 words, 100 ms apart). */
  slowKey: string;
  /** The same with resumable streams. */
  resumableSlowKey: string;
  /** A well-formed key that is not stored. */
  unknownKey: string;
  /** Conversations of the echo channel with 100 and 10,000 messages. */
  conversation100: string;
  conversation10k: string;
  /** A webhook channel bound to `echo` (its `client_id`) and conversations opened on it by `startConversation`. */
  webhookClientId: string;
  webhookConversations: string[];
  /** A publishable key of a public api channel bound to `echo` (the widget's), the origin it allows, and conversations of it. */
  widgetKey: string;
  widgetOrigin: string;
  widgetConversations: string[];
  /** Counts, for the report. */
  rows: { apiKeys: number; conversations: number; messages: number; runs: number };
}

const FILLER_CHANNELS = 2000;
const FILLER_CONVERSATIONS = 50;
const FILLER_MESSAGES = 200;
/** Conversations without messages, so that the conversations table is not tiny either. */
const EMPTY_CONVERSATIONS = 5000;
/**
 * Conversations of the webhook and widget channels the load spreads over: runs of one
 * conversation take turns, so concurrent requests go to different ones.
 */
export const CHANNEL_CONVERSATIONS = 64;
const WIDGET_ORIGIN = "https://widget.bench.example";
/**
 * The webhook and widget channels' own rate limits: counted as by default (the counter's
 * write per request stays in the measurement) but high enough never to refuse the load,
 * which comes from one address: the defaults allow 1,200 a minute per client address.
 */
const UNREACHED = { requests: 1_000_000_000, windowSeconds: 60 };

/** Alternating user and assistant messages of about 120 characters (30 tokens). */
function messageRows(conversationId: string, count: number, runId: string) {
  const base = Date.UTC(2024, 0, 1);
  return Array.from({ length: count }, (_, turn) => ({
    conversation_id: conversationId,
    turn_index: turn,
    origin: "agent",
    role: turn % 2 === 0 ? "user" : "assistant",
    content: `Message ${turn}: ${"the quick brown fox jumps over the lazy dog ".repeat(3).slice(0, 110)}`,
    timestamp: new Date(base + turn * 1000).toISOString(),
    token_count: 30,
    run_id: runId,
    step_id: null,
    node_type: null,
    tool_calls: null,
    tool_call_id: null,
    livechat_message_id: null,
    sender: null,
  }));
}

export async function seed(store: StoreKind, location: string): Promise<Seed> {
  const storage = openStorage(location);
  await storage.migrate();
  const service = await createChannelService({ storage, flows: demoFlows, secretKey: BENCH_SECRET_KEY });
  const { db } = storage;
  try {
    const { tenant } = await service.admin.createTenant({ name: "bench" });
    const echo = await service.admin.createChannel({ tenantId: tenant.id, flow: "echo", environment: "prod" });
    const resumable = await service.admin.createChannel({ tenantId: tenant.id, flow: "echo", environment: "prod", resumableStreams: true });
    const signed = await service.admin.createChannel({ tenantId: tenant.id, flow: "echo", environment: "prod", requireSignature: true });
    const slow = await service.admin.createChannel({ tenantId: tenant.id, flow: "slow", environment: "prod", defaultStream: true });
    const resumableSlow = await service.admin.createChannel({
      tenantId: tenant.id,
      flow: "slow",
      environment: "prod",
      defaultStream: true,
      resumableStreams: true,
    });
    if (!signed.signing_secret) throw new Error("bench: the signed channel got no signing secret");
    const webhook = await service.admin.createChannel({
      tenantId: tenant.id,
      flow: "echo",
      type: "webhook",
      languages: ["en_US"],
      rateLimits: { webhookClient: UNREACHED, clientAddress: UNREACHED },
    });
    const widget = await service.admin.createChannel({
      tenantId: tenant.id,
      flow: "echo",
      mode: "public",
      allowedOrigins: [WIDGET_ORIGIN],
      rateLimits: { publishableKey: UNREACHED, clientAddress: UNREACHED },
    });
    const webhookClientId = webhook.channel.client_id;
    if (!webhookClientId) throw new Error("bench: the webhook channel got no client_id");
    // Their conversations, opened as their clients open them (through the service's routes).
    const call = async (path: string, body: unknown, headers: Record<string, string> = {}) => {
      const response = await service.handler(
        new Request(`http://bench${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) }),
      );
      const text = await response.text();
      if (response.status !== 200) throw new Error(`bench: seeding ${path} answered ${response.status}: ${text.slice(0, 200)}`);
      return text;
    };
    const webhookConversations: string[] = [];
    const widgetConversations: string[] = [];
    for (let i = 0; i < CHANNEL_CONVERSATIONS; i++) {
      const started = JSON.parse(await call(`/channels/webhook/${webhookClientId}/startConversation`, { language: "en_US" })) as {
        conversation: { conversation: { id: string } };
      };
      webhookConversations.push(started.conversation.conversation.id);
      const stream = await call("/public/widget/chat", { payload: "Hello, widget!" }, { authorization: `Bearer ${widget.api_key}`, origin: WIDGET_ORIGIN });
      const id = /"conversation_id":"([^"]+)"/.exec(stream)?.[1];
      if (!id) throw new Error(`bench: the widget's first chat named no conversation: ${stream.slice(0, 200)}`);
      widgetConversations.push(id);
    }

    // Other tenants' channels and keys, so that the key lookup has an index to use.
    const now = new Date().toISOString();
    const { tenant: filler } = await service.admin.createTenant({ name: "filler" });
    const template = await storage.findChannel(echo.channel.id);
    if (!template) throw new Error("bench: the echo channel is missing");
    for (let offset = 0; offset < FILLER_CHANNELS; offset += 250) {
      const channels = [];
      const keys = [];
      for (let i = offset; i < Math.min(FILLER_CHANNELS, offset + 250); i++) {
        const id = crypto.randomUUID();
        channels.push({
          id,
          tenant_id: filler.id,
          name: null,
          type: "api",
          mode: "server",
          environment: "prod",
          state: "active",
          flow_name: "echo",
          allowed_origins: "[]",
          default_stream: 0,
          require_signature: 0,
          signing_secret_encrypted: null,
          api_key_hint: null,
          client_id: null,
          languages: "[]",
          livechat_messages: "{}",
          created_at: now,
          updated_at: now,
        });
        keys.push({
          id: crypto.randomUUID(),
          channel_id: id,
          tenant_id: filler.id,
          hash: await hashApiKey(generateApiKey("svc_live_")),
          prefix: "svc_live_",
          environment: "prod",
          hint: "svc_live_****fill",
          created_at: now,
          expires_at: null,
          revoked_at: null,
        });
      }
      await db.insertInto("channels").values(channels).execute();
      await db.insertInto("api_keys").values(keys).execute();
    }

    // One stored run per seeded conversation, so the runs table is not empty either: on an
    // empty table Postgres' planner prefers a sequential scan (for the run's `update runs …
    // where id = $`), which the query-plan check flags though it would never be chosen on a
    // table in use.
    const runs: { id: string; conversation_id: string; channel_id: string }[] = [];
    // Conversations: the two measured ones, and others whose messages share the table.
    const conversation = async (messages: number) => {
      const id = crypto.randomUUID();
      const runId = crypto.randomUUID();
      runs.push({ id: runId, conversation_id: id, channel_id: echo.channel.id });
      await db
        .insertInto("conversations")
        .values({
          id,
          tenant_id: tenant.id,
          channel_id: echo.channel.id,
          mode: "bot",
          flow_state: null,
          next_turn: messages,
          livechat_conversation_id: null,
          created_at: now,
          updated_at: now,
        })
        .execute();
      const rows = messageRows(id, messages, runId);
      for (let i = 0; i < rows.length; i += 500)
        await db
          .insertInto("messages")
          .values(rows.slice(i, i + 500))
          .execute();
      return id;
    };
    const conversation100 = await conversation(100);
    const conversation10k = await conversation(10_000);
    for (let i = 0; i < FILLER_CONVERSATIONS; i++) await conversation(FILLER_MESSAGES);
    for (let offset = 0; offset < EMPTY_CONVERSATIONS; offset += 500) {
      const rows = Array.from({ length: Math.min(500, EMPTY_CONVERSATIONS - offset) }, () => ({
        id: crypto.randomUUID(),
        tenant_id: tenant.id,
        channel_id: template.id,
        mode: "bot",
        flow_state: null,
        next_turn: 0,
        livechat_conversation_id: null,
        created_at: now,
        updated_at: now,
      }));
      await db.insertInto("conversations").values(rows).execute();
      for (const row of rows) runs.push({ id: crypto.randomUUID(), conversation_id: row.id, channel_id: template.id });
    }
    for (let offset = 0; offset < runs.length; offset += 500) {
      const rows = runs.slice(offset, offset + 500).map((run) => ({
        ...run,
        tenant_id: tenant.id,
        status: "success",
        flow_name: "echo",
        flow_version: "1",
        result: null,
        error: null,
        execution_order: '["echo"]',
        started_at: now,
        completed_at: now,
        duration_ms: 1,
        ticket: null,
      }));
      await db.insertInto("runs").values(rows).execute();
    }
    // A maintained Postgres has statistics (autovacuum analyzes); a fresh one must be told.
    if (store === "postgres") await sql`ANALYZE`.execute(db);

    return {
      echoKey: echo.api_key,
      resumableEchoKey: resumable.api_key,
      signedKey: signed.api_key,
      signingSecret: signed.signing_secret,
      slowKey: slow.api_key,
      resumableSlowKey: resumableSlow.api_key,
      unknownKey: generateApiKey("svc_live_"),
      conversation100,
      conversation10k,
      webhookClientId,
      webhookConversations,
      widgetKey: widget.api_key,
      widgetOrigin: WIDGET_ORIGIN,
      widgetConversations,
      rows: {
        apiKeys: FILLER_CHANNELS + 7,
        conversations: 2 + FILLER_CONVERSATIONS + EMPTY_CONVERSATIONS + 2 * CHANNEL_CONVERSATIONS,
        messages: 10_100 + FILLER_CONVERSATIONS * FILLER_MESSAGES + 3 * CHANNEL_CONVERSATIONS,
        runs: runs.length + 2 * CHANNEL_CONVERSATIONS,
      },
    };
  } finally {
    await service.close();
  }
}
