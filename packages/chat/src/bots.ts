import { type ChannelRecord, channelSettings, type ServiceContext } from "@channelkit/core";
import { Chat, type Thread } from "chat";
import { answer, type Incoming } from "./answer.js";
import { chosenSuggestion, SUGGESTION_ACTION } from "./suggestions.js";
import { type ChatPlatform, chatLogger } from "./platforms/index.js";
import { pluginStoreState } from "./state.js";

/** The plugin's id: the namespace of its store. */
export const PLUGIN_ID = "chat";

/** How long a platform's delivery is remembered, to answer its retries once: longer than any platform retries. */
const DEDUPE_TTL_MS = 24 * 60 * 60 * 1000;

interface Bot {
  chat: Chat;
  /** The channel's row it was made from: a changed channel (rotated credentials) gets a new bot. */
  updatedAt: string;
}

/**
 * The Chat SDK instance of each chat channel, made from the channel's own settings on its
 * first delivery and made again once the channel changed: several tenants each bring their
 * bot to one service.
 */
export class Bots {
  readonly #bots = new Map<string, Promise<Bot>>();
  readonly #platforms: ReadonlyMap<string, ChatPlatform>;

  constructor(platforms: readonly ChatPlatform[]) {
    this.#platforms = new Map(platforms.map((platform) => [platform.name, platform]));
  }

  /** The platform of a channel's type, or undefined for a channel of another type. */
  platformOf(channel: ChannelRecord): ChatPlatform | undefined {
    return this.#platforms.get(channel.type);
  }

  async of(ctx: ServiceContext, channel: ChannelRecord, platform: ChatPlatform): Promise<Chat> {
    const kept = this.#bots.get(channel.id);
    if (kept !== undefined) {
      const bot = await kept.catch(() => null);
      if (bot !== null && bot.updatedAt === channel.updatedAt) return bot.chat;
      if (this.#bots.get(channel.id) === kept) this.#bots.delete(channel.id);
      if (bot !== null) void bot.chat.shutdown().catch(() => undefined);
    }
    const made = this.#make(ctx, channel, platform);
    this.#bots.set(channel.id, made);
    made.catch(() => {
      if (this.#bots.get(channel.id) === made) this.#bots.delete(channel.id);
    });
    return (await made).chat;
  }

  async #make(ctx: ServiceContext, channel: ChannelRecord, platform: ChatPlatform): Promise<Bot> {
    const settings = await channelSettings(ctx, channel, platform.channelType);
    const logger = chatLogger(ctx.logger, `channelkit chat (channel ${channel.id})`);
    const chat = new Chat({
      userName: typeof settings.user_name === "string" ? settings.user_name : "channelkit",
      adapters: { [platform.name]: platform.adapter(settings, logger) },
      state: pluginStoreState(ctx.storage.pluginStore(PLUGIN_ID), channel.id),
      // No lock, no queue: every message reaches a handler, and channelkit's turns answer a
      // thread's messages one after another, in order, across instances.
      concurrency: { strategy: "concurrent" },
      dedupeTtlMs: DEDUPE_TTL_MS,
      logger,
    });
    const handle = (thread: Thread, message: Incoming) => answer(ctx, channel.id, platform, thread, message);
    chat.onDirectMessage(handle);
    chat.onSubscribedMessage(handle);
    chat.onNewMention(async (thread, message) => {
      // Mentioned once in a group, the bot follows the thread from then on.
      await thread.subscribe();
      await handle(thread, message);
    });
    // A suggestion's button pressed is the user saying it.
    chat.onAction(SUGGESTION_ACTION, async (event) => {
      if (event.thread === null) return;
      const text = await chosenSuggestion(ctx, channel.id, event.threadId, event.value);
      if (text === undefined) return;
      await handle(event.thread as Thread, { id: `${event.messageId}:${event.value}`, text, author: event.user });
    });
    await chat.initialize();
    return { chat, updatedAt: channel.updatedAt };
  }

  /** Stops every bot: `service.close()`. */
  async close(): Promise<void> {
    const bots = [...this.#bots.values()];
    this.#bots.clear();
    await Promise.all(bots.map(async (made) => (await made.catch(() => null))?.chat.shutdown()));
  }
}
