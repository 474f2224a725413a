import type { NewMessage, RunRecord, Storage } from "@channelkit/core";

const T0 = Date.parse("2025-01-01T00:00:00.000Z");
/** ISO 8601 time `seconds` after the fixed epoch of the storage contract. */
const at = (seconds: number) => new Date(T0 + seconds * 1000).toISOString();
const LEASE_SECONDS = 30;

/** A conversation {@link fillConversation} stored, and what it stored of it. */
export interface FilledConversation {
  id: string;
  /** Its runs' ids. */
  runIds: string[];
  /** How many messages and runs it has. */
  messages: number;
  runs: number;
  /** The text of each of its messages, none of which an audit event may hold. */
  contents: string[];
  /** The `Idempotency-Key` of its channel whose stored answer names it, when the storage keeps idempotency keys. */
  idempotencyKey: string | null;
}

/** What {@link fillConversation} writes besides the conversation's runs. */
export interface FillOptions {
  /** The end user named on its user messages' metadata (`platform_user_id`, as a chat platform's are). */
  externalUserId?: string;
  /** The plugin whose store keeps a value keyed by the conversation (`<channel id>:thread-of:<conversation id>`, as `@channelkit/chat` does). */
  pluginId?: string;
  /** Seconds after the fixed epoch at which its first run starts (its runs' leases lapse 30 s after each). */
  seconds?: number;
}

function message(content: string, role: NewMessage["role"], runId: string, metadata: Record<string, unknown> | null): NewMessage {
  return {
    origin: "agent",
    role,
    content,
    timestamp: at(0),
    tokenCount: Math.ceil(content.length / 4),
    runId,
    stepId: role === "user" ? null : crypto.randomUUID(),
    nodeType: role === "user" ? null : "echo",
    toolCalls: null,
    toolCallId: null,
    livechatMessageId: null,
    sender: null,
    metadata,
  };
}

/**
 * Stores a conversation of `channel` with a row in every table that may hold one of its rows:
 * a recorded run (resumable stream, a chunk, its last events), a second run, messages whose
 * metadata names the end user, a flow state, a live chat (mode, provider id, an agent's
 * message), an idempotency record whose answer names it, and a plugin store value keyed by
 * it. Every run ends, so that nothing is in flight once it returns. For the tests of
 * deleting conversations (`storage.deleteConversations`), on any store.
 */
export async function fillConversation(storage: Storage, channel: { id: string; tenantId: string }, options: FillOptions = {}): Promise<FilledConversation> {
  const id = crypto.randomUUID();
  const start = options.seconds ?? 0;
  const userMetadata = options.externalUserId === undefined ? null : { platform: "telegram", platform_user_id: options.externalUserId };
  const contents: string[] = [];
  const conversation = { id, tenantId: channel.tenantId, channelId: channel.id };
  const record = (runId: string, startedAt: string): RunRecord => ({
    id: runId,
    conversationId: id,
    channelId: channel.id,
    tenantId: channel.tenantId,
    status: "running",
    flowName: "echo",
    flowVersion: "1",
    result: null,
    error: null,
    executionOrder: [],
    startedAt,
    completedAt: startedAt,
    durationMs: 0,
  });
  const runIds: string[] = [];
  for (const [ticket, seconds] of [
    [0, start],
    [1, start + 2],
  ] as const) {
    const runId = crypto.randomUUID();
    runIds.push(runId);
    const said = `secret words ${crypto.randomUUID()}`;
    const reply = `secret reply ${crypto.randomUUID()}`;
    contents.push(said, reply);
    const userMessage = message(said, "user", runId, userMetadata);
    const recorded = ticket === 0;
    const began = await storage.beginRun({
      conversation: { ...conversation, isNew: ticket === 0 },
      run: record(runId, at(seconds)),
      userMessage,
      now: at(seconds),
      leaseUntil: at(seconds + LEASE_SECONDS),
      ...(recorded ? { stream: { aliveUntil: at(seconds + LEASE_SECONDS) } } : {}),
    });
    if (began?.claimed == null) throw new Error(`fillConversation: run ${ticket} did not get its turn at once`);
    if (recorded) {
      await storage.runStreams?.append(runId, 1, `data: {"type":"text-delta","delta":"${reply}"}\n\n`);
      await storage.runStreams?.follow?.(runId);
    }
    await storage.completeRun({
      run: {
        ...record(runId, at(seconds)),
        status: "success",
        result: { echo: said },
        executionOrder: ["echo"],
        completedAt: at(seconds + 1),
        durationMs: 1000,
      },
      conversation: { ...conversation, isNew: false },
      ticket,
      claimed: true,
      messages: [message(reply, "assistant", runId, null)],
      flowState: { said },
      claimUntil: at(seconds + 1 + LEASE_SECONDS),
      ...(recorded ? { streamEnd: `data: {"type":"finish","finishReason":"stop"}\n\n` } : {}),
    });
  }
  // A live chat: the conversation handed over, an agent's message.
  const stored = await storage.findConversation(id);
  if (!stored) throw new Error("fillConversation: the conversation was not stored");
  const agentSays = `secret agent ${crypto.randomUUID()}`;
  contents.push(agentSays);
  const live = await storage.updateLiveChat({
    conversationId: id,
    change: { from: stored.mode, since: stored.modeSince, to: "livechat_active", at: at(start + 5), livechatConversationId: `lc-${id}` },
    messages: [
      {
        ...message(agentSays, "assistant", runIds[0] as string, null),
        origin: "livechat",
        runId: null,
        stepId: null,
        nodeType: null,
        livechatMessageId: `lm-${id}`,
        sender: "agent",
      },
    ],
  });
  if (!live) throw new Error("fillConversation: the live chat was not stored");
  // An idempotent request whose answer names the conversation.
  let idempotencyKey: string | null = null;
  if (storage.idempotency) {
    const key = `order-${crypto.randomUUID()}`;
    idempotencyKey = key;
    const token = crypto.randomUUID();
    await storage.idempotency.claim({
      channelId: channel.id,
      key,
      requestHash: "c".repeat(64),
      token,
      now: at(start),
      expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
      lockedUntil: at(start + LEASE_SECONDS),
    });
    await storage.idempotency.complete(channel.id, key, token, { status: 200, kind: "json", body: JSON.stringify({ run_id: runIds[1], conversation_id: id }) });
  }
  if (options.pluginId !== undefined) await storage.pluginStore(options.pluginId).set(`${channel.id}:thread-of:${id}`, `thread-${id}`);
  return { id, runIds, messages: 5, runs: 2, contents, idempotencyKey };
}
