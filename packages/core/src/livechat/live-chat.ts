import type { Logger } from "../context.js";
import type { PluginRegistry } from "../plugin/registry.js";
import type { TokenEstimator } from "../conversations/tokens.js";
import { type MessageView, messageView } from "../conversations/message-view.js";
import { canonicalId } from "../storage/records.js";
import { ServiceError } from "../http/errors.js";
import { PushStream } from "../http/sse.js";
import { isoTimestamp } from "../runs/timestamp.js";
import type { ChannelRecord, ConversationMode, ConversationRecord, LiveFeed, MessageRecord, ModeChange, NewMessage, Storage } from "../storage/types.js";
import { DEFAULT_WAIT_TIMEOUT_MS, type ModeEvent, type ModeTransition, modeAt, nextMode, withHuman } from "./modes.js";
import type { LiveChatConversation, LiveChatProvider } from "./provider.js";
import type { agentMessageSchema } from "./schemas.js";
import type { z } from "zod";

/** A conversation's live chat as its user and its agents see it. */
export interface LiveChatState {
  /** The mode now: a wait past the channel's timeout reads `livechat_expired`, stored or not. */
  mode: ConversationMode;
  /** The channel's configured text for that mode, or null. */
  statusMessage: string | null;
  livechatConversationId: string | null;
}

/** What a tenant's agents are told, on the tenant's topic of the feed. */
export interface TenantSignal {
  type: "handover" | "message" | "mode";
  conversation_id: string;
  /** The message's turn, for `message`. */
  turn_index?: number;
}

/** A message from the human side, as parsed by {@link agentMessageSchema}. */
type AgentMessage = z.output<typeof agentMessageSchema>;

/** How many times an agent's action is retried when the conversation moved under it (another instance, the user). */
const MOVE_ATTEMPTS = 5;
/** Messages a provider gets as the transcript of a handover. */
const TRANSCRIPT_LENGTH = 50;

/** The feed topic of a conversation: its user's subscriptions listen to it. */
export const conversationTopic = (conversationId: string) => `conversation:${conversationId}`;
/** The feed topic of a tenant's live chats: its agents' feed listens to it. */
export const tenantTopic = (tenantId: string) => `livechat:${tenantId}`;

/**
 * The one place where live chat happens: it applies the mode machine to what is stored (a
 * compare-and-set, retried when another instance moved the conversation first), appends
 * the human side's messages in turn order, tells the provider, and rings the feed so that
 * subscribers on every instance read what changed. Runs (the driver), the user's routes
 * and the providers' routes all go through it.
 */
export class LiveChat {
  readonly provider: LiveChatProvider | null;
  readonly feed: LiveFeed;
  readonly #storage: Storage;
  readonly #logger: Logger;
  readonly #estimateTokens: TokenEstimator;
  /** Provider calls under way: `drain()` waits for them. */
  readonly #calls = new Set<Promise<void>>();
  /** Event streams open (subscriptions, the agents' feeds): `drain()` ends them. */
  readonly #streams = new Set<PushStream>();

  readonly #hooks: PluginRegistry | null;

  constructor(options: {
    storage: Storage;
    feed: LiveFeed;
    provider: LiveChatProvider | null;
    logger: Logger;
    estimateTokens: TokenEstimator;
    /** The plugins that hear of handovers, mode changes and the human side's messages. */
    hooks?: PluginRegistry;
  }) {
    this.#hooks = options.hooks ?? null;
    this.provider = options.provider;
    this.feed = options.feed;
    this.#storage = options.storage;
    this.#logger = options.logger;
    this.#estimateTokens = options.estimateTokens;
  }

  /** How long a handed-over conversation of `channel` waits for an agent. */
  waitTimeoutMs(channel: Pick<ChannelRecord, "livechatWaitTimeoutSeconds"> | null): number {
    const seconds = channel?.livechatWaitTimeoutSeconds;
    return seconds == null ? DEFAULT_WAIT_TIMEOUT_MS : seconds * 1000;
  }

  /** The conversation's live chat now, from what is stored. */
  state(channel: ChannelRecord | null, conversation: ConversationRecord, nowMs = Date.now()): LiveChatState {
    const mode = modeAt(conversation.mode, conversation.modeSince, nowMs, this.waitTimeoutMs(channel));
    return { mode, statusMessage: channel?.livechatMessages[mode] ?? null, livechatConversationId: conversation.livechatConversationId };
  }

  /** Whether a handover now finds a provider that can take it. */
  async available(channel: ChannelRecord, conversationId: string): Promise<boolean> {
    const provider = this.provider;
    if (!provider) return false;
    if (!provider.available) return true;
    try {
      return await provider.available({ tenantId: channel.tenantId, channelId: channel.id, conversationId });
    } catch (error) {
      this.#logger.warn(`channelkit: the live-chat provider "${provider.id}" failed to say whether an agent is available; the handover is unavailable`, error);
      return false;
    }
  }

  /**
   * After a run stored its outcome: rings the feed when it changed the mode or stored a
   * user's message for the human side, and tells the provider of a handover or of that
   * message.
   */
  afterRun(channel: ChannelRecord, conversationId: string, change: ModeChange | undefined, userMessage: MessageRecord | null): void {
    const about = { tenantId: channel.tenantId, channelId: channel.id, conversationId };
    if (userMessage) {
      this.#ring(about.tenantId, { type: "message", conversation_id: conversationId, turn_index: userMessage.turnIndex });
      const provider = this.provider;
      if (provider?.userMessage) {
        this.#call("userMessage", async () => {
          const conversation = await this.#storage.findConversation(conversationId);
          await provider.userMessage?.({ ...about, livechatConversationId: conversation?.livechatConversationId ?? null, message: messageView(userMessage) });
        });
      }
    }
    if (!change) return;
    this.#ring(about.tenantId, { type: change.to === "livechat_waiting" ? "handover" : "mode", conversation_id: conversationId });
    this.#hooks?.notify("modeChanged", { conversationId, channel, from: change.from, to: change.to });
    if (change.to === "livechat_waiting") this.#hooks?.notify("handover", { conversationId, channel });
    const provider = this.provider;
    if (change.to === "livechat_waiting" && provider?.handover) {
      this.#call("handover", async () => {
        const transcript = await this.#storage.listRecentMessages(conversationId, TRANSCRIPT_LENGTH);
        const conversation = await this.#storage.findConversation(conversationId);
        await provider.handover?.({ ...about, livechatConversationId: conversation?.livechatConversationId ?? null, transcript: transcript.map(messageView) });
      });
    }
  }

  /** The user leaves the queue or ends the live chat; the provider is told. */
  async cancel(conversationId: string, tenantId: string): Promise<LiveChatState> {
    const moved = await this.#move(conversationId, tenantId, (mode) => nextMode(mode, { type: "user_cancelled" }));
    const provider = this.provider;
    if (provider?.cancelled) {
      const event = conversationOf(moved.conversation);
      this.#call("cancelled", () => provider.cancelled?.(event));
    }
    return moved.state;
  }

  /**
   * An agent takes a waiting conversation (`livechat_active`): the live chat gets its id,
   * the provider's own when it gives one, else a new UUID. `tenantId` confines the call to
   * one tenant's conversations (the inbox's agents); a provider serving every tenant omits it.
   */
  async accept(conversationId: string, options: { tenantId?: string; livechatConversationId?: string } = {}): Promise<LiveChatState> {
    const id = options.livechatConversationId ?? crypto.randomUUID();
    return (await this.#moveBy(conversationId, options.tenantId, { type: "agent_joined" }, id)).state;
  }

  /** The agent ends an active live chat (`livechat_closed`): the user's next message goes to the bot. */
  async close(conversationId: string, options: { tenantId?: string } = {}): Promise<LiveChatState> {
    return (await this.#moveBy(conversationId, options.tenantId, { type: "agent_closed" })).state;
  }

  /** The provider took the handover but finds nobody (`livechat_unavailable`). */
  async unavailable(conversationId: string, options: { tenantId?: string } = {}): Promise<LiveChatState> {
    return (await this.#moveBy(conversationId, options.tenantId, { type: "provider_unavailable" })).state;
  }

  /**
   * Stores a message from the human side while it has the conversation (waiting or
   * active), with the next turn index. A message whose `livechat_message_id` is already
   * among the conversation's recent messages is not stored twice (a provider retrying).
   */
  async send(conversationId: string, input: AgentMessage, options: { tenantId?: string } = {}): Promise<MessageView> {
    const id = input.livechat_message_id;
    if (id !== undefined) {
      // Only the caller's own tenant's conversation is looked into: another tenant's is not
      // found, whatever the body names (its desk's ids included).
      const conversation = await this.#storage.findConversation(canonicalId(conversationId));
      if (!conversation || (options.tenantId !== undefined && conversation.tenantId !== options.tenantId)) throw new ServiceError("conversation_not_found");
      const recent = await this.#storage.listRecentMessages(conversation.id, TRANSCRIPT_LENGTH);
      const sent = recent.find((message) => message.origin === "livechat" && message.livechatMessageId === id);
      if (sent) return messageView(sent);
    }
    const nowMs = Date.now();
    const message: NewMessage = {
      origin: "livechat",
      role: input.sender === "system" ? "system" : "assistant",
      content: input.content,
      timestamp: isoTimestamp(nowMs),
      tokenCount: this.#estimateTokens(input.content),
      runId: null,
      stepId: null,
      nodeType: null,
      toolCalls: null,
      toolCallId: null,
      livechatMessageId: id ?? crypto.randomUUID(),
      sender: input.sender,
      metadata: null,
    };
    const moved = await this.#move(
      conversationId,
      options.tenantId,
      (mode) =>
        withHuman(mode) ? { to: mode, runsFlow: false } : { refused: `a message from the human side needs a waiting or active live chat, not ${mode}` },
      undefined,
      [message],
    );
    const stored = moved.messages[0] as MessageRecord;
    this.#ring(moved.conversation.tenantId, { type: "message", conversation_id: conversationId, turn_index: stored.turnIndex });
    const view = messageView(stored);
    if (moved.channel) this.#hooks?.notify("agentMessage", { conversationId: moved.conversation.id, channel: moved.channel, message: view });
    return view;
  }

  /** Subscribes to a conversation's changes (a doorbell: read the store on each call). */
  subscribe(conversationId: string, listener: () => void): Promise<() => void> {
    return this.feed.subscribe(conversationTopic(conversationId), () => listener());
  }

  /** Subscribes to what a tenant's agents are told: handovers, messages, mode changes. */
  subscribeTenant(tenantId: string, listener: (signal: TenantSignal) => void): Promise<() => void> {
    return this.feed.subscribe(tenantTopic(tenantId), (message) => {
      try {
        listener(JSON.parse(message) as TenantSignal);
      } catch (error) {
        this.#logger.warn("channelkit: a live-chat feed listener failed", error);
      }
    });
  }

  /**
   * An event stream that the service's `close()` ends, so that a server closing does not
   * wait forever for subscriptions that never end by themselves. `onClose` runs once.
   */
  openStream(onClose: () => void): PushStream {
    const stream: PushStream = new PushStream(() => {
      this.#streams.delete(stream);
      onClose();
    });
    this.#streams.add(stream);
    return stream;
  }

  /** Ends the open event streams (the service's `close()`, first). */
  endStreams(): void {
    for (const stream of [...this.#streams]) stream.end();
  }

  /** Waits for the provider calls under way (the service's `close()`, once runs are stored). */
  async drain(): Promise<void> {
    while (this.#calls.size > 0) await Promise.allSettled([...this.#calls]);
  }

  #moveBy(conversationId: string, tenantId: string | undefined, event: ModeEvent, livechatConversationId?: string) {
    return this.#move(conversationId, tenantId, (mode) => nextMode(mode, event), livechatConversationId);
  }

  /**
   * Applies `decide` to the conversation's mode now, as a compare-and-set on what was read;
   * read again and decided again when another instance moved it first.
   */
  async #move(
    conversationId: string,
    tenantId: string | undefined,
    decide: (mode: ConversationMode) => ModeTransition,
    livechatConversationId?: string,
    messages: NewMessage[] = [],
  ): Promise<{ conversation: ConversationRecord; channel: ChannelRecord | null; messages: MessageRecord[]; state: LiveChatState }> {
    for (let attempt = 0; attempt < MOVE_ATTEMPTS; attempt++) {
      const conversation = await this.#storage.findConversation(canonicalId(conversationId));
      if (!conversation || (tenantId !== undefined && conversation.tenantId !== tenantId)) throw new ServiceError("conversation_not_found");
      const channel = await this.#storage.findChannel(conversation.channelId);
      const nowMs = Date.now();
      const { mode } = this.state(channel, conversation, nowMs);
      const transition = decide(mode);
      if ("refused" in transition) throw new ServiceError("livechat_conflict", `${capitalize(transition.refused)}.`);
      const change: ModeChange = { from: conversation.mode, since: conversation.modeSince, to: transition.to, at: isoTimestamp(nowMs) };
      if (livechatConversationId !== undefined) change.livechatConversationId = livechatConversationId;
      const updated = await this.#storage.updateLiveChat({ conversationId: conversation.id, change, messages });
      if (!updated) continue;
      if (transition.to !== conversation.mode) {
        this.#ring(conversation.tenantId, { type: "mode", conversation_id: conversationId });
        if (channel) this.#hooks?.notify("modeChanged", { conversationId: conversation.id, channel, from: conversation.mode, to: transition.to });
      }
      return { ...updated, channel, state: this.state(channel, updated.conversation, nowMs) };
    }
    throw new ServiceError("livechat_conflict", "The conversation kept changing under this request; try again.");
  }

  /** Tells the conversation's subscribers and its tenant's agents, on every instance. */
  #ring(tenantId: string, signal: TenantSignal): void {
    const warn = (error: unknown) => this.#logger.warn("channelkit: the live feed could not be told of a live-chat change", error);
    this.feed.publish(conversationTopic(signal.conversation_id), signal.type).catch(warn);
    this.feed.publish(tenantTopic(tenantId), JSON.stringify(signal)).catch(warn);
  }

  /** Calls the provider off the request's path; a failure is logged, never thrown. */
  #call(hook: string, call: () => void | Promise<void>): void {
    const name = this.provider?.id ?? "provider";
    const promise = Promise.resolve()
      .then(call)
      .catch((error) => this.#logger.warn(`channelkit: the live-chat provider "${name}" failed in ${hook}()`, error))
      .finally(() => this.#calls.delete(promise));
    this.#calls.add(promise);
  }
}

function conversationOf(conversation: ConversationRecord): LiveChatConversation {
  return {
    tenantId: conversation.tenantId,
    channelId: conversation.channelId,
    conversationId: conversation.id,
    livechatConversationId: conversation.livechatConversationId,
  };
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
